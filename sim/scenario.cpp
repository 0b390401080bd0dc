#include "sim/scenario.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "sim/devices.hpp"
#include "sim/features.hpp"
#include "sim/json_reader.hpp"
#include "sim/kernel_groups.hpp"
#include "sim/measure_profile.hpp"
#include "skbsim/symbols.hpp"

namespace skbsim::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

// IP (stack.cpp kIpHeader) + TCP with timestamps (tcp.cpp kTcpHeader): MSS + 52 must fit the MTU.
constexpr std::uint32_t kTcpIpHeaderBytes = 52;
constexpr std::uint32_t kUdpIpHeaderBytes = 28;
constexpr std::uint32_t kMaxCpus = 256;
constexpr std::size_t kMaxListed = 12;  // names listed in an "expected one of" message

std::string json_quote(std::string_view s) {
  return json(std::string(s)).dump();
}

// How a node reads after "got" (strings quoted, containers by kind), as JsonReader does.
std::string shown(const json& n) {
  if (n.is_object()) {
    return "an object";
  }
  if (n.is_array()) {
    return n.empty() ? "[]" : "an array";
  }
  return n.dump();
}

std::string joined(const std::vector<std::string>& names, std::string_view sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kMaxListed; ++i) {
    out += i == 0 ? "" : std::string(sep);
    out += names[i];
  }
  if (names.size() > kMaxListed) {
    out += ", ...";
  }
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) {
    row[j] = j;
  }
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean "x"?)" for a near miss among `candidates`, else "".
template <typename Range>
std::string did_you_mean(std::string_view got, const Range& candidates) {
  std::string best;
  std::size_t best_d = 3;  // at most two edits away
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(got, c);
    if (d < best_d) {
      best_d = d;
      best = std::string(c);
    }
  }
  return best.empty() ? std::string() : " (did you mean " + json_quote(best) + "?)";
}

template <std::size_t N>
void reject_unknown(const JsonReader& r, const std::array<std::string_view, N>& known) {
  if (!r.node().is_object()) {
    r.fail("expected an object, got " + shown(r.node()));
  }
  for (auto it = r.node().begin(); it != r.node().end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
      std::string list;
      for (auto k : known) {
        list += list.empty() ? "" : ", ";
        list += k;
      }
      r.child(it.key()).fail("expected one of the keys " + list + ", got unknown key " +
                             json_quote(it.key()) + did_you_mean(it.key(), known));
    }
  }
}

// Fails at the pointer of the missing member `key` of `r` (JsonReader::child would say only
// "expected key ...", this says what the key is for).
[[noreturn]] void missing(const JsonReader& r, std::string_view key, const std::string& message) {
  throw InputError(r.file(), r.pointer() + "/" + std::string(key), message);
}

// "a nic", "an etun".
std::string a_kind(DevKind k) {
  const std::string_view n = dev_kind_name(k);
  const bool vowel = !n.empty() && std::string_view("aeiou").find(n[0]) != std::string_view::npos;
  return (vowel ? "an " : "a ") + std::string(n);
}

std::string nonempty_string(const JsonReader& r, std::string_view what) {
  std::string s = r.string();
  if (s.empty()) {
    r.fail("expected a non-empty " + std::string(what) + ", got \"\"");
  }
  return s;
}

std::vector<JsonReader> nonempty_array(const JsonReader& r, std::string_view of_what) {
  if (!r.node().is_array() || r.node().empty()) {
    r.fail("expected a non-empty array of " + std::string(of_what) + ", got " + shown(r.node()));
  }
  return r.array();
}

// One entry of "hosts", "namespaces" or "devices" and its name.
struct Named {
  JsonReader node;
  std::string name;
};

// "hosts", "namespaces" and "devices" are either an array of objects that carry a "name", or an
// object of objects keyed by name (the form a file with "extends" can change one entry of, or
// delete one from with null). `index` maps each name to its position in the result.
std::vector<Named> named_entries(const JsonReader& list, const std::string& what, bool nonempty,
                                 std::map<std::string, std::size_t>& index) {
  std::vector<Named> out;
  const std::string plural = what + "s";
  if (list.node().is_array()) {
    if (nonempty && list.node().empty()) {
      list.fail("expected a non-empty array of " + plural + ", got []");
    }
    for (const JsonReader& e : list.array()) {
      if (!e.node().is_object()) {
        e.fail("expected an object (a " + what + "), got " + shown(e.node()));
      }
      const JsonReader n = e.child("name");
      std::string name = nonempty_string(n, what + " name");
      auto [it, fresh] = index.emplace(name, out.size());
      if (!fresh) {
        n.fail("expected a " + what + " name not used before, got " + json_quote(name) +
               " (already " + out[it->second].node.pointer() + ")");
      }
      out.push_back({e, std::move(name)});
    }
    return out;
  }
  if (!list.node().is_object()) {
    list.fail("expected an array of " + plural + " or an object of " + plural + " by name, got " +
              shown(list.node()));
  }
  if (nonempty && list.node().empty()) {
    list.fail("expected at least one " + what + ", got {}");
  }
  for (auto it = list.node().begin(); it != list.node().end(); ++it) {
    const JsonReader e = list.child(it.key());
    if (it.key().empty()) {
      e.fail("expected a non-empty " + what + " name as the key, got \"\"");
    }
    if (!e.node().is_object()) {
      e.fail("expected an object (the " + what + " " + json_quote(it.key()) + "), got " +
             shown(e.node()));
    }
    if (e.has("name")) {
      e.child("name").fail("expected no \"name\" in " + plural + " keyed by name (the key " +
                           json_quote(it.key()) + " names it), got " +
                           shown(e.child("name").node()));
    }
    index.emplace(it.key(), out.size());
    out.push_back({e, it.key()});
  }
  return out;
}

// ---- IPv4 ---------------------------------------------------------------------------------------

// Dotted quad, decimal, no leading zeros (inet_aton would read "010" as octal).
std::optional<std::uint32_t> parse_ipv4(std::string_view s) {
  std::uint32_t addr = 0;
  int parts = 0;
  std::size_t i = 0;
  while (parts < 4) {
    const std::size_t start = i;
    std::uint32_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - start < 3) {
      v = v * 10 + static_cast<std::uint32_t>(s[i] - '0');
      ++i;
    }
    const std::size_t len = i - start;
    if (len == 0 || v > 255 || (len > 1 && s[start] == '0')) {
      return std::nullopt;
    }
    addr = (addr << 8) | v;
    ++parts;
    if (parts < 4) {
      if (i >= s.size() || s[i] != '.') {
        return std::nullopt;
      }
      ++i;
    }
  }
  if (i != s.size()) {
    return std::nullopt;
  }
  return addr;
}

std::string ipv4_string(std::uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
         std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255);
}

std::uint32_t prefix_mask(std::uint32_t len) {
  return len == 0 ? 0 : ~0U << (32 - len);
}

std::uint32_t host_address(const JsonReader& r) {
  const std::string s = r.string();
  const auto a = parse_ipv4(s);
  if (!a) {
    r.fail("expected an IPv4 address like \"10.0.0.1\", got " + json_quote(s));
  }
  if (*a == 0 || *a >= 0xE0000000U) {
    r.fail("expected a unicast IPv4 address (not 0.0.0.0, multicast or broadcast), got " +
           json_quote(s));
  }
  return *a;
}

