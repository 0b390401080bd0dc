// sweep.cpp — `skbsim sweep`: value lists and ranges, JSON-pointer edits of the merged scenario,
// the container replication behind /x-containers, the parallel runs and the results table.

#include "sim/sweep.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <boost/program_options.hpp>

#include "sim/cli_args.hpp"
#include "sim/output_dir.hpp"
#include "sim/plot.hpp"
#include "sim/commands.hpp"
#include "sim/input_error.hpp"
#include "sim/json_reader.hpp"
#include "sim/report.hpp"
#include "sim/scenario.hpp"
#include "skbsim/bug.hpp"

#include <unistd.h>

namespace skbsim::sim {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr int kExitUsage = 2;
constexpr std::size_t kMaxRangeValues = 100000;
constexpr std::size_t kMaxPoints = 100000;
constexpr std::uint64_t kMaxContainers = 1024;  // the scenario format's flow "count" limit too

std::string json_string(std::string_view s) {
  return json(std::string(s)).dump();
}

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) {
    return {};
  }
  const auto e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

// ---- value lists ------------------------------------------------------------------------------

// Splits at commas outside [], {} and "..." (JSON string escapes honoured).
std::vector<std::string> split_items(std::string_view text, const std::string& file,
                                     const std::string& pointer) {
  std::vector<std::string> out;
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      out.push_back(trim(text.substr(start, i - start)));
      start = i + 1;
    }
    if (depth < 0) {
      break;
    }
  }
  if (in_string || depth != 0) {
    throw InputError(
        file, pointer,
        "expected a value list with balanced brackets and quotes, got " + json_string(text));
  }
  out.push_back(trim(text.substr(start)));
  for (const std::string& item : out) {
    if (item.empty()) {
      throw InputError(
          file, pointer,
          "expected values separated by single commas, got an empty value in " + json_string(text));
    }
  }
  return out;
}

struct Number {
  double value = 0;
  bool integer = false;  // written without a fraction or exponent
};

std::optional<Number> parse_number(std::string_view s) {
  const std::optional<double> v = parse_double(s);
  if (!v) {
    return std::nullopt;
  }
  const bool integer =
      s.find_first_of(".eExX") == std::string_view::npos && std::abs(*v) < 9.0e15;  // exact
  return Number{*v, integer};
}

// 12 significant digits: 0.1..0.5+0.1 gives 0.3, not 0.30000000000000004.
double tidy(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return std::strtod(buf, nullptr);
}

// "A..B", "A..B+S", "A..B*F" when `item` starts with a number followed by "..", else nullopt.
std::optional<std::vector<ordered_json>> parse_range(const std::string& item,
                                                     const std::string& file,
                                                     const std::string& pointer) {
  const std::size_t dots = item.find("..");
  if (dots == std::string::npos || dots == 0) {
    return std::nullopt;
  }
  const auto lo = parse_number(item.substr(0, dots));
  if (!lo) {
    return std::nullopt;
  }
  const std::string how = " (a range is A..B, A..B+STEP or A..B*FACTOR)";
  const std::string rest = item.substr(dots + 2);
  const std::size_t op = rest.find_first_of("+*", 1);
  const auto hi = parse_number(rest.substr(0, op));
  const auto step = op == std::string::npos ? std::optional<Number>(Number{1, true})
                                            : parse_number(rest.substr(op + 1));
  const bool geometric = op != std::string::npos && rest[op] == '*';
  if (!hi || !step) {
    throw InputError(file, pointer, "expected a numeric range, got " + json_string(item) + how);
  }
  if (hi->value < lo->value) {
    throw InputError(file, pointer,
                     "expected a range whose end is not below its start, got " + json_string(item));
  }
  if (geometric ? (step->value <= 1 || lo->value <= 0) : step->value <= 0) {
    throw InputError(file, pointer,
                     std::string(geometric ? "expected a factor above 1 from a start above 0"
                                           : "expected a step above 0") +
                         ", got " + json_string(item));
  }
  const bool integer = lo->integer && hi->integer && step->integer;
  const double slack = integer ? 0 : 1e-9 * std::max(1.0, std::abs(hi->value));
  std::vector<ordered_json> out;
  for (std::size_t i = 0;; ++i) {
    const double v = geometric ? lo->value * std::pow(step->value, static_cast<double>(i))
                               : lo->value + step->value * static_cast<double>(i);
    if (v > hi->value + slack) {
      break;
    }
    if (out.size() == kMaxRangeValues) {
      throw InputError(file, pointer,
                       "expected a range of at most " + std::to_string(kMaxRangeValues) +
                           " values, got " + json_string(item));
    }
    if (integer) {
      out.emplace_back(static_cast<std::int64_t>(std::llround(v)));
    } else {
      out.emplace_back(tidy(v));
    }
  }
  return out;
}

// ---- JSON pointers ----------------------------------------------------------------------------

