// Scenario files (sim/scenario.hpp): the good fixtures load into the networks sim/examples.cpp
// builds in C++ and run; every bad fixture fails with exactly the line in its .expected file.

#include "sim/scenario.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/devices.hpp"
#include "sim/examples.hpp"

#include <unistd.h>

namespace skbsim::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kData = "tests/data/scenarios";

// Paths in fixtures and expected lines are relative to the source tree.
void in_source_dir() {
  fs::current_path(SKBSIM_SOURCE_DIR);
}

Scenario load(const std::string& rel) {
  in_source_dir();
  return load_scenario(kData + "/" + rel);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// A complete small scenario (6.x, one host pair, no container) to vary in tests; relative paths
// resolve against tests/data/scenarios/good.
json minimal_6x() {
  return json::parse(R"({
    "schema": 1, "name": "minimal", "kernel": "6.x", "preset": "../models/tiny.json",
    "hosts": [{"name": "A", "cpus": 2}, {"name": "B", "cpus": 4, "cpus_counted": 8}],
    "namespaces": [
      {"name": "A/root", "host": "A", "addresses": ["10.0.0.1"],
       "routes": [{"to": "10.0.0.0/24", "dev": "A/eth0"}]},
      {"name": "B/root", "host": "B", "addresses": ["10.0.0.2"],
       "routes": [{"to": "default", "dev": "B/eth0"}]}
    ],
    "devices": [
      {"name": "A/eth0", "kind": "nic", "ns": "A/root", "peer": "B/eth0"},
      {"name": "B/eth0", "kind": "nic", "ns": "B/root", "peer": "A/eth0"}
    ],
    "traffic": {"test": "TCP_STREAM", "duration_s": 0.1,
                "flows": [{"from": "A/root", "to": "B/root"}]}
  })");
}

Scenario from_json(const json& doc) {
  in_source_dir();
  return scenario_from_json(doc, "t.json", kData + "/good");
}

std::string from_json_error(const json& doc) {
  return error_of([&doc] { (void)from_json(doc); });
}

// ---- comparing with the C++-built networks ------------------------------------------------------

void expect_same_network(const ScenarioSpec& got, const ScenarioSpec& want) {
  EXPECT_EQ(got.kernel, want.kernel);
  ASSERT_EQ(got.hosts.size(), want.hosts.size());
  for (std::size_t i = 0; i < want.hosts.size(); ++i) {
    SCOPED_TRACE("host " + want.hosts[i].name);
    EXPECT_EQ(got.hosts[i].name, want.hosts[i].name);
    EXPECT_EQ(got.hosts[i].cpus, want.hosts[i].cpus);
    EXPECT_EQ(got.hosts[i].cpus_counted, want.hosts[i].cpus_counted);
  }
  // The JSON lists namespaces and devices in its own order: compare by name.
  ASSERT_EQ(got.namespaces.size(), want.namespaces.size());
  for (const NamespaceSpec& w : want.namespaces) {
    SCOPED_TRACE("namespace " + w.name);
    auto it = std::find_if(got.namespaces.begin(), got.namespaces.end(),
                           [&w](const NamespaceSpec& n) { return n.name == w.name; });
    ASSERT_NE(it, got.namespaces.end());
    EXPECT_EQ(it->host, w.host);
    EXPECT_EQ(it->ip_forward, w.ip_forward);
    EXPECT_EQ(it->addresses, w.addresses);
    ASSERT_EQ(it->routes.size(), w.routes.size());
    for (std::size_t r = 0; r < w.routes.size(); ++r) {
      EXPECT_EQ(it->routes[r].prefix, w.routes[r].prefix);
      EXPECT_EQ(it->routes[r].prefix_len, w.routes[r].prefix_len);
      EXPECT_EQ(it->routes[r].dev, w.routes[r].dev);
    }
  }
  ASSERT_EQ(got.devices.size(), want.devices.size());
  for (const DeviceSpec& w : want.devices) {
    SCOPED_TRACE("device " + w.name);
    auto it = std::find_if(got.devices.begin(), got.devices.end(),
                           [&w](const DeviceSpec& d) { return d.name == w.name; });
    ASSERT_NE(it, got.devices.end());
    EXPECT_EQ(it->kind, w.kind);
    EXPECT_EQ(it->ns, w.ns);
    EXPECT_EQ(it->features, w.features);
    EXPECT_EQ(it->mtu, w.mtu);
    EXPECT_EQ(it->tx_queue_len, w.tx_queue_len);
    EXPECT_EQ(it->peer, w.peer);
    EXPECT_EQ(it->modern, w.modern);
    if (w.kind == DevKind::kNic) {
      EXPECT_EQ(it->rate_mbps, w.rate_mbps);
      EXPECT_EQ(it->delay_us, w.delay_us);
      EXPECT_EQ(it->irq_delay_us, w.irq_delay_us);
      EXPECT_EQ(it->irq_cpu, w.irq_cpu);
    }
  }
  ASSERT_EQ(got.flows.size(), want.flows.size());
  for (std::size_t i = 0; i < want.flows.size(); ++i) {
    const FlowSpec& g = got.flows[i];
    const FlowSpec& w = want.flows[i];
    EXPECT_EQ(g.type, w.type);
    EXPECT_EQ(g.from_ns, w.from_ns);
    EXPECT_EQ(g.from_addr, w.from_addr);
    EXPECT_EQ(g.to_ns, w.to_ns);
    EXPECT_EQ(g.to_addr, w.to_addr);
    EXPECT_EQ(g.send_size, w.send_size);
    EXPECT_EQ(g.sndbuf, w.sndbuf);
    EXPECT_EQ(g.rcvbuf, w.rcvbuf);
    EXPECT_EQ(g.mss, w.mss);
    EXPECT_EQ(g.sender_cpu, w.sender_cpu);
    EXPECT_EQ(g.receiver_cpu, w.receiver_cpu);
  }
  EXPECT_EQ(got.patches.skip_cow_from, want.patches.skip_cow_from);
  EXPECT_EQ(got.patches.netfilter, want.patches.netfilter);
  EXPECT_EQ(got.trace_segment, want.trace_segment);
}