RouteSpec route_destination(const JsonReader& r) {
  const std::string s = r.string();
  if (s == "default") {
    return RouteSpec{0, 0, {}};
  }
  const std::size_t slash = s.find('/');
  const auto addr = parse_ipv4(s.substr(0, slash));
  if (!addr) {
    r.fail(R"(expected "default", an IPv4 address or a prefix like "10.0.0.0/24", got )" +
           json_quote(s));
  }
  std::uint32_t len = 32;
  if (slash != std::string::npos) {
    const std::string l = s.substr(slash + 1);
    const bool digits = !l.empty() && l.size() <= 2 && std::all_of(l.begin(), l.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    len = digits ? static_cast<std::uint32_t>(std::stoul(l)) : 99;
    if (len > 32 || (l.size() > 1 && l[0] == '0')) {
      r.fail("expected a prefix length in [0, 32], got " + json_quote(s));
    }
  }
  if ((*addr & ~prefix_mask(len)) != 0) {
    r.fail("expected a network address with no host bits set (" +
           ipv4_string(*addr & prefix_mask(len)) + "/" + std::to_string(len) + "), got " +
           json_quote(s));
  }
  return RouteSpec{*addr, static_cast<std::uint8_t>(len), {}};
}

// ---- kinds and features -------------------------------------------------------------------------

constexpr std::array<std::pair<std::string_view, DevKind>, 6> kKinds = {{
    {"nic", DevKind::kNic},
    {"etun", DevKind::kEtun},
    {"veth", DevKind::kVeth},
    {"venet", DevKind::kVenet},
    {"loopback", DevKind::kLoopback},
    {"bridge", DevKind::kBridge},
}};

bool kernel_has_kind(KernelVersion v, DevKind k) {
  switch (k) {
    case DevKind::kEtun:
    case DevKind::kVenet:
      return v == KernelVersion::k2_6_20;
    case DevKind::kVeth:
      return v == KernelVersion::k6x;
    default:
      return true;
  }
}

std::string_view kernel_name(KernelVersion v) {
  return v == KernelVersion::k2_6_20 ? "2.6.20" : "6.x";
}

std::string_view why_kind_missing(DevKind k) {
  switch (k) {
    case DevKind::kEtun:
      return "etun was never merged; 6.x has veth";
    case DevKind::kVenet:
      return "OpenVZ's venet is out of tree and has no 6.x version";
    case DevKind::kVeth:
      return "veth was merged in 2.6.24; 2.6.20 containers used etun";
    default:
      return "not modelled";
  }
}

bool is_pair(DevKind k) {
  return k == DevKind::kEtun || k == DevKind::kVeth || k == DevKind::kVenet;
}

// A device kind the kernel has ("kind" of a device, an entry of patches.skip_cow_from).
DevKind device_kind(const JsonReader& r, KernelVersion v) {
  std::vector<std::string> names;
  names.reserve(kKinds.size());
  for (const auto& [n, k] : kKinds) {
    names.emplace_back(n);
  }
  const std::string s = r.string();
  auto it =
      std::find_if(kKinds.begin(), kKinds.end(), [&s](const auto& p) { return p.first == s; });
  if (it == kKinds.end()) {
    r.fail("expected a device kind (" + joined(names) + "), got " + json_quote(s) +
           did_you_mean(s, names));
  }
  if (!kernel_has_kind(v, it->second)) {
    std::vector<std::string> has;
    for (const auto& [n, k] : kKinds) {
      if (kernel_has_kind(v, k)) {
        has.emplace_back(n);
      }
    }
    r.fail("expected a device kind " + std::string(kernel_name(v)) + " has (" + joined(has) +
           "), got " + json_quote(s) + " (" + std::string(why_kind_missing(it->second)) + ")");
  }
  return it->second;
}

std::vector<std::string> feature_names_of(KernelVersion v) {
  std::vector<std::string> out;
  for (const std::string& n : feature_names(~Features{0})) {
    if (feature_from_name(n, v)) {
      out.push_back(n);
    }
  }
  return out;
}

Features one_feature(const JsonReader& r, KernelVersion v) {
  const std::string s = r.string();
  if (auto f = feature_from_name(s, v)) {
    return *f;
  }
  const KernelVersion other =
      v == KernelVersion::k2_6_20 ? KernelVersion::k6x : KernelVersion::k2_6_20;
  if (feature_from_name(s, other)) {
    r.fail("expected a feature " + std::string(kernel_name(v)) + " has, got " + json_quote(s) +
           " (only in " + std::string(kernel_name(other)) + ")");
  }
  const auto names = feature_names_of(v);
  r.fail("expected a NETIF_F_* feature skbsim models (" + joined(names) + "), got " +
         json_quote(s) + did_you_mean(s, names));
}

Features feature_list(const JsonReader& r, KernelVersion v) {
  Features set = 0;
  for (const JsonReader& e : r.array()) {
    const Features f = one_feature(e, v);
    if ((set & f) != 0) {
      e.fail("expected each feature once, got " + e.node().dump() + " again");
    }
    set |= f;
  }
  return set;
}

// "features": a full list, or {"add": [...], "remove": [...]} applied to the kind's defaults.
Features device_features(const JsonReader& r, KernelVersion v, Features defaults) {
  if (r.node().is_array()) {
    return feature_list(r, v);
  }
  if (!r.node().is_object()) {
    r.fail(R"(expected an array of NETIF_F_* names or {"add": [...], "remove": [...]}, got )" +
           shown(r.node()));
  }
  reject_unknown(r, scenario_keys::kFeatureEdit);
  const auto add = r.optional_child("add");
  const auto remove = r.optional_child("remove");
  if (!add && !remove) {
    r.fail(R"(expected "add" or "remove" (or both), got an empty object)");
  }
  const Features plus = add ? feature_list(*add, v) : 0;
  const Features minus = remove ? feature_list(*remove, v) : 0;
  if ((plus & minus) != 0) {
    for (const JsonReader& e : remove->array()) {
      if ((one_feature(e, v) & plus) != 0) {
        e.fail("expected a feature not also in \"add\", got " + e.node().dump());
      }
    }
  }
  return (defaults | plus) & ~minus;
}

// ---- the validator ------------------------------------------------------------------------------

struct DeviceInfo {
  std::size_t ns = 0;  // index into namespaces
  std::string host;
};

struct Walk {
  bool ok = false;
  bool loop = false;
  std::string problem;            // "a dead end: ..." / "a routing loop ..."
  std::vector<std::string> path;  // namespaces and devices in order
  std::uint32_t min_mtu = 0;      // smallest MTU of the transmitting devices
  std::string min_mtu_dev;
};

class Validator {
 public:
  Validator(const json& doc, std::string file, std::string base_dir)
      : root_(doc, std::move(file)), base_dir_(std::move(base_dir)) {}

  Scenario run() {
    Scenario& s = out_;
    s.file = root_.file();
    if (root_.has("extends")) {
      root_.child("extends").fail("expected no \"extends\" in an already-merged document, got " +
                                  root_.child("extends").node().dump());
    }
    reject_unknown(root_, scenario_keys::kTop);
    const JsonReader schema = root_.child("schema");
    if (!schema.node().is_number_integer() || schema.node().get<std::int64_t>() != 1) {
      schema.fail("expected 1 (the only schema version), got " + shown(schema.node()));
    }
    s.name = nonempty_string(root_.child("name"), "name");
    s.description = root_.string_or("description", "");
    kernel_ = root_.child("kernel").enum_of({"2.6.20", "6.x"}) == "2.6.20" ? KernelVersion::k2_6_20
                                                                           : KernelVersion::k6x;
    s.spec.kernel = kernel_;
    if (const auto kc = root_.optional_child("kernel_config")) {
      reject_unknown(*kc, scenario_keys::kKernelConfig);
      if (kc->has("max_header")) {
        // MAX_HEADER: LL_MAX_HEADER (32 to 128) plus 48 with tunnels; 16 to 512 takes any build.
        s.spec.max_header = static_cast<std::uint32_t>(kc->child("max_header").uint_in(16, 512));
      }
    }
    load_preset(root_.child("preset"));
    s.spec.seed = root_.uint_or("seed", 0, std::numeric_limits<std::uint64_t>::max(), 1);
    read_hosts(root_.child("hosts"));
    read_namespaces(root_.child("namespaces"));
    read_devices(root_.child("devices"));
    check_peers();
    check_routes();
    read_traffic(root_.child("traffic"));
    if (auto p = root_.optional_child("patches")) {
      read_patches(*p);
    }
    s.spec.trace_segment = static_cast<std::uint32_t>(
        root_.uint_or("trace_segment", 0, std::numeric_limits<std::uint32_t>::max(), 0));
    if (auto r = root_.optional_child("reference")) {
      s.reference = read_reference(*r);
    }
    s.spec.cost = s.preset.model();
    s.document = ordered_json::parse(root_.node().dump());
    return std::move(out_);
  }

 private:
  ScenarioSpec& spec() { return out_.spec; }
  const ScenarioSpec& spec() const { return out_.spec; }

  void load_preset(const JsonReader& r) {
    const std::string given = nonempty_string(r, "preset path");
    fs::path p(given);
    if (p.is_relative() && !base_dir_.empty()) {
      p = (fs::path(base_dir_) / p).lexically_normal();
    }
    const std::string path = p.generic_string();
    std::error_code ec;
    if (!fs::is_regular_file(p, ec) || !std::ifstream(p).good()) {
      r.fail("expected a readable cost preset file, got " + json_quote(given) + " (" + path +
             ": no such file)");
    }
    out_.preset_path = path;
    out_.preset = CostPreset::load(path, path);
  }

  std::vector<std::string> names_of(const std::map<std::string, std::size_t>& m) const {
    std::vector<std::pair<std::size_t, std::string>> v;
    v.reserve(m.size());
    for (const auto& [n, i] : m) {
      v.emplace_back(i, n);
    }
    std::sort(v.begin(), v.end());
    std::vector<std::string> out;
    out.reserve(v.size());
    for (auto& [i, n] : v) {
      out.push_back(std::move(n));
    }
    return out;
  }

  std::size_t lookup(const JsonReader& r, const std::map<std::string, std::size_t>& m,
                     std::string_view what, const std::string& list_ptr) const {
    const std::string name = r.string();
    auto it = m.find(name);
    if (it == m.end()) {
      const auto names = names_of(m);
      r.fail("expected a " + std::string(what) + " defined in " + list_ptr + " (" + joined(names) +
             "), got " + json_quote(name) + did_you_mean(name, names));
    }
    return it->second;
  }

  std::uint32_t cpu_of(const JsonReader& r, const std::string& key, const std::string& host) {
    const std::uint32_t cpus = spec().hosts[hosts_.at(host)].cpus;
    auto c = r.optional_child(key);
    if (!c) {
      return 0;
    }
    const auto cpu = c->uint_in(0, kMaxCpus - 1);
    if (cpu >= cpus) {
      c->fail("expected a CPU of host " + host + " (0.." + std::to_string(cpus - 1) + "), got " +
              std::to_string(cpu));
    }
    return static_cast<std::uint32_t>(cpu);
  }

  void read_hosts(const JsonReader& list) {
    for (const Named& e : named_entries(list, "host", true, hosts_)) {
      const JsonReader& h = e.node;
      reject_unknown(h, scenario_keys::kHost);
      HostSpec hs;
      hs.name = e.name;
      hs.cpus = static_cast<std::uint32_t>(h.child("cpus").uint_in(1, kMaxCpus));
      hs.cpus_counted = static_cast<std::uint32_t>(h.uint_or("cpus_counted", 1, 1024, hs.cpus));
      // net.core.skb_defer_max: proc_dointvec_minmax from 0 (0 turns the deferral off).
      constexpr auto kIntMax = std::numeric_limits<std::int32_t>::max();
      hs.skb_defer_max =
          static_cast<std::uint32_t>(h.uint_or("skb_defer_max", 0, kIntMax, hs.skb_defer_max));
      // Per CPU, the deferred-free count (an unsigned long in the kernel) the run starts from.
      if (auto counts = h.optional_child("defer_count")) {
        const std::vector<JsonReader> each = counts->array();
        if (each.size() > hs.cpus) {
          counts->fail("expected at most one count per CPU (" + std::to_string(hs.cpus) +
                       "), got " + std::to_string(each.size()));
        }
        for (const JsonReader& c : each) {
          hs.defer_count.push_back(c.uint_in(0, std::numeric_limits<std::int64_t>::max()));
        }
      }
      spec().hosts.push_back(std::move(hs));
    }
  }

  void read_namespaces(const JsonReader& list) {
    for (const Named& e : named_entries(list, "namespace", true, namespaces_)) {
      const JsonReader& n = e.node;
      ns_nodes_.push_back(n);
      reject_unknown(n, scenario_keys::kNamespace);
      NamespaceSpec ns;
      ns.name = e.name;
      const JsonReader host = n.child("host");
      ns.host = spec().hosts[lookup(host, hosts_, "host", "/hosts")].name;
      ns.ip_forward = n.bool_or("ip_forward", false);
      ns.tcp_backlog_ack_defer = n.bool_or("tcp_backlog_ack_defer", true);
      if (auto addrs = n.optional_child("addresses")) {
        for (const JsonReader& a : addrs->array()) {
          const std::uint32_t addr = host_address(a);
          if (std::find(ns.addresses.begin(), ns.addresses.end(), addr) != ns.addresses.end()) {
            a.fail("expected each address once, got " + a.node().dump() + " again");
          }
          ns.addresses.push_back(addr);
        }
      }
      if (auto routes = n.optional_child("routes")) {
        for (const JsonReader& rt : routes->array()) {
          reject_unknown(rt, scenario_keys::kRoute);
          RouteSpec r = route_destination(rt.child("to"));
          for (std::size_t j = 0; j < ns.routes.size(); ++j) {
            if (ns.routes[j].prefix == r.prefix && ns.routes[j].prefix_len == r.prefix_len) {
              rt.child("to").fail("expected a destination not routed before in " + ns.name +
                                  ", got " + rt.child("to").node().dump() + " (already " +
                                  routes->pointer() + "/" + std::to_string(j) + ")");
            }
          }
          r.dev = nonempty_string(rt.child("dev"), "device name");  // checked in check_routes
          ns.routes.push_back(std::move(r));
        }
      }
      spec().namespaces.push_back(std::move(ns));
    }
  }

  void reject_nic_keys(const JsonReader& d, DevKind kind) {
    for (auto k : scenario_keys::kNicOnly) {
      if (d.has(k)) {
        const JsonReader c = d.child(k);
        c.fail("expected no " + json_quote(k) + " on " + a_kind(kind) +
               " device (it is a NIC setting), got " + shown(c.node()));
      }
    }
  }

  void read_nic(const JsonReader& d, DeviceSpec& ds) {
    const bool old = kernel_ == KernelVersion::k2_6_20;
    if (auto m = d.optional_child("model")) {
      ds.modern = m->enum_of({"e1000", "modern"}) == "modern";
      if (ds.modern && old) {
        m->fail(
            "expected \"e1000\" on 2.6.20 (page-fragment RX and GRO came later), got "
            "\"modern\"");
      }
    } else {
      ds.modern = !old;
    }
    ds.rate_mbps = d.number_or("rate_mbps", 1, 400000, ds.modern ? 10000 : 1000);
    ds.delay_us = d.number_or("delay_us", 0, 1e6, 5);
    ds.irq_delay_us = d.number_or("irq_delay_us", 0, 10000, 20);
    ds.irq_cpu = cpu_of(d, "irq_cpu", dev_info_.back().host);
  }

  void read_device(const JsonReader& d, const std::string& name) {
    dev_nodes_.push_back(d);
    reject_unknown(d, scenario_keys::kDevice);
    DeviceSpec ds;
    ds.name = name;
    ds.kind = device_kind(d.child("kind"), kernel_);
    if (ds.kind != DevKind::kNic) {
      reject_nic_keys(d, ds.kind);
    }
    const std::size_t ns = lookup(d.child("ns"), namespaces_, "namespace", "/namespaces");
    ds.ns = spec().namespaces[ns].name;
    dev_info_.push_back({ns, spec().namespaces[ns].host});
    if (ds.kind != DevKind::kBridge && d.has("ports")) {
      d.child("ports").fail("expected no \"ports\" on " + a_kind(ds.kind) +
                            " (only a bridge has ports), got " + shown(d.child("ports").node()));
    }
    if (ds.kind == DevKind::kLoopback || ds.kind == DevKind::kBridge) {
      if (d.has("peer")) {
        d.child("peer").fail(
            std::string("expected no \"peer\" on ") +
            (ds.kind == DevKind::kBridge ? "a bridge (it has \"ports\"), "
                                         : "a loopback device (lo delivers to itself), ") +
            "got " + shown(d.child("peer").node()));
      }
      if (ds.kind == DevKind::kBridge) {
        for (const JsonReader& p : nonempty_array(d.child("ports"), "port device names")) {
          ds.ports.push_back(nonempty_string(p, "device name"));  // checked in check_ports
        }
      }
    } else if (!d.has("peer")) {
      missing(d, "peer",
              std::string("expected key \"peer\" (") +
                  (ds.kind == DevKind::kNic ? "the NIC at the other end of the cable"
                                            : "the other end of the pair") +
                  "), got nothing");
    } else {
      ds.peer = nonempty_string(d.child("peer"), "device name");  // checked in check_peers
    }
    if (ds.kind == DevKind::kNic) {
      read_nic(d, ds);
    }
    if (ds.kind == DevKind::kLoopback) {
      // LOOPBACK_MTU: 16436 in 2.6.20, 64 KiB in 6.x.
      const std::uint32_t lo_mtu = kernel_ == KernelVersion::k2_6_20 ? 16436 : 65536;
      ds.mtu = static_cast<std::uint32_t>(d.uint_or("mtu", 68, 65536, lo_mtu));
    } else {
      ds.mtu = static_cast<std::uint32_t>(d.uint_or("mtu", 68, 65535, 1500));
    }
    if (auto q = d.optional_child("tx_queue_len")) {
      ds.tx_queue_len = static_cast<std::uint32_t>(q->uint_in(0, 100000));
    }
    if (auto f = d.optional_child("features")) {
      ds.features = device_features(*f, kernel_, default_features(ds.kind, kernel_, ds.modern));
    }
    spec().devices.push_back(std::move(ds));
  }

  void read_devices(const JsonReader& list) {
    for (const Named& e : named_entries(list, "device", false, devices_)) {
      read_device(e.node, e.name);
    }
  }

  // A bridge's ports: devices of its namespace, each a port of one bridge only, not bridges.
  void check_ports() {
    std::map<std::string, std::string> owner;  // port -> bridge
    for (std::size_t i = 0; i < spec().devices.size(); ++i) {
      const DeviceSpec& d = spec().devices[i];
      for (std::size_t k = 0; k < d.ports.size(); ++k) {
        const JsonReader r = dev_nodes_[i].child("ports").at(k);
        const std::size_t j = lookup(r, devices_, "device", "/devices");
        const DeviceSpec& p = spec().devices[j];
        if (p.kind == DevKind::kBridge || p.kind == DevKind::kLoopback) {
          r.fail("expected a port device (NIC, pair or venet end), got " + json_quote(p.name) +
                 " (" + a_kind(p.kind) + ")");
        }
        if (p.ns != d.ns) {
          r.fail("expected a device in the bridge's namespace " + d.ns + ", got " +
                 json_quote(p.name) + " which is in " + p.ns);
        }
        auto [it, fresh] = owner.emplace(p.name, d.name);
        if (!fresh) {
          r.fail("expected a device that is not yet a bridge port, got " + json_quote(p.name) +
                 " which is already a port of " + it->second);
        }
      }
    }
  }

  // The device index of the bridge whose port `dev` is, if any.
  std::optional<std::size_t> master_of(std::size_t dev) const {
    const std::string& name = spec().devices[dev].name;
    for (std::size_t i = 0; i < spec().devices.size(); ++i) {
      const auto& ports = spec().devices[i].ports;
      if (std::find(ports.begin(), ports.end(), name) != ports.end()) {
        return i;
      }
    }
    return std::nullopt;
  }

  // br_forward's choice: the port of bridge `br` that leads to `daddr` (bridge_fdb()).
  std::optional<std::size_t> bridge_port_to(std::size_t br, std::uint32_t daddr) const {
    for (const auto& [addr, port] : bridge_fdb(spec(), spec().devices[br])) {
      if (addr == daddr) {
        return devices_.at(port);
      }
    }
    return std::nullopt;
  }

  void check_peers() {
    check_ports();
    for (std::size_t i = 0; i < spec().devices.size(); ++i) {
      const DeviceSpec& d = spec().devices[i];
      if (d.peer.empty()) {
        continue;
      }
      const JsonReader r = dev_nodes_[i].child("peer");
      if (d.peer == d.name) {
        r.fail("expected another device, got " + json_quote(d.peer) +
               " (a device cannot be its own peer)");
      }
      const std::size_t j = lookup(r, devices_, "device", "/devices");
      const DeviceSpec& p = spec().devices[j];
      if (p.kind != d.kind) {
        r.fail("expected " + a_kind(d.kind) + " as the peer of " + a_kind(d.kind) + ", got " +
               json_quote(p.name) + " (" + a_kind(p.kind) + ")");
      }
      if (p.peer != d.name) {
        r.fail("expected a device whose peer is " + json_quote(d.name) + ", got " +
               json_quote(p.name) + " whose peer is " + json_quote(p.peer));
      }
      const std::string& h = dev_info_[i].host;
      const std::string& ph = dev_info_[j].host;
      if (is_pair(d.kind) && ph != h) {
        r.fail("expected a device on host " + h + " (both ends of " + a_kind(d.kind) +
               " pair are on one host), got " + json_quote(p.name) + " on host " + ph);
      }
      if (d.kind == DevKind::kNic && ph == h) {
        r.fail("expected a NIC on another host (a cable joins two hosts), got " +
               json_quote(p.name) + " on host " + h + " too");
      }
    }
  }

  void check_routes() {
    for (std::size_t i = 0; i < spec().namespaces.size(); ++i) {
      const NamespaceSpec& ns = spec().namespaces[i];
      for (std::size_t j = 0; j < ns.routes.size(); ++j) {
        const JsonReader r = ns_nodes_[i].child("routes").at(j).child("dev");
        const std::size_t d = lookup(r, devices_, "device", "/devices");
        if (dev_info_[d].ns != i) {
          r.fail("expected a device in namespace " + ns.name + ", got " +
                 json_quote(ns.routes[j].dev) + " which is in " + spec().devices[d].ns);
        }
      }
    }
  }

  // Follows the routes from namespace `from` towards `daddr` as the model's stack does
  // (ip_queue_xmit, the device's peer, ip_rcv: local or ip_forward) until a namespace owning it.
  Walk walk(std::size_t from, std::uint32_t daddr, std::size_t to) const {
    Walk w;
    std::set<std::size_t> visited;
    std::size_t cur = from;
    w.path.push_back(spec().namespaces[cur].name);
    w.min_mtu = std::numeric_limits<std::uint32_t>::max();
    for (;;) {
      const NamespaceSpec& ns = spec().namespaces[cur];
      if (!visited.insert(cur).second) {
        w.loop = true;
        w.problem = "a routing loop back to " + ns.name;
        return w;
      }
      const RouteSpec* best = nullptr;
      for (const RouteSpec& r : ns.routes) {
        if ((daddr & prefix_mask(r.prefix_len)) == r.prefix &&
            (best == nullptr || r.prefix_len > best->prefix_len)) {
          best = &r;
        }
      }
      if (best == nullptr) {
        w.problem = "a dead end: " + ns.name + " has no route to " + ipv4_string(daddr);
        return w;
      }
      const std::size_t out = devices_.at(best->dev);
      const DeviceSpec& od = spec().devices[out];
      w.path.push_back(od.name);
      if (od.mtu < w.min_mtu) {
        w.min_mtu = od.mtu;
        w.min_mtu_dev = od.name;
      }
      std::size_t in = out;
      std::size_t via = out;  // the device that transmits onto the link
      if (od.kind == DevKind::kBridge) {
        const auto port = bridge_port_to(out, daddr);
        if (!port) {
          w.problem = "a dead end: bridge " + od.name + " has no port towards " +
                      ipv4_string(daddr);
          return w;
        }
        via = *port;
        w.path.push_back(spec().devices[via].name);
      }
      if (od.kind != DevKind::kLoopback) {
        in = devices_.at(spec().devices[via].peer);
        w.path.push_back(spec().devices[in].name);
      }
      // A frame arriving on a bridge port is the bridge's: passed up when it is for the bridge's
      // namespace, else forwarded out of the port towards the address (br_handle_frame).
      for (std::size_t hops = 0; hops < spec().devices.size(); ++hops) {
        const auto br = master_of(in);
        if (!br) {
          break;
        }
        const NamespaceSpec& bn = spec().namespaces[dev_info_[*br].ns];
        if (std::find(bn.addresses.begin(), bn.addresses.end(), daddr) != bn.addresses.end() ||
            (bn.ip_forward && !bridge_port_to(*br, daddr))) {
          in = *br;  // br_pass_frame_up (to be routed on, when the bridge's namespace forwards)
          w.path.push_back(spec().devices[in].name);
          break;
        }
        const auto port = bridge_port_to(*br, daddr);
        if (!port || *port == in) {
          w.problem = "a dead end: bridge " + spec().devices[*br].name + " has no port towards " +
                      ipv4_string(daddr);
          return w;
        }
        w.path.push_back(spec().devices[*br].name);
        w.path.push_back(spec().devices[*port].name);
        if (spec().devices[*port].mtu < w.min_mtu) {
          w.min_mtu = spec().devices[*port].mtu;
          w.min_mtu_dev = spec().devices[*port].name;
        }
        in = devices_.at(spec().devices[*port].peer);
        w.path.push_back(spec().devices[in].name);
      }
      const std::size_t next = dev_info_[in].ns;
      const NamespaceSpec& nn = spec().namespaces[next];
      w.path.push_back(nn.name);
      if (std::find(nn.addresses.begin(), nn.addresses.end(), daddr) != nn.addresses.end()) {
        if (next != to) {
          w.problem = "a wrong destination: " + ipv4_string(daddr) + " belongs to " + nn.name;
          return w;
        }
        w.ok = true;
        return w;
      }
      if (!nn.ip_forward) {
        w.problem = "a dead end: " + nn.name + " does not own " + ipv4_string(daddr) +
                    " and has ip_forward off";
        return w;
      }
      cur = next;
    }
  }

  std::uint32_t first_address(const JsonReader& r, std::size_t ns) const {
    const NamespaceSpec& n = spec().namespaces[ns];
    if (n.addresses.empty()) {
      r.fail("expected a namespace with an address, got " + json_quote(n.name) +
             " which has no \"addresses\"");
    }
    return n.addresses.front();
  }

  // Both directions must arrive, or the data must loop when the flow says "expect": "routing_loop"
  // (a what-if that shows the loop hazard), and the MSS must fit the path.
  void check_paths(const JsonReader& f, const FlowSpec& fs, std::size_t from, std::size_t to,
                   bool expect_loop) {
    const std::string src = fs.from_ns + " (" + ipv4_string(fs.from_addr) + ")";
    const std::string dst = fs.to_ns + " (" + ipv4_string(fs.to_addr) + ")";
    const Walk data = walk(from, fs.to_addr, to);
    if (expect_loop) {
      if (data.ok) {
        f.child("expect").fail("expected a flow whose data loops, got a route from " + src +
                               " to " + dst + " (path " + joined(data.path, " -> ") + ")");
      }
      if (!data.loop) {
        f.fail("expected a routing loop from " + src + " towards " + dst + ", got " + data.problem +
               " (path " + joined(data.path, " -> ") + ")");
      }
    } else if (!data.ok) {
      f.fail("expected a route from " + src + " to " + dst + ", got " + data.problem + " (path " +
             joined(data.path, " -> ") + ")");
    }
    const Walk acks = walk(to, fs.from_addr, from);
    if (!acks.ok) {
      f.fail("expected a route back from " + dst + " to " + src + " for the ACKs, got " +
             acks.problem + " (path " + joined(acks.path, " -> ") + ")");
    }
    if (fs.type == TrafficType::kUdpStream) {
      if (fs.send_size + kUdpIpHeaderBytes > data.min_mtu) {
        const JsonReader at = f.has("send_size") ? f.child("send_size") : f;
        at.fail("expected a send_size of at most " +
                std::to_string(data.min_mtu - kUdpIpHeaderBytes) + " (MTU " +
                std::to_string(data.min_mtu) + " of " + data.min_mtu_dev +
                " on the path, less 28 bytes of IP and UDP headers: IP fragmentation is not "
                "modelled), got " + std::to_string(fs.send_size));
      }
    } else if (fs.mss + kTcpIpHeaderBytes > data.min_mtu) {
      const JsonReader at = f.has("mss") ? f.child("mss") : f;
      at.fail("expected an mss of at most " + std::to_string(data.min_mtu - kTcpIpHeaderBytes) +
              " (MTU " + std::to_string(data.min_mtu) + " of " + data.min_mtu_dev +
              " on the path, less 52 bytes of IP and TCP headers), got " + std::to_string(fs.mss));
    }
  }

  void read_flow(const JsonReader& f) {
    reject_unknown(f, scenario_keys::kFlow);
    FlowSpec fs;
    const std::size_t from = lookup(f.child("from"), namespaces_, "namespace", "/namespaces");
    const std::size_t to = lookup(f.child("to"), namespaces_, "namespace", "/namespaces");
    fs.from_ns = spec().namespaces[from].name;
    fs.to_ns = spec().namespaces[to].name;
    fs.from_addr = first_address(f.child("from"), from);
    const bool expect_loop = f.has("expect") && f.child("expect").enum_of(
                                                    {"delivery", "routing_loop"}) == "routing_loop";
    if (auto a = f.optional_child("to_addr")) {
      fs.to_addr = host_address(*a);
      const auto& owned = spec().namespaces[to].addresses;
      if (!expect_loop && std::find(owned.begin(), owned.end(), fs.to_addr) == owned.end()) {
        std::vector<std::string> list;
        list.reserve(owned.size());
        for (std::uint32_t o : owned) {
          list.push_back(ipv4_string(o));
        }
        a->fail("expected an address of " + fs.to_ns + " (" + joined(list) + "), got " +
                a->node().dump() + R"( (a flow meant to loop says "expect": "routing_loop"))");
      }
    } else {
      fs.to_addr = first_address(f.child("to"), to);
    }
    fs.type = test_;
    const bool rr = test_ == TrafficType::kTcpRr;
    const bool udp = test_ == TrafficType::kUdpStream;
    for (std::string_view k : {"request_size", "response_size"}) {
      if (!rr && f.has(k)) {
        f.child(k).fail("expected no \"" + std::string(k) + "\" in a " +
                        std::string(traffic_type_name(test_)) +
                        " test (request and response sizes are TCP_RR's -r), got " +
                        shown(f.child(k).node()));
      }
    }
    if (rr && f.has("send_size")) {
      f.child("send_size").fail(
          "expected no \"send_size\" in a TCP_RR test (its sizes are \"request_size\" and "
          "\"response_size\", netperf -r), got " + shown(f.child("send_size").node()));
    }
    if (udp && f.has("mss")) {
      f.child("mss").fail("expected no \"mss\" in a UDP_STREAM test, got " +
                          shown(f.child("mss").node()));
    }
    fs.request_size = static_cast<std::uint32_t>(f.uint_or("request_size", 1, 1U << 20, 1));
    fs.response_size = static_cast<std::uint32_t>(f.uint_or("response_size", 1, 1U << 20, 1));
    fs.send_size = static_cast<std::uint32_t>(
        f.uint_or("send_size", 1, udp ? 65507 : 1U << 24, udp ? 1472 : 16384));
    fs.sndbuf = static_cast<std::uint32_t>(f.uint_or("sndbuf", 4096, 1U << 30, 131072));
    fs.rcvbuf = static_cast<std::uint32_t>(f.uint_or("rcvbuf", 4096, 1U << 30, 131072));
    // Keys that size 6.x TCP's receive window: refused in a UDP_STREAM test and with 2.6.20,
    // whose window is modelled without them (`why_not_2620`).
    const auto window_key_only_6x = [&](const char* key, const char* why_not_2620) {
      if (!f.has(key)) {
        return;
      }
      const JsonReader n = f.child(key);
      const std::string quoted = std::string("\"") + key + "\"";
      if (udp) {
        n.fail("expected no " + quoted +
               " in a UDP_STREAM test (it sizes a TCP receive window), got " + shown(n.node()));
      }
      if (kernel_ == KernelVersion::k2_6_20) {
        n.fail("expected no " + quoted + " with kernel 2.6.20 (" + why_not_2620 + "), got " +
               shown(n.node()));
      }
    };
    window_key_only_6x("rcvbuf_locked",
                       "its window is modelled without a scale, which is all a locked buffer "
                       "changes");
    window_key_only_6x("tcp_rmem_max", "its window is modelled without a scale or tcp_grow_window");
    fs.rcvbuf_locked = f.bool_or("rcvbuf_locked", false);
    if (f.has("tcp_rmem_max")) {
      const JsonReader n = f.child("tcp_rmem_max");
      fs.tcp_rmem_max = static_cast<std::uint32_t>(f.uint_or("tcp_rmem_max", 4096, 1U << 30, 0));
      if (!fs.rcvbuf_locked && fs.tcp_rmem_max < fs.rcvbuf) {
        n.fail("expected at least \"rcvbuf\" (" + std::to_string(fs.rcvbuf) +
               "): autotuning never takes an unlocked buffer past tcp_rmem[2], got " +
               shown(n.node()));
      }
    }
    fs.mss = static_cast<std::uint32_t>(f.uint_or("mss", 88, 65535 - kTcpIpHeaderBytes, 1448));
    fs.sender_cpu = cpu_of(f, "sender_cpu", spec().namespaces[from].host);
    fs.receiver_cpu = cpu_of(f, "receiver_cpu", spec().namespaces[to].host);
    for (std::string_view k : {"rate_mbps", "pacing_timer_us"}) {
      if ((rr || udp) && f.has(k)) {
        f.child(k).fail("expected no \"" + std::string(k) + "\" in a " +
                        std::string(traffic_type_name(test_)) +
                        " test (a paced sender, iperf3 -b, is modelled for TCP_STREAM and "
                        "TCP_MAERTS), got " + shown(f.child(k).node()));
      }
    }
    if (auto r = f.optional_child("rate_mbps")) {
      fs.rate_bps = static_cast<std::uint64_t>(r->number_in(0.001, 1e6) * 1e6);
    }
    if ((rr || udp) && f.has("recv_size")) {
      f.child("recv_size").fail("expected no \"recv_size\" in a " +
                                std::string(traffic_type_name(test_)) +
                                " test (its reader takes each message or datagram whole), got " +
                                shown(f.child("recv_size").node()));
    }
    fs.recv_size = static_cast<std::uint32_t>(f.uint_or("recv_size", 1, 1U << 30, 0));
    if (auto r = f.optional_child("reader")) {
      if (rr || udp) {
        r->fail("expected no \"reader\" in a " + std::string(traffic_type_name(test_)) +
                " test (its reader is netperf's blocking recv()), got " + shown(r->node()));
      }
      fs.nonblocking_reader = r->enum_of({"blocking", "nonblocking"}) == "nonblocking";
    }
    fs.pacing_timer_us =
        static_cast<std::uint32_t>(f.uint_or("pacing_timer_us", 1, 1000000, 1000));
    if (f.has("pacing_timer_us") && !f.has("rate_mbps")) {
      f.child("pacing_timer_us").fail(
          "expected \"rate_mbps\" with \"pacing_timer_us\" (the timer paces a sender that has a "
          "rate), got no rate");
    }
    const auto count = f.uint_or("count", 1, 1024, 1);
    check_paths(f, fs, from, to, expect_loop);
    for (std::uint64_t i = 0; i < count; ++i) {
      spec().flows.push_back(fs);
    }
  }

  void read_traffic(const JsonReader& t) {
    reject_unknown(t, scenario_keys::kTraffic);
    const std::string test =
        t.child("test").enum_of({"TCP_STREAM", "TCP_MAERTS", "UDP_STREAM", "TCP_RR"});
    for (TrafficType k : {TrafficType::kTcpStream, TrafficType::kTcpMaerts,
                          TrafficType::kUdpStream, TrafficType::kTcpRr}) {
      if (traffic_type_name(k) == test) {
        test_ = k;
      }
    }
    spec().duration_s = t.child("duration_s").number_in(0.001, 3600);
    spec().warmup_s = t.number_or("warmup_s", 0, 60, 0.05);
    for (const JsonReader& f : nonempty_array(t.child("flows"), "flows")) {
      read_flow(f);
    }
  }

  void read_patches(const JsonReader& p) {
    reject_unknown(p, scenario_keys::kPatches);
    if (auto from = p.optional_child("skip_cow_from")) {
      for (const JsonReader& k : from->array()) {
        const DevKind kind = device_kind(k, kernel_);
        auto& list = spec().patches.skip_cow_from;
        if (std::find(list.begin(), list.end(), kind) != list.end()) {
          k.fail("expected each device kind once, got " + k.node().dump() + " again");
        }
        list.push_back(kind);
      }
    }
    spec().patches.netfilter = p.bool_or("netfilter", false);
  }

  std::optional<double> figure(const JsonReader& r, std::string_view key, double hi) {
    auto c = r.optional_child(key);
    return c ? std::optional<double>(c->number_in(0, hi)) : std::nullopt;
  }

  // A non-empty list of distinct kernel symbols ("profile_top", "profile_absent").
  std::vector<std::string> symbol_list(const JsonReader& list) {
    std::vector<std::string> out;
    for (const JsonReader& e : nonempty_array(list, "kernel symbols")) {
      const std::string s = e.string();
      if (!symbol_from_name(s)) {
        std::vector<std::string> names;
        for (std::size_t i = 0; i < kSymCount; ++i) {
          names.emplace_back(symbol_name(static_cast<Sym>(i)));
        }
        e.fail("expected a kernel symbol skbsim models, got " + json_quote(s) +
               did_you_mean(s, names));
      }
      if (std::find(out.begin(), out.end(), s) != out.end()) {
        e.fail("expected each symbol once, got " + json_quote(s) + " again");
      }
      out.push_back(s);
    }
    return out;
  }

  void read_profile(const JsonReader& r, Reference& ref) {
    ref.profile_top_n = static_cast<std::uint32_t>(r.uint_or("profile_top_n", 1, kSymCount, 5));
    if (auto top = r.optional_child("profile_top")) {
      ref.profile_top = symbol_list(*top);
      if (ref.profile_top.size() > ref.profile_top_n) {
        top->fail("expected at most profile_top_n = " + std::to_string(ref.profile_top_n) +
                  " symbols, got " + std::to_string(ref.profile_top.size()));
      }
    }
    if (r.has("profile_top_n") && ref.profile_top.empty()) {
      r.child("profile_top_n")
          .fail(R"(expected "profile_top_n" only with "profile_top", got )" +
                r.child("profile_top_n").node().dump() + " alone");
    }
    if (auto absent = r.optional_child("profile_absent")) {
      ref.profile_absent = symbol_list(*absent);
      for (std::size_t i = 0; i < ref.profile_absent.size(); ++i) {
        const std::string& s = ref.profile_absent[i];
        if (std::find(ref.profile_top.begin(), ref.profile_top.end(), s) != ref.profile_top.end()) {
          absent->at(i).fail("expected a symbol not also in profile_top, got " + json_quote(s));
        }
      }
    }
  }

  // `host_key` must name a defined host when any of `needs` is given, and only then.
  std::string host_for(const JsonReader& r, std::string_view host_key,
                       std::initializer_list<std::string_view> needs) {
    std::string first;
    for (auto k : needs) {
      if (r.has(k) && first.empty()) {
        first = std::string(k);
      }
    }
    if (!r.has(host_key)) {
      if (!first.empty()) {
        missing(r, host_key,
                "expected key " + json_quote(host_key) + " (the host " + first +
                    " is for), got nothing");
      }
      return {};
    }
    const JsonReader h = r.child(host_key);
    if (first.empty()) {
      std::string list;
      for (auto k : needs) {
        list += (list.empty() ? "" : " or ") + std::string(k);
      }
      h.fail("expected " + json_quote(host_key) + " only with " + list + ", got " +
             h.node().dump() + " alone");
    }
    return spec().hosts[lookup(h, hosts_, "host", "/hosts")].name;
  }

  // An object of counter name -> number >= 0; names are lower-case words joined by '_'.
  std::map<std::string, double> read_counts(const JsonReader& r) {
    if (!r.node().is_object()) {
      r.fail("expected an object of counter name -> number, got " + shown(r.node()));
    }
    std::map<std::string, double> out;
    for (auto it = r.node().begin(); it != r.node().end(); ++it) {
      const std::string& name = it.key();
      const bool word = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
      });
      if (!word) {
        r.child(name).fail("expected a counter name of a-z, 0-9 and _, got " + json_quote(name));
      }
      out[name] = r.child(name).number_in(0, 1e12);
    }
    return out;
  }

  PerSegmentReference read_per_segment(const JsonReader& r) {
    reject_unknown(r, scenario_keys::kPerSegment);
    PerSegmentReference ps;
    ps.source = nonempty_string(r.child("source"), "source");
    ps.tolerance_pct = r.number_or("tolerance_pct", 0, 100, 10);
    ps.segments = r.child("segments").uint_in(1, std::numeric_limits<std::uint64_t>::max());
    if (auto c = r.optional_child("counters")) {
      ps.counters = read_counts(*c);
    }
    if (auto d = r.optional_child("devices")) {
      if (!d->node().is_object()) {
        d->fail("expected an object of device name -> counters, got " + shown(d->node()));
      }
      for (auto it = d->node().begin(); it != d->node().end(); ++it) {
        const JsonReader dev = d->child(it.key());
        if (devices_.find(it.key()) == devices_.end()) {
          const auto names = names_of(devices_);
          dev.fail("expected a device defined in /devices (" + joined(names) + "), got " +
                   json_quote(it.key()) + did_you_mean(it.key(), names));
        }
        ps.devices[it.key()] = read_counts(dev);
      }
    }
    return ps;
  }

  ProfileGroupsReference read_profile_groups(const JsonReader& r) {
    reject_unknown(r, scenario_keys::kProfileGroups);
    ProfileGroupsReference pg;
    pg.source = nonempty_string(r.child("source"), "source");
    pg.tolerance_pct = r.number_or("tolerance_pct", 0, 100, 25);
    pg.busy_samples = r.child("busy_samples").uint_in(1, std::numeric_limits<std::uint64_t>::max());
    const JsonReader g = r.child("us_per_kb");
    if (!g.node().is_object()) {
      g.fail("expected an object of kernel-profile group -> us/KB, got " + shown(g.node()));
    }
    if (g.node().empty()) {
      g.fail("expected at least one kernel-profile group -> us/KB, got {}");
    }
    for (auto it = g.node().begin(); it != g.node().end(); ++it) {
      if (!is_busy_group(it.key())) {
        std::vector<std::string> names;
        for (const auto& pgroup : measure::profile_groups()) {
          if (is_busy_group(pgroup.name)) {
            names.emplace_back(pgroup.name);
          }
        }
        g.child(it.key()).fail("expected a kernel-profile group (" + joined(names) + "), got " +
                               json_quote(it.key()) + did_you_mean(it.key(), names));
      }
      pg.us_per_kb[it.key()] = g.child(it.key()).number_in(0, 1e6);
    }
    return pg;
  }

  // reference.cpu_busy_pct_by_cpu: one share in [0, 100] per CPU of the host.
  std::vector<double> read_busy_by_cpu(const JsonReader& r, const std::string& host) {
    const std::uint32_t cpus = spec().hosts[hosts_.at(host)].cpus;
    if (!r.node().is_array() || r.node().size() != cpus) {
      r.fail("expected an array of " + std::to_string(cpus) + " busy shares in [0, 100], one per "
             "CPU of host " + host + ", got " +
             (r.node().is_array() ? std::to_string(r.node().size()) + " values" : shown(r.node())));
    }
    std::vector<double> out;
    for (const JsonReader& e : r.array()) {
      out.push_back(e.number_in(0, 100));
    }
    return out;
  }

  Reference read_reference(const JsonReader& r) {
    reject_unknown(r, scenario_keys::kReference);
    Reference ref;
    ref.source = nonempty_string(r.child("source"), "source");
    ref.tolerance_pct = r.child("tolerance_pct").number_in(0, 100);
    ref.throughput_mbps = figure(r, "throughput_mbps", 1e7);
    ref.cpu_util_pct = figure(r, "cpu_util_pct", 100);
    ref.service_demand_us_per_kb = figure(r, "service_demand_us_per_kb", 1e6);
    ref.remote_cpu_util_pct = figure(r, "remote_cpu_util_pct", 100);
    ref.remote_service_demand_us_per_kb = figure(r, "remote_service_demand_us_per_kb", 1e6);
    read_profile(r, ref);
    if (auto ps = r.optional_child("per_segment")) {
      ref.per_segment = read_per_segment(*ps);
    }
    if (auto pg = r.optional_child("profile_groups")) {
      ref.profile_groups = read_profile_groups(*pg);
    }
    if (ref.figures().empty() && ref.profile_top.empty() && ref.profile_absent.empty() &&
        !ref.profile_groups && !r.has("cpu_busy_pct_by_cpu")) {
      r.fail(
          "expected at least one figure (throughput_mbps, cpu_util_pct, "
          "service_demand_us_per_kb, remote_cpu_util_pct, remote_service_demand_us_per_kb, "
          "cpu_busy_pct_by_cpu, profile_top, profile_absent, profile_groups), got none");
    }
    ref.host = host_for(
        r, "host",
        {"cpu_util_pct", "service_demand_us_per_kb", "profile_top", "profile_absent",
         "profile_groups", "cpu_busy_pct_by_cpu"});
    if (auto by_cpu = r.optional_child("cpu_busy_pct_by_cpu")) {
      ref.cpu_busy_pct_by_cpu = read_busy_by_cpu(*by_cpu, ref.host);
    }
    ref.remote_host =
        host_for(r, "remote_host", {"remote_cpu_util_pct", "remote_service_demand_us_per_kb"});
    if (!ref.host.empty() && ref.host == ref.remote_host) {
      r.child("remote_host")
          .fail("expected a host other than " + json_quote(ref.host) + " (the local host), got " +
                json_quote(ref.remote_host));
    }
    return ref;
  }

  JsonReader root_;
  std::string base_dir_;
  Scenario out_;
  KernelVersion kernel_ = KernelVersion::k2_6_20;
  TrafficType test_ = TrafficType::kTcpStream;
  std::map<std::string, std::size_t> hosts_;
  std::map<std::string, std::size_t> namespaces_;
  std::map<std::string, std::size_t> devices_;
  std::vector<DeviceInfo> dev_info_;   // parallel to spec().devices
  std::vector<JsonReader> dev_nodes_;  // parallel to spec().devices
  std::vector<JsonReader> ns_nodes_;   // parallel to spec().namespaces
};