std::vector<std::string> pointer_tokens(const std::string& pointer, const std::string& file,
                                        const std::string& where) {
  if (pointer.empty() || pointer[0] != '/' || pointer == "/") {
    throw InputError(file, where,
                     "expected a JSON pointer to a value in the scenario such as "
                     "/traffic/flows/0/send_size, got " +
                         json_string(pointer));
  }
  std::vector<std::string> tokens;
  std::string cur;
  for (std::size_t i = 1; i <= pointer.size(); ++i) {
    if (i == pointer.size() || pointer[i] == '/') {
      tokens.push_back(std::move(cur));
      cur.clear();
      continue;
    }
    if (pointer[i] == '~') {
      if (i + 1 == pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1')) {
        throw InputError(file, where,
                         "expected \"~0\" or \"~1\" after \"~\" in a JSON pointer (RFC 6901), "
                         "got " +
                             json_string(pointer));
      }
      cur += pointer[++i] == '0' ? '~' : '/';
    } else {
      cur += pointer[i];
    }
  }
  return tokens;
}

// fnmatch-like: `*` matches any run of characters.
bool glob_match(std::string_view pattern, std::string_view s) {
  std::size_t p = 0;
  std::size_t i = 0;
  std::size_t star = std::string_view::npos;
  std::size_t mark = 0;
  while (i < s.size()) {
    if (p < pattern.size() && pattern[p] != '*' && pattern[p] == s[i]) {
      ++p;
      ++i;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = i;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') {
    ++p;
  }
  return p == pattern.size();
}

std::string kind_of(const ordered_json& n) {
  if (n.is_object()) {
    return "an object";
  }
  if (n.is_array()) {
    return "an array";
  }
  return n.dump();
}

// Sets the value at `tokens[i..]` under `node` (reached by `walked`): missing object members are
// created, array indices must exist, `*` tokens fan out; null removes an object member.
void set_at(ordered_json& node, const std::vector<std::string>& tokens, std::size_t i,
            const ordered_json& value, const std::string& walked, const std::string& file) {
  const std::string& tok = tokens[i];
  const bool last = i + 1 == tokens.size();
  const std::string here = walked + "/" + json_pointer_token(tok);
  auto descend = [&](ordered_json& child, const std::string& at) {
    if (last) {
      child = value;
    } else {
      set_at(child, tokens, i + 1, value, at, file);
    }
  };
  if (node.is_object()) {
    if (tok.find('*') != std::string::npos) {
      std::vector<std::string> keys;
      for (auto it = node.begin(); it != node.end(); ++it) {
        if (glob_match(tok, it.key())) {
          keys.push_back(it.key());
        }
      }
      if (keys.empty()) {
        throw InputError(file, here,
                         "expected a pattern matching a member of " +
                             (walked.empty() ? std::string("the scenario") : walked) +
                             ", got none matching " + json_string(tok));
      }
      for (const std::string& k : keys) {
        if (last && value.is_null()) {
          node.erase(k);
        } else {
          descend(node[k], walked + "/" + json_pointer_token(k));
        }
      }
      return;
    }
    if (last && value.is_null()) {
      node.erase(tok);
      return;
    }
    if (!node.contains(tok) && !last) {
      node[tok] = ordered_json::object();
    }
    descend(node[tok], here);
    return;
  }
  if (node.is_array()) {
    if (tok == "*") {
      if (node.empty()) {
        throw InputError(file, here, "expected an array with elements to match \"*\", got []");
      }
      for (std::size_t k = 0; k < node.size(); ++k) {
        descend(node[k], walked + "/" + std::to_string(k));
      }
      return;
    }
    const bool digits =
        !tok.empty() && tok.size() < 10 &&
        std::all_of(tok.begin(), tok.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        (tok.size() == 1 || tok[0] != '0');
    const std::size_t index = digits ? std::stoul(tok) : std::numeric_limits<std::size_t>::max();
    if (index >= node.size()) {
      throw InputError(file, here,
                       "expected an index of the array " + walked + " (0.." +
                           std::to_string(node.size() - 1) + ") or \"*\", got " + json_string(tok));
    }
    descend(node[index], here);
    return;
  }
  throw InputError(
      file, walked,
      "expected an object or an array to set " + json_string(tok) + " in, got " + kind_of(node));
}

void set_path(ordered_json& doc, const std::string& pointer, const ordered_json& value,
              const std::string& file) {
  set_at(doc, pointer_tokens(pointer, file, pointer), 0, value, "", file);
}

// ---- /x-containers ----------------------------------------------------------------------------

std::string ipv4_text(std::uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255U) + "." +
         std::to_string((a >> 8) & 255U) + "." + std::to_string(a & 255U);
}

std::uint32_t mask_of(std::uint32_t len) {
  return len == 0 ? 0 : ~0U << (32 - len);
}

// `e[key]` when it is a string, else "".
std::string string_member(const ordered_json& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get_ref<const std::string&>() : std::string();
}

// The entry `name` of a "namespaces" or "devices" list, in either of its forms (docs/scenarios.md).
ordered_json& named_entry(ordered_json& list, const std::string& name) {
  if (list.is_object()) {
    return list.at(name);
  }
  for (ordered_json& e : list) {
    if (string_member(e, "name") == name) {
      return e;
    }
  }
  throw std::out_of_range("no entry " + name);
}

void add_named(ordered_json& list, const std::string& name, ordered_json entry) {
  if (list.is_object()) {
    entry.erase("name");
    list[name] = std::move(entry);
  } else {
    entry["name"] = name;
    list.push_back(std::move(entry));
  }
}

bool name_taken(const ordered_json& list, const std::string& name) {
  if (list.is_object()) {
    return list.contains(name);
  }
  return std::any_of(list.begin(), list.end(),
                     [&](const ordered_json& e) { return string_member(e, "name") == name; });
}

[[noreturn]] void containers_fail(const std::string& file, const std::string& message) {
  throw InputError(file, std::string(kContainersPath), message);
}

// Copies of the first flow's container: for k = 2..n, namespace "<ct>.<k>" with the addresses of
// the container renumbered into the next free subnet of the host route's size, the device pair
// "<dev>.<k>" (container end and host end), a host route to the new subnet, and the flow from it.
// `spec` is the validated template (`doc` as a Scenario), read for names and addresses.
ordered_json replicate_containers(const ordered_json& doc, const ScenarioSpec& spec,
                                  std::uint64_t n, const std::string& file) {
  const std::string ct = spec.flows.front().from_ns;
  const std::string what =
      "a first flow that starts in a container (a namespace joined to its "
      "host's namespace by one etun, veth or venet pair), got ";
  std::vector<const DeviceSpec*> inside;
  for (const DeviceSpec& d : spec.devices) {
    if (d.ns == ct) {
      inside.push_back(&d);
    }
  }
  if (inside.size() != 1 || inside.front()->peer.empty() || inside.front()->kind == DevKind::kNic) {
    containers_fail(file, "expected " + what + "a flow from " + ct + ", which has " +
                              std::to_string(inside.size()) + " device(s), not one end of a pair");
  }
  const DeviceSpec& dev = *inside.front();
  const auto peer_it = std::find_if(spec.devices.begin(), spec.devices.end(),
                                    [&](const DeviceSpec& d) { return d.name == dev.peer; });
  const DeviceSpec& peer = *peer_it;
  const auto ns_it = std::find_if(spec.namespaces.begin(), spec.namespaces.end(),
                                  [&](const NamespaceSpec& s) { return s.name == peer.ns; });
  const NamespaceSpec& host_ns = *ns_it;
  const RouteSpec* subnet = nullptr;
  for (const RouteSpec& r : host_ns.routes) {
    if (r.dev == peer.name) {
      if (subnet != nullptr) {
        containers_fail(file, "expected one route in " + host_ns.name + " to " + peer.name +
                                  " (the container's subnet), got several");
      }
      subnet = &r;
    }
  }
  if (subnet == nullptr || subnet->prefix_len == 0) {
    containers_fail(file, "expected a route in " + host_ns.name +
                              " to the container's subnet via " + peer.name + ", got " +
                              (subnet == nullptr ? "none" : "a default route"));
  }
  const std::uint32_t len = subnet->prefix_len;
  const std::uint32_t mask = mask_of(len);
  const auto ct_it = std::find_if(spec.namespaces.begin(), spec.namespaces.end(),
                                  [&](const NamespaceSpec& s) { return s.name == ct; });
  for (std::uint32_t a : ct_it->addresses) {
    if ((a & mask) != subnet->prefix) {
      containers_fail(file, "expected the container's addresses inside its subnet " +
                                ipv4_text(subnet->prefix) + "/" + std::to_string(len) + ", got " +
                                ipv4_text(a));
    }
  }
  // A subnet is free when no address and no route at least as specific lies inside it.
  auto clashes = [&](std::uint32_t candidate) {
    for (const NamespaceSpec& s : spec.namespaces) {
      for (std::uint32_t a : s.addresses) {
        if ((a & mask) == candidate) {
          return true;
        }
      }
      for (const RouteSpec& r : s.routes) {
        if (r.prefix_len >= len && (r.prefix & mask) == candidate) {
          return true;
        }
      }
    }
    return false;
  };
  ordered_json out = doc;
  ordered_json& namespaces = out.at("namespaces");
  ordered_json& devices = out.at("devices");
  ordered_json& flows = out.at("traffic").at("flows");
  const ordered_json ct_entry = named_entry(namespaces, ct);
  const ordered_json dev_entry = named_entry(devices, dev.name);
  const ordered_json peer_entry = named_entry(devices, peer.name);
  const ordered_json flow_entry = flows.at(0);
  const std::uint64_t size = std::uint64_t{1} << (32 - len);
  std::uint64_t next = subnet->prefix;
  for (std::uint64_t k = 2; k <= n; ++k) {
    do {
      next += size;
    } while (next < 0xE0000000ULL && clashes(static_cast<std::uint32_t>(next)));
    if (next + size > 0xE0000000ULL) {
      containers_fail(file, "expected " + std::to_string(n) + " free /" + std::to_string(len) +
                                " subnets for the containers, got only " + std::to_string(k - 2));
    }
    const auto base = static_cast<std::uint32_t>(next);
    const std::string sfx = "." + std::to_string(k);
    const std::string ns_name = ct + sfx;
    const std::string dev_name = dev.name + sfx;
    const std::string peer_name = peer.name + sfx;
    for (const auto& [list, name] : {std::pair{&namespaces, ns_name}, std::pair{&devices, dev_name},
                                     std::pair{&devices, peer_name}}) {
      if (name_taken(*list, name)) {
        containers_fail(file, "expected the name " + json_string(name) +
                                  " free for a container copy, got it already defined");
      }
    }
    ordered_json ns = ct_entry;
    ordered_json addrs = ordered_json::array();
    for (std::uint32_t a : ct_it->addresses) {
      addrs.push_back(ipv4_text(base | (a & ~mask)));
    }
    ns["addresses"] = std::move(addrs);
    if (ns.contains("routes")) {
      for (ordered_json& r : ns["routes"]) {
        if (string_member(r, "dev") == dev.name) {
          r["dev"] = dev_name;
        }
      }
    }
    add_named(namespaces, ns_name, std::move(ns));
    ordered_json d = dev_entry;
    d["ns"] = ns_name;
    d["peer"] = peer_name;
    add_named(devices, dev_name, std::move(d));
    ordered_json p = peer_entry;
    p["peer"] = dev_name;
    add_named(devices, peer_name, std::move(p));
    named_entry(namespaces, host_ns.name)["routes"].push_back(
        {{"to", ipv4_text(base) + "/" + std::to_string(len)}, {"dev", peer_name}});
    ordered_json f = flow_entry;
    f["from"] = ns_name;
    flows.push_back(std::move(f));
  }
  return out;
}

std::uint64_t container_count(const ordered_json& v, const std::string& file) {
  if (!v.is_number_integer() || v.get<std::int64_t>() < 1 ||
      v.get<std::uint64_t>() > kMaxContainers) {
    containers_fail(file, "expected an integer in [1, " + std::to_string(kMaxContainers) +
                              "] (the number of containers), got " + v.dump());
  }
  return v.get<std::uint64_t>();
}

// ---- points, runs, tables ---------------------------------------------------------------------

std::string describe(const ordered_json& inputs) {
  std::string s;
  for (auto it = inputs.begin(); it != inputs.end(); ++it) {
    s += (s.empty() ? "" : ", ") + it.key() + "=" + it.value().dump();
  }
  return s;
}

}  // namespace

