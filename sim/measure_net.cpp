// measure_net.cpp — building and removing the measurement namespaces with ip, ethtool, sysctl.

#include "sim/measure_net.hpp"

#include <algorithm>
#include <array>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/measure_host.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace skbsim::sim::measure {
namespace fs = std::filesystem;

namespace {

constexpr std::array<std::pair<Topology, std::string_view>, 3> kTopologies = {{
    {Topology::kDirect, "direct"},
    {Topology::kForward, "forward"},
    {Topology::kBridge, "bridge"},
}};
constexpr std::array<std::pair<Variant, std::string_view>, 5> kVariants = {{
    {Variant::kOn, "on"},
    {Variant::kOff, "off"},
    {Variant::kTsoOff, "tso-off"},
    {Variant::kSgOff, "sg-off"},
    {Variant::kCsumOff, "csum-off"},
}};

// ethtool feature -> the scenario format's NETIF_F_* name (6.x).
constexpr std::array<std::pair<std::string_view, std::string_view>, 9> kNetifOf = {{
    {"tx-scatter-gather", "NETIF_F_SG"},
    {"tx-checksum-ipv4", "NETIF_F_IP_CSUM"},
    {"tx-checksum-ip-generic", "NETIF_F_HW_CSUM"},
    {"tx-checksum-ipv6", "NETIF_F_IPV6_CSUM"},
    {"highdma", "NETIF_F_HIGHDMA"},
    {"tx-scatter-gather-fraglist", "NETIF_F_FRAGLIST"},
    {"tx-tcp-segmentation", "NETIF_F_TSO"},
    {"rx-checksumming", "NETIF_F_RXCSUM"},
    {"generic-receive-offload", "NETIF_F_GRO"},
}};

}  // namespace

std::string_view topology_name(Topology t) {
  for (const auto& [k, n] : kTopologies) {
    if (k == t) {
      return n;
    }
  }
  return "?";
}

std::string_view variant_name(Variant v) {
  for (const auto& [k, n] : kVariants) {
    if (k == v) {
      return n;
    }
  }
  return "?";
}

std::optional<Topology> topology_from_name(std::string_view s) {
  for (const auto& [k, n] : kTopologies) {
    if (n == s) {
      return k;
    }
  }
  return std::nullopt;
}

std::optional<Variant> variant_from_name(std::string_view s) {
  for (const auto& [k, n] : kVariants) {
    if (n == s) {
      return k;
    }
  }
  return std::nullopt;
}

std::vector<std::string> variant_ethtool_args(Variant v) {
  switch (v) {
    case Variant::kOn:
      return {};
    case Variant::kOff:
      return {"tx", "off", "rx", "off", "sg", "off", "tso", "off", "gso", "off", "gro", "off"};
    case Variant::kTsoOff:
      return {"tso", "off"};
    case Variant::kSgOff:
      return {"sg", "off"};
    case Variant::kCsumOff:
      return {"tx", "off", "rx", "off"};
  }
  return {};
}

std::string_view role_name(Role r) {
  switch (r) {
    case Role::kClient:
      return "client";
    case Role::kHost:
      return "host";
    case Role::kServer:
      return "server";
  }
  return "?";
}

const PlanDevice& NetPlan::device(std::string_view ifname) const {
  for (const PlanDevice& d : devices) {
    if (d.ifname == ifname) {
      return d;
    }
  }
  throw MeasureError("internal: no device " + std::string(ifname) + " in the plan");
}

RefusedFlag refused_congestion_control(const std::string& name, const std::string& why) {
  std::ifstream in("/proc/sys/net/ipv4/tcp_available_congestion_control");
  std::string available;
  std::getline(in, available);
  return RefusedFlag("--congestion-control", "expected an algorithm this kernel has (" + available +
                                                 ", or a module it can load), got \"" + name +
                                                 "\" (" + why + ")");
}

const PlanDevice& NetPlan::end_of(Role r) const {
  for (const PlanDevice& d : devices) {
    if (d.ns == r && d.veth && !d.address.empty()) {
      return d;
    }
  }
  throw MeasureError("internal: no addressed veth end in the " + std::string(role_name(r)) +
                     " namespace");
}