const DeviceSpec& device(const ScenarioSpec& s, const std::string& name) {
  auto it = std::find_if(s.devices.begin(), s.devices.end(),
                         [&name](const DeviceSpec& d) { return d.name == name; });
  EXPECT_NE(it, s.devices.end()) << name;
  return *it;
}

TEST(ScenarioFile, SharedBaseIsThread2007ConfigurationA) {
  const Scenario s = load("shared/2007-no-container.json");
  expect_same_network(s.spec, thread2007(Thread2007::kNoContainer, s.spec.cost));
}

TEST(ScenarioFile, ContainerWithExtendsIsThread2007ConfigurationC) {
  const Scenario s = load("good/2007-container.json");
  expect_same_network(s.spec, thread2007(Thread2007::kContainerPatch, s.spec.cost));
  EXPECT_EQ(s.file, kData + "/good/2007-container.json");
  EXPECT_EQ(s.name, "2007 thread, configuration C: container over etun with the skip-cow patch");
  EXPECT_EQ(s.spec.seed, 1U);
  // From the base: kernel, hosts, the traffic settings the child's "traffic" merged into.
  EXPECT_EQ(s.spec.duration_s, 0.5);
  EXPECT_EQ(s.spec.warmup_s, 0.05);
  // The etun pair keeps the kind's default features (nullopt: run_scenario applies them).
  EXPECT_FALSE(device(s.spec, "A/etun0").features.has_value());
  EXPECT_EQ(s.spec.patches.skip_cow_from, (std::vector<DevKind>{DevKind::kEtun, DevKind::kVenet}));
}

TEST(ScenarioFile, ReferenceObjectsMergeAcrossExtends) {
  const Scenario s = load("good/2007-container.json");
  ASSERT_TRUE(s.reference.has_value());
  const Reference& r = *s.reference;
  // From the base:
  EXPECT_EQ(r.source, "made-up figures for the reader's tests (not the thread's)");
  EXPECT_EQ(r.tolerance_pct, 5);
  EXPECT_EQ(r.host, "A");
  EXPECT_EQ(r.throughput_mbps, 700);  // the child's replaces the base's 720
  EXPECT_EQ(r.cpu_util_pct, 25);
  EXPECT_EQ(r.profile_absent, std::vector<std::string>{"pskb_expand_head"});  // the base's
  EXPECT_EQ(r.service_demand_us_per_kb, std::nullopt);
  EXPECT_EQ(r.profile_top, std::vector<std::string>{"csum_partial_copy_generic"});
  EXPECT_EQ(r.profile_top_n, 5U);
  ASSERT_EQ(r.figures().size(), 2U);
  EXPECT_EQ(r.figures()[0].key, "throughput_mbps");
  EXPECT_EQ(r.figures()[1].key, "cpu_util_pct");
}