SweepPoint sweep_point(const Scenario& base, const SweepPlan& plan,
                       const std::vector<std::size_t>& index) {
  const std::string base_dir = fs::path(plan.scenario).parent_path().generic_string();
  const std::string& file = plan.scenario;
  ordered_json doc = base.document;
  ordered_json inputs = ordered_json::object();
  for (std::size_t a = 0; a < plan.axes.size(); ++a) {
    const SweepAxis& axis = plan.axes[a];
    for (std::size_t j = 0; j < axis.paths.size(); ++j) {
      inputs[axis.paths[j]] = axis.points[index[a]][j];
    }
  }
  try {
    std::optional<std::uint64_t> containers;
    for (auto it = inputs.begin(); it != inputs.end(); ++it) {
      if (it.key() == kContainersPath) {
        containers = container_count(it.value(), file);
      } else {
        set_path(doc, it.key(), it.value(), file);
      }
    }
    Scenario sc = scenario_from_json(json::parse(doc.dump()), file, base_dir);
    if (containers && *containers > 1) {
      doc = replicate_containers(doc, sc.spec, *containers, file);
      sc = scenario_from_json(json::parse(doc.dump()), file, base_dir);
    }
    return {std::move(inputs), std::move(sc)};
  } catch (const InputError& e) {
    throw InputError(e.file(), e.pointer(),
                     e.message() + " (sweep point " + describe(inputs) + ")");
  }
}