NetPlan plan_for(Topology t) {
  NetPlan p;
  p.topology = t;
  switch (t) {
    case Topology::kDirect:
      p.namespaces = {Role::kClient, Role::kServer};
      p.devices = {
          {"skbm-c0", "M/c0", Role::kClient, "skbm-s0", true, "10.201.0.1/24", ""},
          {"skbm-s0", "M/s0", Role::kServer, "skbm-c0", true, "10.201.0.2/24", ""},
      };
      p.server_address = "10.201.0.2";
      break;
    case Topology::kForward:
      p.namespaces = {Role::kClient, Role::kHost, Role::kServer};
      p.devices = {
          {"skbm-c0", "M/c0", Role::kClient, "skbm-hc", true, "10.202.1.2/24", ""},
          {"skbm-hc", "M/hc", Role::kHost, "skbm-c0", true, "10.202.1.1/24", ""},
          {"skbm-hs", "M/hs", Role::kHost, "skbm-s0", true, "10.202.2.1/24", ""},
          {"skbm-s0", "M/s0", Role::kServer, "skbm-hs", true, "10.202.2.2/24", ""},
      };
      p.routes = {{Role::kClient, "default", "10.202.1.1", "skbm-c0"},
                  {Role::kServer, "default", "10.202.2.1", "skbm-s0"}};
      p.ip_forward = true;
      p.server_address = "10.202.2.2";
      break;
    case Topology::kBridge:
      p.namespaces = {Role::kClient, Role::kHost, Role::kServer};
      p.devices = {
          {"skbm-c0", "M/c0", Role::kClient, "skbm-hc", true, "10.203.0.2/24", ""},
          {"skbm-hc", "M/hc", Role::kHost, "skbm-c0", true, "", "skbm-br0"},
          {"skbm-hs", "M/hs", Role::kHost, "skbm-s0", true, "", "skbm-br0"},
          {"skbm-s0", "M/s0", Role::kServer, "skbm-hs", true, "10.203.0.3/24", ""},
          {"skbm-br0", "M/br0", Role::kHost, "", false, "", ""},
      };
      p.server_address = "10.203.0.3";
      break;
  }
  return p;
}

std::string namespace_name(int pid, Role role) {
  return "skbsim-" + std::to_string(pid) + "-" + std::string(role_name(role));
}

std::map<std::string, bool> parse_ethtool_features(const std::string& text) {
  std::map<std::string, bool> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || line.rfind("Features for", 0) == 0) {
      continue;
    }
    const auto b = line.find_first_not_of(" \t");
    const std::string name = line.substr(b, colon - b);
    const std::string rest = line.substr(colon + 1);
    const auto v = rest.find_first_not_of(' ');
    if (v == std::string::npos) {
      continue;
    }
    if (rest.compare(v, 2, "on") == 0) {
      out[name] = true;
    } else if (rest.compare(v, 3, "off") == 0) {
      out[name] = false;
    }
  }
  return out;
}

std::vector<std::string> netif_features(const std::map<std::string, bool>& ethtool) {
  std::vector<std::string> out;
  for (const auto& [eth, netif] : kNetifOf) {
    const auto it = ethtool.find(std::string(eth));
    if (it != ethtool.end() && it->second) {
      out.emplace_back(netif);
    }
  }
  out.emplace_back("NETIF_F_LLTX");
  return out;
}

const std::vector<std::string>& recorded_ethtool_features() {
  static const std::vector<std::string> recorded = {
      "rx-checksumming",
      "tx-checksumming",
      "tx-checksum-ipv4",
      "tx-checksum-ip-generic",
      "tx-checksum-ipv6",
      "scatter-gather",
      "tx-scatter-gather",
      "tx-scatter-gather-fraglist",
      "tcp-segmentation-offload",
      "tx-tcp-segmentation",
      "generic-segmentation-offload",
      "generic-receive-offload",
      "rx-gro-list",
      "highdma",
  };
  return recorded;
}

bool in_chroot() {
  // A chrooted process's mountinfo lists only the mounts below its root, paths relative to it;
  // the file system the chroot directory lives on is mounted above it, so nothing is mounted at
  // "/" (a container or a machine always has a root mount). No mountinfo at all: no /proc, no
  // namespaces to enter either.
  std::ifstream in("/proc/self/mountinfo");
  if (!in) {
    return true;
  }
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, dev, root, mount_point;
    if (f >> id >> parent >> dev >> root >> mount_point && mount_point == "/") {
      return false;
    }
  }
  return true;
}

std::vector<std::string> existing_skbsim_namespaces() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/run/netns", ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("skbsim-", 0) == 0) {
      out.push_back(n);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Lab::Lab(NetPlan plan, const Tools& tools, ScratchDir& scratch)
    : plan_(std::move(plan)), tools_(tools), scratch_(scratch), pid_(::getpid()) {
  try {
    build();
  } catch (...) {
    destroy();
    throw;
  }
}

Lab::~Lab() {
  destroy();
}

