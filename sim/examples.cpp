#include "sim/examples.hpp"

// The scenarios below name only the fields they set (designated initializers); the rest keep
// their default member initializers, as the language guarantees. g++ 12's
// -Wmissing-field-initializers still warns for each field left out, which here says nothing.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace skbsim::sim {

std::uint32_t ipv4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) noexcept {
  return (static_cast<std::uint32_t>(a) << 24) | (static_cast<std::uint32_t>(b) << 16) |
         (static_cast<std::uint32_t>(c) << 8) | d;
}

CostModel uniform_cost(double clock_ghz, double call_cycles, double copy_bytes_per_ns,
                       double csum_bytes_per_ns, double fused_bytes_per_ns) {
  CostModel m;
  const double ps_per_cycle = 1000.0 / clock_ghz;
  for (auto& c : m.call_ps) {
    c = static_cast<std::int64_t>(call_cycles * ps_per_cycle);
  }
  m.copy_fs_per_byte = static_cast<std::int64_t>(1e6 / copy_bytes_per_ns);
  m.csum_fs_per_byte = static_cast<std::int64_t>(1e6 / csum_bytes_per_ns);
  m.fused_fs_per_byte = static_cast<std::int64_t>(1e6 / fused_bytes_per_ns);
  m.page_ref_ps = static_cast<std::int64_t>(20 * ps_per_cycle);
  return m;
}

namespace {

ScenarioSpec two_hosts(KernelVersion k, const CostModel& cost) {
  ScenarioSpec s;
  s.kernel = k;
  s.cost = cost;
  s.hosts = {{"A", 2, 2}, {"B", 2, 2}};
  return s;
}

}  // namespace

ScenarioSpec thread2007(Thread2007 config, const CostModel& cost) {
  ScenarioSpec s = two_hosts(KernelVersion::k2_6_20, cost);
  const std::uint32_t a = ipv4(10, 0, 0, 1);
  const std::uint32_t b = ipv4(10, 0, 0, 2);
  const std::uint32_t ct = ipv4(10, 0, 1, 2);
  NamespaceSpec root_a{"A/root", "A", false, {a}, {{ipv4(10, 0, 0, 0), 24, "A/eth0"}}};
  NamespaceSpec root_b{"B/root", "B", false, {b}, {{ipv4(10, 0, 0, 0), 16, "B/eth0"}}};
  DeviceSpec eth_a{.name = "A/eth0", .kind = DevKind::kNic, .ns = "A/root", .peer = "B/eth0"};
  DeviceSpec eth_b{.name = "B/eth0", .kind = DevKind::kNic, .ns = "B/root", .peer = "A/eth0"};
  s.devices = {eth_a, eth_b};
  FlowSpec f{.from_ns = "A/root", .from_addr = a, .to_ns = "B/root", .to_addr = b};
  if (config != Thread2007::kNoContainer) {
    root_a.ip_forward = true;
    root_a.routes.push_back({ipv4(10, 0, 1, 0), 24, "A/etun0"});
    s.namespaces.push_back({"A/ct", "A", false, {ct}, {{0, 0, "A/etun1"}}});
    s.devices.push_back({.name = "A/etun0", .kind = DevKind::kEtun, .ns = "A/root", .peer = "A/etun1"});
    s.devices.push_back({.name = "A/etun1", .kind = DevKind::kEtun, .ns = "A/ct", .peer = "A/etun0"});
    f.from_ns = "A/ct";
    f.from_addr = ct;
  }
  s.namespaces.insert(s.namespaces.begin(), {root_a, root_b});
  if (config == Thread2007::kContainerPatch) {
    s.patches.skip_cow_from = {DevKind::kEtun, DevKind::kVenet};
  }
  s.flows = {f};
  return s;
}

ScenarioSpec container_veth_6x(const CostModel& cost, bool veth_offloads) {
  ScenarioSpec s = two_hosts(KernelVersion::k6x, cost);
  const std::uint32_t a = ipv4(10, 0, 0, 1);
  const std::uint32_t b = ipv4(10, 0, 0, 2);
  const std::uint32_t ct = ipv4(10, 0, 1, 2);
  s.namespaces = {
      {"A/root", "A", true, {a}, {{ipv4(10, 0, 0, 0), 24, "A/eth0"}, {ipv4(10, 0, 1, 0), 24, "A/veth0"}}},
      {"B/root", "B", false, {b}, {{ipv4(10, 0, 0, 0), 16, "B/eth0"}}},
      {"A/ct", "A", false, {ct}, {{0, 0, "A/veth1"}}},
  };
  DeviceSpec eth_a{.name = "A/eth0", .kind = DevKind::kNic, .ns = "A/root", .peer = "B/eth0",
                   .rate_mbps = 10000, .modern = true};
  DeviceSpec eth_b{.name = "B/eth0", .kind = DevKind::kNic, .ns = "B/root", .peer = "A/eth0",
                   .rate_mbps = 10000, .modern = true};
  DeviceSpec v0{.name = "A/veth0", .kind = DevKind::kVeth, .ns = "A/root", .peer = "A/veth1"};
  DeviceSpec v1{.name = "A/veth1", .kind = DevKind::kVeth, .ns = "A/ct", .peer = "A/veth0"};
  if (!veth_offloads) {
    v0.features = Features{feat::kHighDma | feat::kLltx};
    v1.features = Features{feat::kHighDma | feat::kLltx};
  }
  s.devices = {eth_a, eth_b, v0, v1};
  s.flows = {FlowSpec{.from_ns = "A/ct", .from_addr = ct, .to_ns = "B/root", .to_addr = b,
                      .sndbuf = 1 << 20, .rcvbuf = 1 << 20}};
  return s;
}

ScenarioSpec bridged(ScenarioSpec s) {
  const bool old = s.kernel == KernelVersion::k2_6_20;
  const std::string port = old ? "A/etun0" : "A/veth0";
  const std::string inner = old ? "A/etun1" : "A/veth1";
  const std::uint32_t ct = ipv4(10, 0, 0, 3);
  for (NamespaceSpec& n : s.namespaces) {
    if (n.name == "A/root") {
      n.ip_forward = false;
      n.routes = {{ipv4(10, 0, 0, 0), 24, "A/br0"}};
    } else if (n.name == "A/ct") {
      n.addresses = {ct};
      n.routes = {{ipv4(10, 0, 0, 0), 24, inner}};
    }
  }
  s.devices.push_back({.name = "A/br0", .kind = DevKind::kBridge, .ns = "A/root",
                       .ports = {port, "A/eth0"}});
  for (FlowSpec& f : s.flows) {
    f.from_addr = ct;
  }
  return s;
}

ScenarioSpec with_traffic(ScenarioSpec s, TrafficType t) {
  for (FlowSpec& f : s.flows) {
    f.type = t;
    if (t == TrafficType::kUdpStream) {
      f.send_size = 1472;
    }
  }
  return s;
}

}  // namespace skbsim::sim