namespace {

// The per-segment counters a row keeps (docs/results.md names; 0 when the symbol never ran).
struct Counter {
  Sym sym;
  bool bytes;  // <symbol>_bytes, else <symbol>_calls
};
constexpr std::array<Counter, 6> kCounters = {{
    {Sym::kPskbExpandHead, false},
    {Sym::kPskbExpandHead, true},
    {Sym::kSkbClone, false},
    {Sym::kCsumPartial, false},
    {Sym::kCsumPartialCopyGeneric, true},
    {Sym::kSkbSegment, false},
}};

std::vector<std::string> counter_keys() {
  std::vector<std::string> keys = {"bytes_copied", "bytes_checksummed"};
  for (const Counter& c : kCounters) {
    keys.push_back(std::string(symbol_name(c.sym)) + (c.bytes ? "_bytes" : "_calls"));
  }
  return keys;
}

// One row, from the run's results document so that its numbers are rounded as `skbsim run`'s.
ordered_json make_row(const SweepPoint& p, const RunResult& r) {
  const ordered_json res = result_json(p.scenario, r, false);
  ordered_json row;
  row["inputs"] = p.inputs;
  row["throughput_mbps"] = res.at("throughput_mbps");
  ordered_json hosts = ordered_json::object();
  for (auto it = res.at("hosts").begin(); it != res.at("hosts").end(); ++it) {
    const ordered_json& h = it.value();
    ordered_json per = ordered_json::object();
    for (const std::string& k : counter_keys()) {
      per[k] = h.at("per_segment").value(k, ordered_json(0.0));
    }
    hosts[it.key()] = {{"cpu_util_pct", h.at("cpu_util_pct")},
                       {"service_demand_us_per_kb", h.at("service_demand_us_per_kb")},
                       {"per_segment", std::move(per)}};
  }
  row["hosts"] = std::move(hosts);
  ordered_json kinds = ordered_json::array();
  for (const Hazard& h : r.hazards) {
    if (std::find(kinds.begin(), kinds.end(), h.kind) == kinds.end()) {
      kinds.push_back(h.kind);
    }
  }
  row["hazards"] = std::move(kinds);
  return row;
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) {
    return s;
  }
  std::string q = "\"";
  for (char c : s) {
    q += c == '"' ? std::string("\"\"") : std::string(1, c);
  }
  return q + "\"";
}