namespace {

// In a child that has joined `netns_path`: one non-blocking connect to addr:9, waiting up to
// 200 ms. Exit status 0 when it was answered (refused or accepted), 1 when not, 2 on error. Only
// system calls between fork and _exit.
int answered_in_child(const std::string& netns_path, const std::string& addr) {
  in_addr a{};
  if (inet_pton(AF_INET, addr.c_str(), &a) != 1) {
    return -1;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    return -1;
  }
  if (pid == 0) {
    const int nsfd = open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) {
      _exit(2);
    }
    const int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(9);
    sin.sin_addr = a;
    if (s < 0) {
      _exit(2);
    }
    if (connect(s, reinterpret_cast<const sockaddr*>(&sin), sizeof sin) == 0) {
      _exit(0);
    }
    if (errno == ECONNREFUSED) {
      _exit(0);
    }
    pollfd p{s, POLLOUT, 0};
    if (poll(&p, 1, 200) == 1) {
      _exit(0);  // refused or connected: either way an answer came back
    }
    _exit(1);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

double Lab::wait_until_connected() {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string path = "/run/netns/" + ns(Role::kClient);
  const std::string addr = plan_.server_address.substr(0, plan_.server_address.find('/'));
  while (true) {
    throw_if_interrupted();
    const int r = answered_in_child(path, addr);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r == 0) {
      return waited;
    }
    if (r != 1) {
      throw MeasureError("could not test the path from " + ns(Role::kClient) + " to " + addr);
    }
    if (waited > 10) {
      throw MeasureError("no answer from " + addr + " through the " +
                         std::string(topology_name(plan_.topology)) + " path within 10 s");
    }
  }
}

std::vector<std::string> Lab::in(Role r) const {
  return {tools_.ip, "netns", "exec", ns(r)};
}

void Lab::build() {
  const std::string& ip = tools_.ip;
  for (Role r : plan_.namespaces) {
    run_checked({ip, "netns", "add", ns(r)}, scratch_);
    created_.push_back(ns(r));
    run_checked({ip, "-n", ns(r), "link", "set", "lo", "up"}, scratch_);
  }
  // Each veth pair once, created in the first end's namespace with the peer moved straight into
  // its own: neither end is ever in the root namespace.
  for (const PlanDevice& d : plan_.devices) {
    if (!d.veth || d.ifname > d.peer) {
      continue;
    }
    const PlanDevice& peer = plan_.device(d.peer);
    run_checked({ip, "-n", ns(d.ns), "link", "add", d.ifname, "type", "veth", "peer", "name",
                 peer.ifname, "netns", ns(peer.ns)},
                scratch_);
  }
  for (const PlanDevice& d : plan_.devices) {
    if (!d.veth) {
      // STP off (the default) puts ports straight into forwarding.
      run_checked({ip, "-n", ns(d.ns), "link", "add", d.ifname, "type", "bridge", "stp_state", "0",
                   "forward_delay", "0"},
                  scratch_);
    }
  }
  for (const PlanDevice& d : plan_.devices) {
    if (!d.master.empty()) {
      run_checked({ip, "-n", ns(d.ns), "link", "set", d.ifname, "master", d.master}, scratch_);
    }
    if (!d.address.empty()) {
      run_checked({ip, "-n", ns(d.ns), "addr", "add", d.address, "dev", d.ifname}, scratch_);
    }
  }
  for (const PlanDevice& d : plan_.devices) {
    run_checked({ip, "-n", ns(d.ns), "link", "set", d.ifname, "up"}, scratch_);
  }
  for (const PlanRoute& r : plan_.routes) {
    std::vector<std::string> argv = {ip, "-n", ns(r.ns), "route", "add", r.to};
    if (!r.via.empty()) {
      argv.insert(argv.end(), {"via", r.via});
    }
    argv.insert(argv.end(), {"dev", r.dev});
    run_checked(argv, scratch_);
  }
  pin_congestion_control();
  if (plan_.topology == Topology::kBridge) {
    bridge_nf_default_ = sysctl(Role::kHost, "net.bridge.bridge-nf-call-iptables");
    if (!bridge_nf_default_.empty()) {
      for (const char* key :
           {"net.bridge.bridge-nf-call-iptables=0", "net.bridge.bridge-nf-call-ip6tables=0",
            "net.bridge.bridge-nf-call-arptables=0"}) {
        std::vector<std::string> argv = in(Role::kHost);
        argv.insert(argv.end(), {tools_.sysctl, "-qw", key});
        run_checked(argv, scratch_);
      }
    }
  }
  if (plan_.ip_forward) {
    std::vector<std::string> argv = in(Role::kHost);
    argv.insert(argv.end(), {tools_.sysctl, "-qw", "net.ipv4.ip_forward=1"});
    run_checked(argv, scratch_);
  }
}

// A /32 route from each end to the other, through the same gateway as its default route, with
// the plan's congestion control (RTAX_CC_ALGO): tcp_connect_init -> tcp_ca_dst_init gives the
// socket that algorithm before its SYN, so its own init is the only one that runs. Without it
// the client's socket connects with the namespace's default (bbr on kernels that choose it), whose
// bbr_init sets sk_pacing_status to SK_PACING_NEEDED; iperf3's later TCP_CONGESTION does not
// clear it, and TCP paces itself (tcp_pacing_check) under the algorithm it was asked for.
void Lab::pin_congestion_control() {
  if (plan_.congestion_control.empty()) {
    return;
  }
  const auto address = [](const PlanDevice& d) { return d.address.substr(0, d.address.find('/')); };
  for (const auto& [from, to] : {std::pair{Role::kClient, Role::kServer},
                                 std::pair{Role::kServer, Role::kClient}}) {
    const PlanDevice& end = plan_.end_of(from);
    std::vector<std::string> argv = {tools_.ip, "-n", ns(from), "route", "add",
                                     address(plan_.end_of(to)) + "/32"};
    for (const PlanRoute& r : plan_.routes) {
      if (r.ns == from && r.to == "default" && !r.via.empty()) {
        argv.insert(argv.end(), {"via", r.via});
      }
    }
    argv.insert(argv.end(), {"dev", end.ifname, "congctl", plan_.congestion_control});
    try {
      run_checked(argv, scratch_);
    } catch (const MeasureError& e) {
      // ip's "Error: Unknown tcp congestion algorithm." is the flag's fault, not the machine's.
      const std::string why = e.what();
      if (why.find("congestion algorithm") == std::string::npos) {
        throw;
      }
      throw refused_congestion_control(plan_.congestion_control, why);
    }
  }
}

void Lab::apply(Variant v) {
  const std::vector<std::string> args = variant_ethtool_args(v);
  if (args.empty()) {
    return;
  }
  for (const PlanDevice& d : plan_.devices) {
    if (!d.veth) {
      continue;
    }
    std::vector<std::string> argv = in(d.ns);
    argv.insert(argv.end(), {tools_.ethtool, "-K", d.ifname});
    argv.insert(argv.end(), args.begin(), args.end());
    // ethtool -K exits non-zero when a requested change did not take (a fixed feature); what
    // took is read back by features(), which is what the files record.
    const Completed c = run(argv, scratch_);
    if (c.exit_code != 0 && c.exit_code != 1) {
      throw MeasureError(join_argv(argv) + ": exit " + std::to_string(c.exit_code) + ": " + c.err);
    }
  }
}

std::map<std::string, std::map<std::string, bool>> Lab::features() {
  std::map<std::string, std::map<std::string, bool>> out;
  for (const PlanDevice& d : plan_.devices) {
    if (!d.veth) {
      continue;
    }
    std::vector<std::string> argv = in(d.ns);
    argv.insert(argv.end(), {tools_.ethtool, "-k", d.ifname});
    out[d.ifname] = parse_ethtool_features(run_checked(argv, scratch_).out);
  }
  return out;
}

std::string Lab::sysctl(Role r, const std::string& name) {
  std::vector<std::string> argv = in(r);
  argv.insert(argv.end(), {tools_.sysctl, "-n", name});
  const Completed c = run(argv, scratch_);
  if (c.exit_code != 0) {
    return "";
  }
  std::string v = c.out;
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) {
    v.pop_back();
  }
  for (char& ch : v) {
    ch = ch == '\t' ? ' ' : ch;
  }
  return v;
}

TcpCounters Lab::tcp_counters(Role r) {
  std::vector<std::string> argv = in(r);
  const std::string cat = find_program("cat");
  argv.insert(argv.end(), {cat.empty() ? "/bin/cat" : cat, "/proc/net/snmp", "/proc/net/netstat"});
  const std::string text = run_checked(argv, scratch_).out;
  return {parse_snmp_tcp(text), parse_netstat_tcpext(text)};
}

void Lab::destroy() noexcept {
  // Whatever still runs inside (a child we lost track of) keeps a namespace, and so its veths,
  // alive after `ip netns del`: kill it first.
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    try {
      Process p = Process::start({tools_.ip, "netns", "pids", *it}, scratch_);
      if (p.wait_for(std::chrono::milliseconds(5000), false)) {
        std::istringstream pids(p.out());
        long pid = 0;
        while (pids >> pid) {
          if (pid > 1 && pid != ::getpid()) {
            ::kill(static_cast<pid_t>(pid), SIGKILL);
          }
        }
      }
    } catch (...) {
    }
    run_quietly({tools_.ip, "netns", "del", *it}, scratch_);
  }
  created_.clear();
}

}  // namespace skbsim::sim::measure