// null in a file with "extends" deletes the base's value (RFC 7386), a keyed entry included.
TEST(ScenarioFile, NullInAnExtendingFileDeletes) {
  in_source_dir();
  const fs::path dir =
      fs::temp_directory_path() / ("skbsim_scenario_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "no-reference.json";
  json doc = {{"extends", fs::absolute(kData + "/shared/2007-no-container.json").string()},
              {"name", "without the reference"},
              {"reference", nullptr}};
  std::ofstream(file) << doc.dump(2);
  const Scenario s = load_scenario(file.string());
  EXPECT_FALSE(s.reference.has_value());
  EXPECT_FALSE(s.document.contains("reference"));
  EXPECT_EQ(fs::path(s.preset_path), fs::absolute(kData + "/models/tiny.json").lexically_normal());
  fs::remove_all(dir);
}

TEST(ScenarioFile, DocumentIsTheMergeWithThePresetRebased) {
  const Scenario s = load("good/2007-container.json");
  EXPECT_FALSE(s.document.contains("extends"));
  // The base (shared/) said "../models/tiny.json"; from good/ that is the same file.
  EXPECT_EQ(s.document["preset"], "../models/tiny.json");
  // Keyed entries merged: the base's A/root with the child's ip_forward and routes.
  EXPECT_EQ(s.document["namespaces"]["A/root"]["host"], "A");
  EXPECT_EQ(s.document["namespaces"]["A/root"]["ip_forward"], true);
  EXPECT_EQ(s.document["devices"].size(), 4U);
  EXPECT_EQ(fs::path(s.preset_path), fs::path(kData + "/models/tiny.json"));
  EXPECT_EQ(s.document["traffic"]["duration_s"], 0.5);
  EXPECT_EQ(s.document["traffic"]["flows"].size(), 1U);
  EXPECT_EQ(s.document["kernel"], "2.6.20");
  // The merged document reads back into the same scenario (what the sweep tool relies on).
  in_source_dir();
  const Scenario again =
      scenario_from_json(json::parse(s.document.dump()), s.file, kData + "/good");
  expect_same_network(again.spec, s.spec);
}

TEST(ScenarioFile, Veth6xIsTheModernContainerWithOffloadsOff) {
  const Scenario s = load("good/6x-veth.json");
  expect_same_network(s.spec, container_veth_6x(s.spec.cost, false));
  // The full list and the {"remove": [...]} edit of the defaults give the same set.
  const Features want = feat::kHighDma | feat::kLltx;
  EXPECT_EQ(s.spec.devices[2].features, want);
  EXPECT_EQ(s.spec.devices[3].features, want);
  EXPECT_EQ(s.spec.seed, 7U);
  EXPECT_EQ(s.spec.duration_s, 0.2);
  ASSERT_TRUE(s.reference.has_value());
  EXPECT_EQ(s.reference->host, "");
  EXPECT_EQ(s.reference->remote_host, "B");
  EXPECT_EQ(s.reference->remote_cpu_util_pct, 30);
}

TEST(ScenarioFile, CostModelIsThePresets) {
  const Scenario s = load("good/6x-veth.json");
  const CostModel m = s.preset.model();
  EXPECT_EQ(s.preset.name(), "tiny-test");
  EXPECT_EQ(s.spec.cost.call_ps, m.call_ps);
  EXPECT_EQ(s.spec.cost.copy_fs_per_byte, m.copy_fs_per_byte);
  // 400 cycles at 2 GHz.
  EXPECT_EQ(s.spec.cost.call_ps[static_cast<std::size_t>(Sym::kPskbExpandHead)], 200000);
}

// ---- running ------------------------------------------------------------------------------------

class GoodScenarioRun : public ::testing::TestWithParam<std::string> {};

TEST_P(GoodScenarioRun, RunsShortenedWithThroughputAndNoLeak) {
  const Scenario s = load("good/" + GetParam());
  json doc = json::parse(s.document.dump());
  doc["traffic"]["duration_s"] = 0.02;  // as the sweep tool sets values, by JSON pointer
  doc["traffic"]["warmup_s"] = 0.01;
  const Scenario shortened = scenario_from_json(doc, s.file, kData + "/good");
  EXPECT_EQ(shortened.spec.duration_s, 0.02);
  const RunResult r = run_scenario(shortened.spec);
  EXPECT_GT(r.throughput_mbps, 0);
  EXPECT_TRUE(r.pool_empty_at_end) << r.leak_report;
}

INSTANTIATE_TEST_SUITE_P(Good, GoodScenarioRun,
                         ::testing::Values("2007-container.json", "6x-veth.json"),
                         [](const auto& param_info) {
                           const std::string& f = param_info.param;
                           std::string n = f.substr(0, f.find('.'));
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// ---- bad fixtures -------------------------------------------------------------------------------

// Every kind of mistake the reader must catch, one fixture each (bad/<name>.json + .expected).
const std::vector<std::string> kBad = {
    "syntax",
    "not-an-object",
    "schema-version",
    "unknown-top-key",
    "unknown-device-key",
    "wrong-type",
    "out-of-range",
    "missing-key",
    "unknown-kernel",
    "unknown-device-kind",
    "unknown-feature",
    "feature-not-in-6x",
    "feature-not-in-2620",
    "feature-add-and-remove",
    "etun-on-6x",
    "veth-on-2620",
    "venet-on-6x",
    "modern-nic-on-2620",
    "nic-key-on-pair",
    "route-undefined-device",
    "route-other-namespace",
    "duplicate-route",
    "device-undefined-namespace",
    "namespace-undefined-host",
    "peer-undefined",
    "peer-missing",
    "peers-not-mutual",
    "peer-kind-mismatch",
    "loopback-peer",
    "pair-peers-different-hosts",
    "nic-peer-same-host",
    "duplicate-device",
    "duplicate-namespace",
    "duplicate-host",
    "bad-ipv4",
    "bad-prefix",
    "host-bits-set",
    "irq-cpu-out-of-range",
    "defer-count-per-cpu",
    "sender-cpu-out-of-range",
    "flow-undefined-namespace",
    "flow-namespace-without-address",
    "flow-no-route",
    "flow-no-route-back",
    "flow-routing-loop",
    "mss-too-big",
    "empty-flows",
    "unknown-patch-kind",
    "reference-unknown-host",
    "reference-host-missing",
    "reference-negative-tolerance",
    "reference-no-figures",
    "reference-unknown-symbol",
    "preset-missing",
    "preset-unknown-symbol",
    "duplicate-key",
    "hosts-wrong-type",
    "keyed-name-inside",
    "flow-to-addr-not-owned",
    "flow-expect-loop-delivered",
    "extends-cycle",
    "extends-missing",
    "extends-base-bad-value",
    "extends-base-syntax",
    "extends-deleted-device",
    "bridge-peer",
    "bridge-port-other-namespace",
    "bridge-port-twice",
    "ports-on-nic",
    "bridge-no-ports",
    "unknown-test",
    "rr-with-send-size",
    "request-size-in-stream",
    "udp-datagram-too-big",
};

std::string expected_line(const std::string& name) {
  std::ifstream in(std::string(SKBSIM_SOURCE_DIR) + "/" + kData + "/bad/" + name + ".expected");
  std::string line;
  std::getline(in, line);
  return line;
}

class BadScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(BadScenario, FailsWithTheExpectedLine) {
  const std::string want = expected_line(GetParam());
  ASSERT_FALSE(want.empty()) << "no " << GetParam() << ".expected";
  const std::string got = error_of([] { (void)load("bad/" + GetParam() + ".json"); });
  EXPECT_EQ(got, want);
  EXPECT_EQ(got.find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BadScenario, ::testing::ValuesIn(kBad), [](const auto& p) {
  std::string n = p.param;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
});

TEST(BadScenarioFixtures, EveryFixtureIsListedAndHasAnExpectedLine) {
  const fs::path dir = fs::path(SKBSIM_SOURCE_DIR) / kData / "bad";
  std::set<std::string> json_files;
  std::set<std::string> expected_files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".json") {
      json_files.insert(e.path().stem().string());
    } else if (e.path().extension() == ".expected") {
      expected_files.insert(e.path().stem().string());
    }
  }
  EXPECT_EQ(json_files, expected_files);
  EXPECT_EQ(json_files, std::set<std::string>(kBad.begin(), kBad.end()));
}

// ---- the reader's rules, on documents built here ------------------------------------------------

TEST(ScenarioJson, MinimalDocumentTakesTheDefaults) {
  const Scenario s = from_json(minimal_6x());
  EXPECT_EQ(s.spec.seed, 1U);
  EXPECT_EQ(s.description, "");
  EXPECT_FALSE(s.reference.has_value());
  EXPECT_EQ(s.spec.hosts[0].cpus_counted, 2U);  // = cpus
  EXPECT_EQ(s.spec.hosts[1].cpus_counted, 8U);
  EXPECT_EQ(s.spec.warmup_s, 0.05);
  EXPECT_EQ(s.spec.trace_segment, 0U);
  const DeviceSpec& nic = s.spec.devices[0];
  EXPECT_TRUE(nic.modern);  // 6.x: a modern NIC unless "model": "e1000"
  EXPECT_EQ(nic.rate_mbps, 10000);
  EXPECT_EQ(nic.delay_us, 5);
  EXPECT_EQ(nic.irq_delay_us, 20);
  EXPECT_EQ(nic.mtu, 1500U);
  EXPECT_FALSE(nic.tx_queue_len.has_value());
  EXPECT_FALSE(nic.features.has_value());
  const FlowSpec& f = s.spec.flows[0];
  EXPECT_EQ(f.from_addr, ipv4(10, 0, 0, 1));
  EXPECT_EQ(f.to_addr, ipv4(10, 0, 0, 2));
  EXPECT_EQ(f.send_size, 16384U);
  EXPECT_EQ(f.mss, 1448U);
  const RouteSpec& def = s.spec.namespaces[1].routes[0];
  EXPECT_EQ(def.prefix, 0U);
  EXPECT_EQ(def.prefix_len, 0);
}

TEST(ScenarioJson, E1000IsTheDefaultNicOn2620) {
  json doc = minimal_6x();
  doc["kernel"] = "2.6.20";
  const Scenario s = from_json(doc);
  EXPECT_FALSE(s.spec.devices[0].modern);
  EXPECT_EQ(s.spec.devices[0].rate_mbps, 1000);
}

TEST(ScenarioJson, FeatureEditsApplyToTheKindsDefaults) {
  json doc = minimal_6x();
  doc["devices"][0]["features"] =
      json::parse(R"({"add": ["NETIF_F_HW_CSUM"], "remove": ["NETIF_F_GRO", "NETIF_F_TSO"]})");
  doc["devices"][1]["features"] = json::parse(R"(["NETIF_F_SG", "NETIF_F_IP_CSUM"])");
  const Scenario s = from_json(doc);
  const Features modern = default_features(DevKind::kNic, KernelVersion::k6x, true);
  EXPECT_EQ(s.spec.devices[0].features, (modern | feat::kHwCsum) & ~(feat::kGro | feat::kTso));
  EXPECT_EQ(s.spec.devices[1].features, feat::kSg | feat::kIpCsum);
  doc["devices"][1]["features"] = json::array();
  EXPECT_EQ(from_json(doc).spec.devices[1].features, Features{0});
}

// The combinations each version refuses (2.6.20 register_netdevice; 6.x netdev_fix_features).
TEST(FixFeatures, SgWithoutChecksumIsDroppedOn2620OnlyAndTsoNeedsSgAndChecksumOn6x) {
  using enum KernelVersion;
  EXPECT_EQ(fix_features(feat::kSg | feat::kTso | feat::kHighDma, k2_6_20), feat::kHighDma);
  EXPECT_EQ(fix_features(feat::kSg | feat::kTso | feat::kHighDma, k6x), feat::kSg | feat::kHighDma);
  EXPECT_EQ(fix_features(feat::kTso | feat::kHwCsum, k6x), feat::kHwCsum);
  EXPECT_EQ(fix_features(feat::kSg | feat::kTso | feat::kIpv6Csum, k6x), feat::kSg | feat::kIpv6Csum);
  EXPECT_EQ(fix_features(feat::kSg | feat::kTso | feat::kIpCsum, k6x),
            feat::kSg | feat::kTso | feat::kIpCsum);
  EXPECT_EQ(fix_features(feat::kSg | feat::kTso | feat::kNoCsum, k2_6_20),
            feat::kSg | feat::kTso | feat::kNoCsum);
}

TEST(ScenarioJson, CountMakesIdenticalFlows) {
  json doc = minimal_6x();
  doc["traffic"]["flows"][0]["count"] = 3;
  doc["traffic"]["flows"][0]["receiver_cpu"] = 3;  // B has 4 CPUs
  const Scenario s = from_json(doc);
  ASSERT_EQ(s.spec.flows.size(), 3U);
  for (const FlowSpec& f : s.spec.flows) {
    EXPECT_EQ(f.receiver_cpu, 3U);
    EXPECT_EQ(f.to_ns, "B/root");
  }
}

TEST(ScenarioJson, HostRoutesAndLoopbackWithinANamespace) {
  json doc = minimal_6x();
  doc["namespaces"][0]["routes"] = json::parse(R"([{"to": "10.0.0.2", "dev": "A/eth0"},
                                                   {"to": "10.0.0.1/32", "dev": "A/lo"}])");
  doc["devices"].push_back(json::parse(R"({"name": "A/lo", "kind": "loopback", "ns": "A/root"})"));
  doc["traffic"]["flows"].push_back(json::parse(R"({"from": "A/root", "to": "A/root"})"));
  const Scenario s = from_json(doc);
  EXPECT_EQ(s.spec.namespaces[0].routes[0].prefix_len, 32);
  EXPECT_EQ(s.spec.devices[2].mtu, 65536U);  // 6.x LOOPBACK_MTU
  EXPECT_FALSE(s.spec.devices[2].features.has_value());
  EXPECT_EQ(s.spec.flows[1].from_addr, s.spec.flows[1].to_addr);
}

// Hosts, namespaces and devices as objects keyed by name: the same network.
TEST(ScenarioJson, KeyedFormIsTheSameAsTheArrayForm) {
  const json arrays = minimal_6x();
  json keyed = arrays;
  for (const char* list : {"hosts", "namespaces", "devices"}) {
    json by_name = json::object();
    for (json entry : arrays[list]) {
      const std::string name = entry["name"];
      entry.erase("name");
      by_name[name] = entry;
    }
    keyed[list] = by_name;
  }
  expect_same_network(from_json(keyed).spec, from_json(arrays).spec);
}

// A flow's receiver may have locked its buffer with SO_RCVBUF (netperf -S): "rcvbuf_locked", a
// boolean, for TCP flows only (it sizes the receive window's scale).
TEST(ScenarioJson, RcvbufLockedIsABooleanOfTcpFlows) {
  json doc = minimal_6x();
  EXPECT_FALSE(from_json(doc).spec.flows[0].rcvbuf_locked);
  json& flow = doc["traffic"]["flows"][0];
  flow["rcvbuf_locked"] = true;
  EXPECT_TRUE(from_json(doc).spec.flows[0].rcvbuf_locked);
  flow["rcvbuf_locked"] = "yes";
  EXPECT_EQ(from_json_error(doc).rfind("t.json: /traffic/flows/0/rcvbuf_locked: expected", 0), 0U)
      << from_json_error(doc);
  flow["rcvbuf_locked"] = true;
  doc["kernel"] = "2.6.20";
  EXPECT_EQ(from_json_error(doc).rfind("t.json: /traffic/flows/0/rcvbuf_locked: expected no "
                                       "\"rcvbuf_locked\" with kernel 2.6.20",
                                       0),
            0U)
      << from_json_error(doc);
  doc["kernel"] = "6.x";
  doc["traffic"]["test"] = "UDP_STREAM";
  EXPECT_EQ(from_json_error(doc).rfind(
                "t.json: /traffic/flows/0/rcvbuf_locked: expected no \"rcvbuf_locked\" in a "
                "UDP_STREAM test",
                0),
            0U)
      << from_json_error(doc);
}

// "tcp_rmem_max", the receiver's tcp_rmem[2], apart from the buffer autotuning left it with: 6.x
// TCP only, 4096..1 GiB, and never under an unlocked "rcvbuf" (tcp_rcv_space_adjust caps the
// buffer there). Without it the model takes the larger of rcvbuf and 6 MB, as before.
TEST(ScenarioJson, TcpRmemMaxIsTheReceiversSysctlNotUnderAnUnlockedBuffer) {
  json doc = minimal_6x();
  EXPECT_EQ(from_json(doc).spec.flows[0].tcp_rmem_max, 0U);
  json& flow = doc["traffic"]["flows"][0];
  flow["rcvbuf"] = 4194304;
  flow["tcp_rmem_max"] = 33554432;
  EXPECT_EQ(from_json(doc).spec.flows[0].tcp_rmem_max, 33554432U);
  const auto error_of = [&doc] { return from_json_error(doc); };
  flow["tcp_rmem_max"] = 1048576;
  EXPECT_EQ(error_of().rfind("t.json: /traffic/flows/0/tcp_rmem_max: expected at least "
                             "\"rcvbuf\" (4194304)",
                             0),
            0U)
      << error_of();
  flow["rcvbuf_locked"] = true;  // SO_RCVBUF may exceed tcp_rmem[2]
  EXPECT_EQ(from_json(doc).spec.flows[0].tcp_rmem_max, 1048576U);
  flow["tcp_rmem_max"] = 100;
  EXPECT_EQ(error_of().rfind("t.json: /traffic/flows/0/tcp_rmem_max: expected", 0), 0U)
      << error_of();
  flow["tcp_rmem_max"] = 33554432;
  doc["kernel"] = "2.6.20";
  flow.erase("rcvbuf_locked");
  EXPECT_EQ(error_of().rfind("t.json: /traffic/flows/0/tcp_rmem_max: expected no "
                             "\"tcp_rmem_max\" with kernel 2.6.20",
                             0),
            0U)
      << error_of();
  doc["kernel"] = "6.x";
  doc["traffic"]["test"] = "UDP_STREAM";
  EXPECT_EQ(error_of().rfind("t.json: /traffic/flows/0/tcp_rmem_max: expected no "
                             "\"tcp_rmem_max\" in a UDP_STREAM test",
                             0),
            0U)
      << error_of();
}

// A what-if may send a flow into a loop on purpose (the hazard it shows), if it says so.
TEST(ScenarioJson, AFlowMayBeExpectedToLoop) {
  json doc = minimal_6x();
  doc["namespaces"][0]["routes"].push_back(
      json::parse(R"({"to": "10.0.2.0/24", "dev": "A/eth0"})"));
  doc["namespaces"][0]["ip_forward"] = true;
  doc["namespaces"][1]["ip_forward"] = true;
  json& flow = doc["traffic"]["flows"][0];
  flow["to_addr"] = "10.0.2.9";
  EXPECT_EQ(from_json_error(doc),
            "t.json: /traffic/flows/0/to_addr: expected an address of B/root (10.0.0.2), got "
            "\"10.0.2.9\" (a flow meant to loop says \"expect\": \"routing_loop\")");
  flow["expect"] = "routing_loop";
  const Scenario s = from_json(doc);
  EXPECT_EQ(s.spec.flows[0].to_addr, ipv4(10, 0, 2, 9));
  doc["namespaces"][1]["ip_forward"] = false;
  EXPECT_EQ(
      from_json_error(doc),
      "t.json: /traffic/flows/0: expected a routing loop from A/root (10.0.0.1) towards "
      "B/root (10.0.2.9), got a dead end: B/root does not own 10.0.2.9 and has ip_forward off "
      "(path A/root -> A/eth0 -> B/eth0 -> B/root)");
}

TEST(ScenarioJson, KernelConfigSetsMaxHeaderWithinWhatABuildCanHave) {
  json doc = minimal_6x();
  EXPECT_EQ(from_json(doc).spec.max_header, std::nullopt);
  doc["kernel_config"] = json::parse(R"({"max_header": 32, "comment": "minimal build"})");
  EXPECT_EQ(from_json(doc).spec.max_header, 32U);
  doc["kernel_config"]["max_header"] = 4;
  EXPECT_EQ(from_json_error(doc).rfind("t.json: /kernel_config/max_header: ", 0), 0U)
      << from_json_error(doc);
  doc["kernel_config"] = json::parse(R"({"max_headers": 32})");
  EXPECT_NE(from_json_error(doc).find("/kernel_config"), std::string::npos) << from_json_error(doc);
}

TEST(ScenarioJson, ExtendsIsAnErrorInAMergedDocument) {
  json doc = minimal_6x();
  doc["extends"] = "base.json";
  EXPECT_EQ(from_json_error(doc),
            "t.json: /extends: expected no \"extends\" in an already-merged document, got "
            "\"base.json\"");
}

TEST(ScenarioJson, ValuesSetByPointerAreValidatedAgain) {
  json doc = minimal_6x();
  doc[json::json_pointer("/devices/1/mtu")] = 20;
  EXPECT_EQ(from_json_error(doc),
            "t.json: /devices/1/mtu: expected an integer in [68, 65535], got 20");
  doc = minimal_6x();
  doc[json::json_pointer("/traffic/flows/0/mss")] = 1449;
  EXPECT_EQ(from_json_error(doc),
            "t.json: /traffic/flows/0/mss: expected an mss of at most 1448 (MTU 1500 of A/eth0 on "
            "the path, less 52 bytes of IP and TCP headers), got 1449");
}

TEST(ScenarioJson, CommentsAreAllowedOnObjects) {
  json doc = minimal_6x();
  doc["hosts"][0]["comment"] = "the sender";
  doc["devices"][0]["comment"] = "a 10G NIC";
  doc["traffic"]["comment"] = "netperf -l 0.1";
  EXPECT_NO_THROW((void)from_json(doc));
  doc["comment"] = "top level has description instead";
  EXPECT_EQ(from_json_error(doc).substr(0, 18), "t.json: /comment: ");
}

TEST(ScenarioJson, ProfileExpectations) {
  json doc = minimal_6x();
  doc["reference"] = json::parse(R"({"source": "s", "tolerance_pct": 5, "host": "A",
    "profile_top": ["tcp_sendmsg"], "profile_top_n": 3, "profile_absent": ["pskb_expand_head"]})");
  const Scenario s = from_json(doc);
  EXPECT_EQ(s.reference->profile_top_n, 3U);
  EXPECT_EQ(s.reference->profile_absent, std::vector<std::string>{"pskb_expand_head"});
  EXPECT_TRUE(s.reference->figures().empty());
  doc["reference"]["profile_absent"] = json::array({"tcp_sendmsg"});
  EXPECT_EQ(from_json_error(doc),
            "t.json: /reference/profile_absent/0: expected a symbol not also in profile_top, got "
            "\"tcp_sendmsg\"");
}