std::string make_csv(const std::vector<SweepAxis>& axes, const std::vector<ordered_json>& rows) {
  std::vector<std::string> paths;
  for (const SweepAxis& a : axes) {
    paths.insert(paths.end(), a.paths.begin(), a.paths.end());
  }
  std::vector<std::string> hosts;
  for (const ordered_json& row : rows) {
    for (auto it = row.at("hosts").begin(); it != row.at("hosts").end(); ++it) {
      if (std::find(hosts.begin(), hosts.end(), it.key()) == hosts.end()) {
        hosts.push_back(it.key());
      }
    }
  }
  const std::vector<std::string> counters = counter_keys();
  std::ostringstream out;
  std::vector<std::string> header = paths;
  header.emplace_back("throughput_mbps");
  for (const std::string& h : hosts) {
    header.push_back(h + ".cpu_util_pct");
    header.push_back(h + ".service_demand_us_per_kb");
    for (const std::string& c : counters) {
      header.push_back(h + "." + c);
    }
  }
  for (std::size_t i = 0; i < header.size(); ++i) {
    out << (i == 0 ? "" : ",") << csv_cell(header[i]);
  }
  out << "\n";
  for (const ordered_json& row : rows) {
    std::vector<std::string> cells;
    for (const std::string& p : paths) {
      cells.push_back(row.at("inputs").at(p).dump());
    }
    cells.push_back(row.at("throughput_mbps").dump());
    for (const std::string& h : hosts) {
      const ordered_json* jh = row.at("hosts").contains(h) ? &row.at("hosts").at(h) : nullptr;
      cells.push_back(jh != nullptr ? jh->at("cpu_util_pct").dump() : "");
      cells.push_back(jh != nullptr ? jh->at("service_demand_us_per_kb").dump() : "");
      for (const std::string& c : counters) {
        cells.push_back(jh != nullptr ? jh->at("per_segment").at(c).dump() : "");
      }
    }
    for (std::size_t i = 0; i < cells.size(); ++i) {
      out << (i == 0 ? "" : ",") << csv_cell(cells[i]);
    }
    out << "\n";
  }
  return out.str();
}

void check_distinct_paths(const std::vector<SweepAxis>& axes, const std::string& file) {
  std::vector<std::string> seen;
  for (const SweepAxis& a : axes) {
    for (const std::string& p : a.paths) {
      if (std::find(seen.begin(), seen.end(), p) != seen.end()) {
        throw InputError(file, p, "expected each path on one axis only, got it twice");
      }
      seen.push_back(p);
    }
  }
}

}  // namespace

// ---- parsing ----------------------------------------------------------------------------------

namespace {

// One item of a value list: JSON, else an array of items written without quotes ([6.x,veth]),
// else a bare string.
ordered_json parse_item(const std::string& item, const std::string& file,
                        const std::string& pointer) {
  try {
    return ordered_json::parse(item);
  } catch (const json::parse_error&) {
    if (item.size() >= 2 && item.front() == '[' && item.back() == ']') {
      ordered_json a = ordered_json::array();
      const std::string inside = item.substr(1, item.size() - 2);
      if (!trim(inside).empty()) {
        for (const std::string& e : split_items(inside, file, pointer)) {
          a.push_back(parse_item(e, file, pointer));
        }
      }
      return a;
    }
    if (item.find_first_of("[]{}\"") != std::string::npos) {
      throw InputError(file, pointer,
                       "expected a JSON value or a bare word, got " + json_string(item));
    }
    return item;  // a bare string: 2.6.20, 6.x, etun
  }
}

}  // namespace