// ---- files and "extends" ------------------------------------------------------------------------

struct ChainFile {
  std::string shown;  // path as displayed (and opened)
  json doc;           // the file as written
};

// Reads one file of the chain: syntax errors with line:column, a JSON object required.
// Rejects a key written twice in one object (nlohmann keeps the last silently, hiding a typo'd
// copy-and-paste): a parser callback that tracks where it is.
class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(std::string file) : file_(std::move(file)) {}

  bool operator()(int /*depth*/, nlohmann::detail::parse_event_t event, ordered_json& parsed) {
    using E = nlohmann::detail::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start:
        frames_.push_back({event == E::array_start, 0, {}, {}});
        break;
      case E::key: {
        Frame& f = frames_.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) {
          throw InputError(
              file_, pointer(),
              "expected each key once in an object, got " + json_quote(f.key) + " twice");
        }
        break;
      }
      case E::object_end:
      case E::array_end:
        frames_.pop_back();
        next_element();
        break;
      case E::value:
        next_element();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool array;
    std::size_t index;
    std::string key;
    std::set<std::string> keys;
  };
  void next_element() {
    if (!frames_.empty() && frames_.back().array) {
      ++frames_.back().index;
    }
  }
  std::string pointer() const {
    std::string out;
    for (const Frame& f : frames_) {
      const std::string token = f.array ? std::to_string(f.index) : f.key;
      out += "/";
      for (char c : token) {  // RFC 6901
        out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
      }
    }
    return out;
  }
  std::string file_;
  std::vector<Frame> frames_;
};