TEST(ScenarioJson, PerSegmentReferenceFromTracepoints) {
  json doc = minimal_6x();
  doc["reference"] = json::parse(R"({"source": "s", "tolerance_pct": 20, "host": "A",
    "service_demand_us_per_kb": 0.5,
    "per_segment": {"source": "bpftrace", "segments": 1000,
                    "counters": {"pskb_expand_head_calls": 0.03, "skb_segment_outputs": 0},
                    "devices": {"A/eth0": {"xmit_skbs": 0.03, "xmit_ip_summed_partial": 0.03}}}})");
  const Scenario s = from_json(doc);
  ASSERT_TRUE(s.reference->per_segment.has_value());
  const PerSegmentReference& ps = *s.reference->per_segment;
  EXPECT_EQ(ps.tolerance_pct, 10);
  EXPECT_EQ(ps.segments, 1000U);
  EXPECT_EQ(ps.counters.at("pskb_expand_head_calls"), 0.03);
  EXPECT_EQ(ps.devices.at("A/eth0").at("xmit_ip_summed_partial"), 0.03);

  doc["reference"]["per_segment"]["devices"]["A/eth9"] = json::object();
  EXPECT_EQ(from_json_error(doc),
            "t.json: /reference/per_segment/devices/A~1eth9: expected a device defined in "
            "/devices (A/eth0, B/eth0), got \"A/eth9\" (did you mean \"A/eth0\"?)");
  doc["reference"]["per_segment"]["devices"].erase("A/eth9");
  doc["reference"]["per_segment"]["counters"]["Calls"] = 1;
  EXPECT_EQ(from_json_error(doc),
            "t.json: /reference/per_segment/counters/Calls: expected a counter name of a-z, 0-9 "
            "and _, got \"Calls\"");
  doc["reference"]["per_segment"]["counters"].erase("Calls");
  doc["reference"]["per_segment"]["segments"] = 0;
  EXPECT_EQ(from_json_error(doc).substr(0, 42), "t.json: /reference/per_segment/segments: e");
}