std::vector<ordered_json> parse_sweep_values(std::string_view text, const std::string& file,
                                             const std::string& pointer) {
  std::vector<ordered_json> out;
  for (const std::string& item : split_items(text, file, pointer)) {
    if (auto range = parse_range(item, file, pointer)) {
      out.insert(out.end(), range->begin(), range->end());
    } else {
      out.push_back(parse_item(item, file, pointer));
    }
  }
  return out;
}

namespace {

// The paths of one axis ("P" or "P1,P2,..."), each checked as a pointer or a pseudo-path.
std::vector<std::string> axis_paths(const std::string& text, const std::string& file,
                                    const std::string& where) {
  std::vector<std::string> paths;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    paths.push_back(
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) {
      break;
    }
    start = comma + 1;
  }
  for (const std::string& p : paths) {
    (void)pointer_tokens(p, file, where.empty() ? p : where);
    if (p.rfind("/x-", 0) == 0 && p != kContainersPath) {
      throw InputError(file, where.empty() ? p : where,
                       "expected a JSON pointer into the scenario or the pseudo-path " +
                           std::string(kContainersPath) + ", got " + json_string(p));
    }
  }
  return paths;
}

SweepAxis make_axis(std::vector<std::string> paths, const std::vector<ordered_json>& values,
                    const std::string& file, const std::string& where) {
  SweepAxis axis;
  axis.paths = std::move(paths);
  if (values.empty()) {
    throw InputError(file, where, "expected at least one value, got none");
  }
  for (const ordered_json& v : values) {
    if (axis.paths.size() == 1) {
      axis.points.push_back({v});
      continue;
    }
    if (!v.is_array() || v.size() != axis.paths.size()) {
      throw InputError(file, where,
                       "expected each value of a linked axis to be an array of " +
                           std::to_string(axis.paths.size()) + " values (one per path), got " +
                           v.dump());
    }
    axis.points.emplace_back(v.begin(), v.end());
  }
  return axis;
}

}  // namespace

SweepAxis parse_sweep_set(std::string_view arg, const std::string& file) {
  const std::size_t eq = arg.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw InputError(file, "",
                     "expected PATH=VALUES such as /traffic/flows/0/send_size=64..65536*4, got " +
                         json_string(arg));
  }
  const std::string path_text(arg.substr(0, eq));
  std::vector<std::string> paths = axis_paths(path_text, file, "");
  const auto values = parse_sweep_values(arg.substr(eq + 1), file, path_text);
  return make_axis(std::move(paths), values, file, path_text);
}

SweepAxis sweep_axis_from_json(const std::string& paths, const ordered_json& values,
                               const std::string& file, const std::string& pointer) {
  std::vector<std::string> p = axis_paths(paths, file, pointer);
  if (values.is_string()) {
    return make_axis(std::move(p), parse_sweep_values(values.get<std::string>(), file, pointer),
                     file, pointer);
  }
  if (!values.is_array()) {
    throw InputError(
        file, pointer,
        "expected an array of values or a string such as \"64..65536*4\", got " + kind_of(values));
  }
  return make_axis(std::move(p), std::vector<ordered_json>(values.begin(), values.end()), file,
                   pointer);
}

std::vector<std::vector<std::size_t>> sweep_grid(const std::vector<SweepAxis>& axes) {
  std::size_t total = 1;
  for (const SweepAxis& a : axes) {
    total *= a.points.size();
    if (total > kMaxPoints) {
      throw InputError(
          "--set", "",
          "expected a grid of at most " + std::to_string(kMaxPoints) + " points, got more");
    }
  }
  std::vector<std::vector<std::size_t>> grid;
  grid.reserve(total);
  std::vector<std::size_t> index(axes.size(), 0);
  for (std::size_t n = 0; n < total; ++n) {
    grid.push_back(index);
    for (std::size_t a = axes.size(); a-- > 0;) {  // odometer: the last axis turns fastest
      if (++index[a] < axes[a].points.size()) {
        break;
      }
      index[a] = 0;
    }
  }
  return grid;
}