// Reads one file of the chain: syntax errors with line:column, a JSON object required, each key
// once per object.
std::pair<json, ordered_json> read_object(const std::string& path) {
  json checked = load_json_file(path, path);
  if (!checked.is_object()) {
    throw InputError(path, "", "expected a JSON object, got " + shown(checked));
  }
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {std::move(checked), ordered_json::parse(text, DuplicateKeyCheck(path))};
}

std::string canonical_key(const std::string& path) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(path, ec);
  return ec ? fs::path(path).lexically_normal().generic_string() : c.generic_string();
}

// The merged document of `path` and its bases; "preset" relative to the directory of `path`.
ordered_json load_merged(const std::string& path, std::vector<std::string>& stack,
                         std::vector<ChainFile>& chain) {
  auto [checked, doc] = read_object(path);
  chain.push_back({path, checked});
  stack.push_back(canonical_key(path));
  if (!checked.contains("extends")) {
    stack.pop_back();
    return doc;
  }
  const JsonReader ext = JsonReader(checked, path).child("extends");
  const std::string given = nonempty_string(ext, "path of the scenario this one extends");
  fs::path base(given);
  if (base.is_relative()) {
    base = (fs::path(path).parent_path() / base).lexically_normal();
  }
  const std::string base_path = base.generic_string();
  std::error_code ec;
  if (!fs::is_regular_file(base, ec)) {
    ext.fail("expected an existing scenario file, got " + json_quote(given) + " (" + base_path +
             ": no such file)");
  }
  const std::string key = canonical_key(base_path);
  if (std::find(stack.begin(), stack.end(), key) != stack.end()) {
    std::vector<std::string> cycle;
    cycle.reserve(chain.size() + 1);
    for (const ChainFile& c : chain) {
      cycle.push_back(c.shown);
    }
    cycle.push_back(base_path);
    ext.fail("expected a base that does not lead back to this file, got " + json_quote(given) +
             " (a cycle: " + joined(cycle, " -> ") + ")");
  }
  ordered_json merged = load_merged(base_path, stack, chain);
  stack.pop_back();
  // The base's relative preset path, rebased onto this file's directory.
  if (merged.contains("preset") && merged["preset"].is_string()) {
    const fs::path p(merged["preset"].get<std::string>());
    if (p.is_relative()) {
      merged["preset"] = (fs::path(given).parent_path() / p).lexically_normal().generic_string();
    }
  }
  doc.erase("extends");
  merged.merge_patch(doc);
  return merged;
}