TEST(ScenarioJson, ProfileGroupsReferenceFromAKernelProfile) {
  json doc = minimal_6x();
  doc["reference"] = json::parse(R"({"source": "s", "tolerance_pct": 20, "host": "A",
    "profile_groups": {"source": "bpftrace", "busy_samples": 1733,
                       "us_per_kb": {"ip": 0.087, "irqs_off_deferred": 0.85, "user": 0}}})");
  const Scenario s = from_json(doc);
  ASSERT_TRUE(s.reference->profile_groups.has_value());
  const ProfileGroupsReference& pg = *s.reference->profile_groups;
  EXPECT_EQ(pg.tolerance_pct, 25);
  EXPECT_EQ(pg.busy_samples, 1733U);
  EXPECT_EQ(pg.us_per_kb.at("ip"), 0.087);
  EXPECT_EQ(pg.us_per_kb.at("user"), 0);
  EXPECT_EQ(s.reference->host, "A");

  doc["reference"]["profile_groups"]["us_per_kb"]["idle"] = 1;
  EXPECT_EQ(from_json_error(doc).substr(0, 81),
            "t.json: /reference/profile_groups/us_per_kb/idle: expected a kernel-profile group");
  doc["reference"]["profile_groups"]["us_per_kb"].erase("idle");
  doc["reference"]["profile_groups"]["us_per_kb"]["devic"] = 1;
  EXPECT_NE(from_json_error(doc).find("(did you mean \"device\"?)"), std::string::npos);
  doc["reference"]["profile_groups"]["us_per_kb"].erase("devic");
  doc["reference"]["profile_groups"]["us_per_kb"]["ip"] = -0.1;
  EXPECT_EQ(from_json_error(doc).substr(0, 47), "t.json: /reference/profile_groups/us_per_kb/ip:");
  doc["reference"]["profile_groups"]["us_per_kb"] = json::object();
  EXPECT_EQ(from_json_error(doc),
            "t.json: /reference/profile_groups/us_per_kb: expected at least one kernel-profile "
            "group -> us/KB, got {}");
  doc["reference"]["profile_groups"]["us_per_kb"]["ip"] = 0.1;
  doc["reference"]["profile_groups"].erase("busy_samples");
  EXPECT_NE(from_json_error(doc).find("/reference/profile_groups"), std::string::npos);
  doc["reference"]["profile_groups"]["busy_samples"] = 10;
  doc["reference"].erase("host");
  EXPECT_EQ(from_json_error(doc),
            "t.json: /reference/host: expected key \"host\" (the host profile_groups is for), "
            "got nothing");
}