Study load_study(const std::string& path) {
  const json checked = load_json_file(path, path);
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  const ordered_json doc = ordered_json::parse(text.str());
  const JsonReader r(checked, path);
  r.reject_unknown_keys({"description", "scenario", "set", "x", "y", "host", "comment"});
  Study s;
  s.file = path;
  s.description = r.string_or("description", "");
  const JsonReader sc = r.child("scenario");
  fs::path scenario(sc.string());
  if (scenario.is_relative()) {
    scenario = (fs::path(path).parent_path() / scenario).lexically_normal();
  }
  s.plan.scenario = scenario.generic_string();
  std::error_code ec;
  if (!fs::is_regular_file(scenario, ec)) {
    sc.fail("expected a scenario file (relative to the study's directory), got " +
            sc.node().dump() + " (" + s.plan.scenario + ": no such file)");
  }
  const JsonReader set = r.child("set");
  if (!set.node().is_object() || set.node().empty()) {
    set.fail("expected an object of PATH: values, got " + kind_of(doc.at("set")));
  }
  const ordered_json& ordered_set = doc.at("set");
  for (auto it = ordered_set.begin(); it != ordered_set.end(); ++it) {
    s.plan.axes.push_back(
        sweep_axis_from_json(it.key(), it.value(), path, "/set/" + json_pointer_token(it.key())));
  }
  check_distinct_paths(s.plan.axes, path);
  const JsonReader x = r.child("x");
  s.x = x.string();
  bool found = false;
  for (const SweepAxis& a : s.plan.axes) {
    found = found || std::find(a.paths.begin(), a.paths.end(), s.x) != a.paths.end();
  }
  if (!found) {
    x.fail("expected one of the paths in \"set\", got " + x.node().dump());
  }
  s.y = r.child("y").enum_of({"cpu_util_pct", "service_demand_us_per_kb"});
  const JsonReader host = r.child("host");
  s.host = host.string();
  const Scenario base = load_scenario(s.plan.scenario);
  if (std::none_of(base.spec.hosts.begin(), base.spec.hosts.end(),
                   [&](const HostSpec& h) { return h.name == s.host; })) {
    host.fail("expected a host of " + s.plan.scenario + ", got " + host.node().dump());
  }
  return s;
}

namespace {

// Calls fn(i) for i in [0, n) on `jobs` threads (the caller is one of them), each taking the next
// index as it becomes free; fn must not throw.
template <typename Fn>
void parallel_for(std::size_t n, unsigned jobs, Fn fn) {
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < n; i = next++) {
      fn(i);
    }
  };
  std::vector<std::jthread> workers;
  const std::size_t threads = std::min<std::size_t>(std::max(jobs, 1U), n);
  for (std::size_t t = 1; t < threads; ++t) {
    workers.emplace_back(work);
  }
  work();
}

}  // namespace