// Which file of the chain the value at `pointer` of the merged document came from ("" for the
// first file, or when it cannot be told, as for a key missing from an object several files set).
std::string provenance(const std::vector<ChainFile>& chain, const json& merged,
                       const std::string& pointer) {
  if (chain.size() < 2 || pointer.empty()) {
    return {};
  }
  try {
    const json::json_pointer full(pointer);
    // Arrays are replaced whole: whatever is inside one comes from the file that set the array.
    json::json_pointer key;
    json::json_pointer walked;
    const json* node = &merged;
    std::vector<std::string> tokens;
    for (json::json_pointer p = full; !p.empty(); p = p.parent_pointer()) {
      tokens.insert(tokens.begin(), p.back());
    }
    bool in_array = false;
    for (const std::string& t : tokens) {
      if (node->is_array()) {
        in_array = true;
        break;
      }
      if (!node->is_object() || !node->contains(t)) {
        break;
      }
      walked /= t;
      node = &(*node)[t];
    }
    key = in_array ? walked : full;
    if (!merged.contains(key)) {
      return {};
    }
    for (std::size_t i = 0; i < chain.size(); ++i) {
      if (chain[i].doc.contains(key)) {
        return i == 0 ? std::string() : chain[i].shown;
      }
    }
  } catch (const json::exception&) {
    return {};
  }
  return {};
}

}  // namespace