// reference.cpu_busy_pct_by_cpu: one busy share per CPU of the reference's host, each a figure
// `skbsim validate` compares with the model's share of that CPU.
TEST(ScenarioJson, BusySharesByCpuAreOnePerCpuOfTheHost) {
  json doc = minimal_6x();
  doc["reference"] = json::parse(
      R"({"source": "s", "tolerance_pct": 20, "host": "A", "cpu_busy_pct_by_cpu": [99.3, 74.5]})");
  const Scenario s = from_json(doc);
  EXPECT_EQ(s.reference->cpu_busy_pct_by_cpu, (std::vector<double>{99.3, 74.5}));
  const auto figures = s.reference->figures();
  ASSERT_EQ(figures.size(), 2U);
  EXPECT_EQ(figures[1].key, "cpu_busy_pct_cpu1");
  EXPECT_EQ(figures[1].value, 74.5);

  doc["reference"]["cpu_busy_pct_by_cpu"] = {99.3, 74.5, 10};
  EXPECT_EQ(from_json_error(doc),
            "t.json: /reference/cpu_busy_pct_by_cpu: expected an array of 2 busy shares in "
            "[0, 100], one per CPU of host A, got 3 values");
  doc["reference"]["cpu_busy_pct_by_cpu"] = {99.3, 101};
  EXPECT_EQ(from_json_error(doc).substr(0, 42), "t.json: /reference/cpu_busy_pct_by_cpu/1: ");
  doc["reference"]["cpu_busy_pct_by_cpu"] = {99.3, 74.5};
  doc["reference"].erase("host");
  EXPECT_EQ(from_json_error(doc),
            "t.json: /reference/host: expected key \"host\" (the host cpu_busy_pct_by_cpu is "
            "for), got nothing");
}