SweepTable run_sweep_plan(const SweepPlan& plan, unsigned jobs, bool progress) {
  check_distinct_paths(plan.axes, "--set");
  const Scenario base = load_scenario(plan.scenario);
  const auto grid = sweep_grid(plan.axes);
  const std::size_t n = grid.size();

  // Every point validated before any runs; the first bad one in grid order is the error.
  std::vector<std::optional<SweepPoint>> points(n);
  std::vector<std::exception_ptr> bad(n);
  parallel_for(n, jobs, [&](std::size_t i) {
    try {
      points[i] = sweep_point(base, plan, grid[i]);
    } catch (...) {
      bad[i] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : bad) {
    if (e) {
      std::rethrow_exception(e);
    }
  }

  std::vector<ordered_json> rows(n);
  std::vector<std::string> failures(n);
  std::atomic<std::size_t> done{0};
  std::mutex io;
  const auto start = std::chrono::steady_clock::now();
  parallel_for(n, jobs, [&](std::size_t i) {
    try {
      rows[i] = make_row(*points[i], run_scenario(points[i]->scenario.spec));
    } catch (const std::exception& e) {  // SkbBug, or a spec run_scenario refuses
      failures[i] = e.what();
    }
    const std::size_t d = ++done;
    if (progress) {
      const std::chrono::duration<double> t = std::chrono::steady_clock::now() - start;
      const std::lock_guard lock(io);
      std::cerr << "\r[" << d << "/" << n << "] " << static_cast<int>(t.count()) << " s\033[K"
                << std::flush;
    }
  });
  if (progress) {
    std::cerr << "\r\033[K" << std::flush;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!failures[i].empty()) {
      throw SweepRunError("sweep point " + describe(points[i]->inputs) + ": " + failures[i]);
    }
  }

  ordered_json out;
  out["scenario"] = plan.scenario;
  ordered_json axes = ordered_json::array();
  for (const SweepAxis& a : plan.axes) {
    for (std::size_t j = 0; j < a.paths.size(); ++j) {
      ordered_json values = ordered_json::array();
      for (const auto& p : a.points) {
        values.push_back(p[j]);
      }
      axes.push_back({{"path", a.paths[j]}, {"values", std::move(values)}});
    }
  }
  out["axes"] = std::move(axes);
  out["rows"] = rows;
  return {out.dump(2) + "\n", make_csv(plan.axes, rows), n};
}

// ---- the command ------------------------------------------------------------------------------

int run_sweep(const std::vector<std::string>& args) {
  const std::string usage =
      "skbsim sweep SCENARIO.json --set PATH=V1,V2,... [--set ...] [--jobs N] [--out DIR] "
      "[--plot DIR]\n"
      "       skbsim sweep --study STUDY.json [--set ...] [--jobs N] [--out DIR] [--plot DIR]";
  po::options_description visible("Options");
  visible.add_options()("help,h", "print this help")(
      "set,s", po::value<std::vector<std::string>>()->composing(),
      "PATH=VALUES: an axis of the grid (repeatable; see below)")(
      "study", po::value<std::string>(), "a ready-made study (scenarios/studies/*.json)")(
      "jobs,j", po::value<unsigned>(), "worker threads (default: the number of CPUs)")(
      "out,o", po::value<std::string>(),
      "write DIR/sweep.json and DIR/sweep.csv (default: the CSV on stdout)")(
      "plot", po::value<std::string>(),
      "draw the sweep into DIR with gnuplot: CPU and service demand against the first axis, "
      "one line per combination of the others (skbsim plot)");
  po::options_description all;
  all.add(visible).add_options()("scenario", po::value<std::string>());
  po::positional_options_description pos;
  pos.add("scenario", 1);
  po::variables_map vm;
  if (!parse_args(args, visible, all, pos, vm, usage)) {
    return kExitUsage;
  }
  if (vm.count("help") != 0) {
    std::cout
        << "Usage: " << usage
        << "\n\nRuns SCENARIO over every combination of the values given for JSON-pointer\n"
           "paths into it (after its \"extends\" chain is merged), in parallel, and writes one\n"
           "table with a row per point: the inputs, throughput, CPU utilisation, service\n"
           "demand and the main per-segment counters of every host. The output is the same\n"
           "for any --jobs. Every point is validated before anything runs.\n\n"
           "PATH  a JSON pointer: /kernel, /traffic/flows/0/send_size, /devices/A~1etun1/features\n"
           "      (~1 is \"/\" in a name); a token with * matches every member it fits\n"
           "      (/devices/*/mtu); P1,P2 = linked paths, moving together (each value an array\n"
           "      with one value per path); /x-containers = number of copies of the first\n"
           "      flow's container (namespace, device pair, host route, flow). null removes.\n"
           "VALUES  comma-separated (commas inside [...], {...} or \"...\" do not separate):\n"
           "      JSON values (16384, true, [\"NETIF_F_SG\"], [], \"6.x\"), bare words (6.x),\n"
           "      ranges A..B*F (geometric), A..B+S and A..B (arithmetic), ends included.\n\n"
           "  skbsim sweep scenarios/thread2007/container.json \\\n"
           "      --set /traffic/flows/0/send_size=64..65536*4 \\\n"
           "      --set '/patches/skip_cow_from=[],[\"etun\"]' --out out/sweep\n\n"
           "docs/whatif.md describes the table and the study files.\n\n"
        << visible;
    return 0;
  }
  const bool has_scenario = vm.count("scenario") != 0;
  const bool has_study = vm.count("study") != 0;
  const std::vector<std::string> sets =
      vm.count("set") != 0 ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (has_scenario == has_study || (has_scenario && sets.empty())) {
    std::cerr << "skbsim sweep: expected SCENARIO.json with at least one --set, or --study "
                 "STUDY.json\n\nUsage: "
              << usage << "\n";
    return kExitUsage;
  }
  unsigned jobs = std::max(1U, std::thread::hardware_concurrency());
  if (vm.count("jobs") != 0) {
    jobs = vm["jobs"].as<unsigned>();
    if (jobs == 0) {
      std::cerr << "skbsim sweep: expected --jobs of at least 1\n\nUsage: " << usage << "\n";
      return kExitUsage;
    }
  }
  try {
    SweepPlan plan;
    if (has_study) {
      plan = load_study(vm["study"].as<std::string>()).plan;
    } else {
      plan.scenario = vm["scenario"].as<std::string>();
    }
    for (const std::string& s : sets) {
      plan.axes.push_back(parse_sweep_set(s, "--set"));
    }
    const SweepTable t = run_sweep_plan(plan, jobs, isatty(STDERR_FILENO) != 0);
    if (vm.count("out") != 0) {
      const fs::path out = vm["out"].as<std::string>();
      write_atomically(out, {{"sweep.json", t.json}, {"sweep.csv", t.csv}});
      std::cout << "wrote " << (out / "sweep.json").string() << " and "
                << (out / "sweep.csv").string() << " (" << t.points << " points)\n";
    } else if (vm.count("plot") == 0) {
      std::cout << t.csv << std::flush;
    }
    if (vm.count("plot") != 0) {
      PlotOptions o;
      o.breakdown = false;
      o.predicted = false;
      const std::string dir = vm["plot"].as<std::string>();
      write_plots(dir, {PlotInput{"sweep.json", nlohmann::json::parse(t.json)}}, o);
      std::cout << "drew the sweep into " << dir << "\n";
    }
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitUsage;
  } catch (const SweepRunError& e) {
    std::cerr << "skbsim sweep: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace skbsim::sim