std::vector<ReferenceFigure> Reference::figures() const {
  std::vector<ReferenceFigure> out;
  const std::array<std::pair<const char*, const std::optional<double>*>, 5> all = {{
      {"throughput_mbps", &throughput_mbps},
      {"cpu_util_pct", &cpu_util_pct},
      {"service_demand_us_per_kb", &service_demand_us_per_kb},
      {"remote_cpu_util_pct", &remote_cpu_util_pct},
      {"remote_service_demand_us_per_kb", &remote_service_demand_us_per_kb},
  }};
  for (const auto& [key, v] : all) {
    if (v->has_value()) {
      out.push_back({key, **v});
    }
  }
  for (std::size_t i = 0; i < cpu_busy_pct_by_cpu.size(); ++i) {
    out.push_back({std::string(kCpuBusyFigurePrefix) + std::to_string(i), cpu_busy_pct_by_cpu[i]});
  }
  return out;
}

Scenario scenario_from_json(const json& merged, const std::string& file,
                            const std::string& base_dir) {
  return Validator(merged, file, base_dir).run();
}

Scenario load_scenario(const std::string& path) {
  std::vector<std::string> stack;
  std::vector<ChainFile> chain;
  ordered_json document = load_merged(path, stack, chain);
  const json merged = json::parse(document.dump());
  const std::string base_dir = fs::path(path).parent_path().generic_string();
  try {
    Scenario s = scenario_from_json(merged, path, base_dir);
    s.document = std::move(document);
    return s;
  } catch (const InputError& e) {
    if (e.file() != path) {
      throw;
    }
    const std::string from = provenance(chain, merged, e.pointer());
    if (from.empty()) {
      throw;
    }
    throw InputError(e.file(), e.pointer(), e.message() + " (set in " + from + ")");
  }
}

}  // namespace skbsim::sim