// ---- the schema document ------------------------------------------------------------------------

template <std::size_t N>
std::set<std::string> key_set(const std::array<std::string_view, N>& keys) {
  return {keys.begin(), keys.end()};
}

std::set<std::string> schema_keys(const json& node) {
  std::set<std::string> out;
  for (auto it = node.at("properties").begin(); it != node.at("properties").end(); ++it) {
    out.insert(it.key());
  }
  EXPECT_EQ(node.at("additionalProperties"), false);
  return out;
}

TEST(ScenarioSchema, ListsTheKeysTheReaderAccepts) {
  std::ifstream in(std::string(SKBSIM_SOURCE_DIR) + "/docs/scenario.schema.json");
  const json schema = json::parse(in);
  EXPECT_EQ(schema.at("$schema"), "https://json-schema.org/draft/2020-12/schema");
  const json& defs = schema.at("$defs");
  EXPECT_EQ(schema_keys(schema), key_set(scenario_keys::kTop));
  EXPECT_EQ(schema_keys(defs.at("host")), key_set(scenario_keys::kHost));
  EXPECT_EQ(schema_keys(defs.at("namespace")), key_set(scenario_keys::kNamespace));
  EXPECT_EQ(schema_keys(defs.at("route")), key_set(scenario_keys::kRoute));
  EXPECT_EQ(schema_keys(defs.at("device")), key_set(scenario_keys::kDevice));
  EXPECT_EQ(schema_keys(defs.at("feature_edit")), key_set(scenario_keys::kFeatureEdit));
  EXPECT_EQ(schema_keys(defs.at("traffic")), key_set(scenario_keys::kTraffic));
  EXPECT_EQ(schema_keys(defs.at("flow")), key_set(scenario_keys::kFlow));
  EXPECT_EQ(schema_keys(defs.at("patches")), key_set(scenario_keys::kPatches));
  EXPECT_EQ(schema_keys(defs.at("reference")), key_set(scenario_keys::kReference));
  EXPECT_EQ(schema_keys(defs.at("per_segment")), key_set(scenario_keys::kPerSegment));
  EXPECT_EQ(schema_keys(defs.at("profile_groups")), key_set(scenario_keys::kProfileGroups));
}

}  // namespace
}  // namespace skbsim::sim
