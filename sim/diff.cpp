// diff.cpp — `skbsim diff`: two scenarios or two results files, the change in throughput, CPU and
// service demand per host, split symbol by symbol into parts that add up to it, each explained.

#include "sim/diff.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>

#include "sim/cli_args.hpp"
#include "sim/commands.hpp"
#include "sim/input_error.hpp"
#include "sim/json_reader.hpp"
#include "sim/report.hpp"
#include "sim/scenario.hpp"
#include "skbsim/bug.hpp"
#include "skbsim/symbols.hpp"

namespace skbsim::sim {
namespace {

namespace po = boost::program_options;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr int kExitUsage = 2;
// Calls per segment equal to 4 decimals (how results files round them) count as unchanged.
constexpr double kSameCalls = 0.00005;
// Bytes per segment equal to a tenth of a byte count as unchanged.
constexpr double kSameBytes = 0.05;
// Text output lists symbols whose cycles per segment moved at least this much; the others are
// summed on one line (JSON lists them all).
constexpr double kShownCycles = 0.01;

double round_to(double v, int decimals) {
  const double f = std::pow(10.0, decimals);
  const double r = std::round(v * f) / f;
  return r == 0 ? 0.0 : r;  // no "-0.0"
}

std::string fixed(double v, int decimals) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(decimals) << round_to(v, decimals);
  return s.str();
}

std::string signed_fixed(double v, int decimals) {
  const std::string s = fixed(v, decimals);
  return s[0] == '-' || std::stod(s) == 0 ? s : "+" + s;
}

std::string pct_change(double a, double b) {
  if (a == 0) {
    return b == 0 ? "0%" : "new";
  }
  return signed_fixed(100.0 * (b - a) / a, 1) + "%";
}

// ---- kernel facts: who calls whom --------------------------------------------------------------

// A call site from the kernel source: `caller` runs `callee` (in the model too, which records each
// function's own work separately, as perf's self time does).
struct CallSite {
  Sym caller;
  Sym callee;
  const char* what;   // what the callee does for the caller
  bool sole = false;  // the callee's only caller on the model's packet paths (sim/stack.cpp)
};

constexpr std::array<CallSite, 21> kCallSites = {{
    // net/ipv4/ip_forward.c, ip_forward()
    {Sym::kIpForward, Sym::kSkbCow, "makes the forwarded skb writable", true},
    {Sym::kIpForward, Sym::kIpDecreaseTtl, "decrements the TTL", true},
    // net/ipv4/tcp.c, tcp_sendmsg(): the user's data into the skb
    {Sym::kTcpSendmsg, Sym::kCsumPartialCopyGeneric,
     "copies and sums the data when the route device cannot checksum"},
    {Sym::kTcpSendmsg, Sym::kCopyFromUser, "copies the data when the route device checksums"},
    // include/linux/skbuff.h, skb_cow()/skb_cow_head(): a new head when cloned or short of room
    {Sym::kSkbCow, Sym::kPskbExpandHead, "copies a cloned head"},
    {Sym::kSkbCowHead, Sym::kPskbExpandHead, "copies a cloned header"},
    // net/core/skbuff.c
    {Sym::kPskbExpandHead, Sym::kKmalloc, "allocates the new head"},
    {Sym::kPskbExpandHead, Sym::kKmemCacheAlloc, "allocates the new head (6.x small heads)"},
    {Sym::kAllocSkb, Sym::kKmemCacheAlloc, "takes the sk_buff from skbuff_head_cache"},
    {Sym::kAllocSkb, Sym::kKmalloc, "allocates the data head"},
    {Sym::kNetdevAllocSkb, Sym::kAllocSkb, "allocates a receive skb"},
    {Sym::kSkbClone, Sym::kKmemCacheAlloc, "takes an sk_buff when the fast clone is in use"},
    {Sym::kSkbCopy, Sym::kAllocSkb, "allocates the copy"},
    {Sym::kPskbCopy, Sym::kAllocSkb, "allocates the copy's head"},
    {Sym::kSkbSegment, Sym::kAllocSkb, "allocates each segment"},
    {Sym::kKfreeSkb, Sym::kKfreeSkbFree, "frees on the last reference"},
    {Sym::kConsumeSkb, Sym::kKfreeSkbFree, "frees on the last reference"},
    {Sym::kKfreeSkbFree, Sym::kKmemCacheFree, "returns the sk_buff to its cache"},
    {Sym::kKfreeSkbFree, Sym::kKfree, "frees the head with its last reference (skb_release_data)"},
    // net/core/dev.c: GSO in the transmit path
    {Sym::kSkbGsoSegment, Sym::kSkbSegment, "segments a GSO skb"},
    {Sym::kSkbChecksumHelp, Sym::kCsumPartial, "sums the payload in software"},
}};

// A free and the allocation it undoes: in a steady state every object allocated is freed once.
constexpr std::array<std::pair<Sym, Sym>, 2> kFreeOf = {{
    {Sym::kKfree, Sym::kKmalloc},
    {Sym::kKmemCacheFree, Sym::kKmemCacheAlloc},
}};

// What a symbol's bytes are (results files give their sum): by group, and by name where the kernel
// function copies and sums in one pass.
std::string bytes_verb(Sym s) {
  const std::string_view name = symbol_name(s);
  switch (symbol_group(s)) {
    case SymGroup::kChecksum:
      return name.find("copy") != std::string_view::npos ? "copies and checksums" : "checksums";
    case SymGroup::kCopy:
    case SymGroup::kSkb:
      return "copies";
    default:
      return "handles";
  }
}

// ---- one side ---------------------------------------------------------------------------------

struct SymRow {  // per data segment
  double calls = 0;
  double cycles = 0;
  double bytes = 0;
};

struct HostSide {
  std::string name;
  double cpu = 0;
  double sd = 0;
  double cycles = 0;  // the sum over symbols, per segment
  std::array<SymRow, kSymCount> sym{};
};

struct Side {
  std::string file;
  std::string scenario;
  std::string kernel;
  std::string preset;
  double throughput = 0;
  double segments = 0;
  double elapsed = 0;
  std::vector<HostSide> hosts;

  const HostSide* host(const std::string& n) const {
    for (const HostSide& h : hosts) {
      if (h.name == n) {
        return &h;
      }
    }
    return nullptr;
  }
  double segments_per_s() const { return elapsed > 0 ? segments / elapsed : 0; }
};

Side read_side(const DiffInput& in) {
  const json doc = json::parse(in.result.dump());
  const JsonReader r(doc, in.file);
  Side s;
  s.file = in.file;
  s.scenario = r.string_or("scenario", "");
  s.kernel = r.string_or("kernel", "");
  s.preset = r.string_or("preset", "");
  s.throughput = r.child("throughput_mbps").number_in(0, 1e12);
  s.elapsed = r.child("elapsed_s").number_in(0, 1e9);
  s.segments = static_cast<double>(r.child("segments").uint_in(0, 1ULL << 60));
  const double segs = std::max(s.segments, 1.0);  // as result_json divides
  const JsonReader hosts = r.child("hosts");
  if (!hosts.node().is_object()) {
    hosts.fail("expected an object of hosts, got " + hosts.node().dump());
  }
  for (auto it = in.result.at("hosts").begin(); it != in.result.at("hosts").end(); ++it) {
    const JsonReader h = hosts.child(it.key());
    HostSide hs;
    hs.name = it.key();
    hs.cpu = h.child("cpu_util_pct").number_in(0, 1e6);
    hs.sd = h.child("service_demand_us_per_kb").number_in(0, 1e12);
    const JsonReader per = h.child("per_segment");
    for (const JsonReader& p : h.child("profile").array()) {
      const JsonReader sym = p.child("symbol");
      const auto id = symbol_from_name(sym.string());
      if (!id) {
        sym.fail("expected a kernel symbol skbsim models, got " + sym.node().dump());
      }
      SymRow& row = hs.sym[index(*id)];
      row.calls = static_cast<double>(p.child("calls").uint_in(0, 1ULL << 60)) / segs;
      row.cycles = p.child("cycles").number_in(0, 1e18) / segs;
      const std::string bytes_key = sym.string() + "_bytes";
      row.bytes = per.has(bytes_key) ? per.child(bytes_key).number_in(0, 1e12) : 0;
      hs.cycles += row.cycles;
    }
    s.hosts.push_back(std::move(hs));
  }
  return s;
}

// ---- inputs that differ -----------------------------------------------------------------------

// Leaves that differ between two scenario documents (objects by key, equal-length arrays by
// index, anything else whole); `comment` members are left out.
void diff_documents(const ordered_json* a, const ordered_json* b, const std::string& path,
                    ordered_json& out) {
  if (a != nullptr && b != nullptr && *a == *b) {
    return;
  }
  const bool objects = a != nullptr && b != nullptr && a->is_object() && b->is_object();
  const bool arrays =
      a != nullptr && b != nullptr && a->is_array() && b->is_array() && a->size() == b->size();
  if (objects) {
    for (auto it = a->begin(); it != a->end(); ++it) {
      const auto other = b->find(it.key());
      if (it.key() != "comment") {
        diff_documents(&it.value(), other != b->end() ? &*other : nullptr,
                       path + "/" + json_pointer_token(it.key()), out);
      }
    }
    for (auto it = b->begin(); it != b->end(); ++it) {
      if (it.key() != "comment" && !a->contains(it.key())) {
        diff_documents(nullptr, &it.value(), path + "/" + json_pointer_token(it.key()), out);
      }
    }
    return;
  }
  if (arrays) {
    for (std::size_t i = 0; i < a->size(); ++i) {
      diff_documents(&(*a)[i], &(*b)[i], path + "/" + std::to_string(i), out);
    }
    return;
  }
  ordered_json e = {{"path", path}};
  if (a != nullptr) {
    e["a"] = *a;
  }
  if (b != nullptr) {
    e["b"] = *b;
  }
  out.push_back(std::move(e));
}

ordered_json inputs_diff(ordered_json a, ordered_json b) {
  for (const char* k : {"name", "description", "reference"}) {
    a.erase(k);
    b.erase(k);
  }
  ordered_json out = ordered_json::array();
  diff_documents(&a, &b, "", out);
  return out;
}

// ---- why a symbol moved -----------------------------------------------------------------------

struct HostPair {
  const HostSide& a;
  const HostSide& b;
  double segments_b;  // data segments in B's measured window
  double calls_a(Sym s) const { return a.sym[index(s)].calls; }
  double calls_b(Sym s) const { return b.sym[index(s)].calls; }
  double dcalls(Sym s) const { return calls_b(s) - calls_a(s); }
  bool calls_moved(Sym s) const { return std::abs(dcalls(s)) >= kSameCalls; }
};

bool accounts_for(double part, double whole) {
  return std::abs(part - whole) <= 0.02 * std::abs(whole) + 2 * kSameCalls;
}

std::string per_seg(double calls) {
  return signed_fixed(calls, 4) + "/seg";
}

// The explanation of one symbol's move, from its own counters and those of its callers.
std::string explain(Sym s, const HostPair& p) {
  const SymRow& a = p.a.sym[index(s)];
  const SymRow& b = p.b.sym[index(s)];
  const std::string name(symbol_name(s));
  std::vector<std::string> why;
  const double d = p.dcalls(s);
  if (a.calls > 0 && b.calls == 0) {
    why.push_back("no longer runs (" + fixed(a.calls, 4) + " calls/seg in A)");
  } else if (a.calls == 0 && b.calls > 0) {
    why.push_back("newly runs (" + fixed(b.calls, 4) + " calls/seg in B)");
  } else if (p.calls_moved(s)) {
    why.push_back("calls/seg " + fixed(a.calls, 4) + " -> " + fixed(b.calls, 4) + " (" +
                  pct_change(a.calls, b.calls) + ")");
  }
  if (std::abs(b.bytes - a.bytes) >= kSameBytes) {
    why.push_back(bytes_verb(s) + " " + fixed(a.bytes, 1) + " -> " + fixed(b.bytes, 1) + " B/seg");
    if (!p.calls_moved(s) && std::abs(b.bytes - a.bytes) < 0.01 * a.bytes) {
      // the payload a segment carries on average (sub-MSS tails), not the path
      why.push_back("practically the same work per segment: bytes " +
                    pct_change(a.bytes, b.bytes));
    }
  }
  bool accounted = !p.calls_moved(s);
  // A free that mirrors its allocation.
  for (const auto& [free_sym, alloc_sym] : kFreeOf) {
    if (free_sym == s && !accounted && p.calls_moved(alloc_sym) &&
        accounts_for(p.dcalls(alloc_sym), d)) {
      why.push_back("mirrors " + std::string(symbol_name(alloc_sym)) + " (" +
                    per_seg(p.dcalls(alloc_sym)) + "): each object allocated is freed once");
      accounted = true;
    }
  }
  // Callers that moved with it, and whether they account for the change.
  if (!accounted) {
    std::vector<const CallSite*> movers;
    const CallSite* steady = nullptr;
    for (const CallSite& c : kCallSites) {
      if (c.callee != s) {
        continue;
      }
      // A caller within half a percent of its calls per segment runs as often: what moves by
      // that little is the edge of the measured window, not the change.
      const bool caller_steady =
          std::abs(p.dcalls(c.caller)) < std::max(kSameCalls, 0.005 * p.calls_a(c.caller));
      // A sole caller whose own move is a twentieth of the callee's or less runs practically as
      // often: the callee's move is inside it (the caller's small move is other traffic, ACKs).
      const bool caller_near_steady = std::abs(p.dcalls(c.caller)) <= 0.05 * std::abs(d);
      if (!caller_steady && (p.dcalls(c.caller) < 0) == (d < 0)) {
        movers.push_back(&c);
      }
      if (c.sole && (caller_steady || caller_near_steady) && p.calls_a(c.caller) > 0) {
        steady = &c;
      }
    }
    double sum = 0;
    for (const CallSite* c : movers) {
      sum += p.dcalls(c->caller);
    }
    std::vector<const CallSite*> named;
    std::string verb = "follows its caller";
    if (!movers.empty() && accounts_for(sum, d)) {
      named = movers;
    } else {
      for (const CallSite* c : movers) {
        if (accounts_for(p.dcalls(c->caller), d)) {
          named = {c};
        }
      }
      if (named.empty()) {  // callers that explain a good part of it (a quarter or more)
        verb = "partly its caller";
        double part = 0;
        for (const CallSite* c : movers) {
          if (std::abs(p.dcalls(c->caller)) < std::abs(d)) {
            named.push_back(c);
            part += p.dcalls(c->caller);
          }
        }
        if (std::abs(part) < 0.25 * std::abs(d)) {
          named.clear();
        }
      }
    }
    if (!named.empty()) {
      std::string list;
      for (const CallSite* c : named) {
        list += (list.empty() ? "" : "; ") + std::string(symbol_name(c->caller)) + " " +
                per_seg(p.dcalls(c->caller)) + ", which " + c->what;
      }
      why.push_back(verb + (named.size() > 1 ? "s " : " ") + list);
      accounted = verb[0] == 'f';
    } else if (steady != nullptr) {
      const std::string caller(symbol_name(steady->caller));
      why.push_back("its only caller " + caller + " runs as often (" +
                    fixed(p.calls_b(steady->caller), 4) + "/seg) but calls it " +
                    fixed(std::abs(d), 4) + "/seg " + (d < 0 ? "less" : "more") +
                    " often: " + (d < 0 ? "skipped" : "added") + " inside " + caller);
      accounted = true;
    }
  }
  // Per-packet work that every ACK also does: the ACK rate moved (sent by this host's receiver,
  // tcp_send_ack, or taken by its sender, tcp_ack), and a whole number of passes per ACK (the hops
  // and namespaces an ACK crosses) accounts for the change.
  for (Sym ack : {Sym::kTcpSendAck, Sym::kTcpAck}) {
    if (accounted || s == ack || !p.calls_moved(ack)) {
      continue;
    }
    const double dack = p.dcalls(ack);
    for (int k = 1; k <= 4 && !accounted; ++k) {
      const double share = k * dack / d;
      if (accounts_for(k * dack, d) || (share >= 0.75 && share <= 1.25)) {
        why.push_back(std::string(accounts_for(k * dack, d) ? "follows" : "mostly follows") +
                      " the ACK rate: " + std::string(symbol_name(ack)) + " " + per_seg(dack) +
                      (k == 1 ? "" : ", " + std::to_string(k) + " passes an ACK"));
        accounted = true;
      }
    }
  }
  // A call or two over the whole window: the edges of the measured window.
  const double over_window = std::round(std::abs(d) * p.segments_b);
  if (!accounted && a.calls > 0 && b.calls > 0 && over_window <= 3) {
    why.push_back(fixed(over_window, 0) + (over_window == 1 ? " call" : " calls") +
                  (d < 0 ? " fewer" : " more") + " over B's " + fixed(p.segments_b, 0) +
                  " segments: the edges of the measured window");
    accounted = true;
  }
  // Within half a percent of A's calls per segment.
  if (!accounted && a.calls > 0 && std::abs(d) < 0.005 * a.calls) {
    why.push_back("practically the same work per segment: calls " + pct_change(a.calls, b.calls));
    accounted = true;
  }
  // Per-batch or per-skb work that covers several segments a call (GSO/TSO skbs, interrupts).
  if (!accounted && a.calls > 0 && b.calls > 0 && (a.calls < 1 || b.calls < 1)) {
    const std::string every =
        "once every " + fixed(1 / a.calls, 2) + " -> " + fixed(1 / b.calls, 2) + " segments";
    why.push_back(a.calls < 1 && b.calls < 1
                      ? "runs per batch, not per segment: " + every
                      : every + ": each call covers " + (d < 0 ? "more" : "fewer") +
                            " segments (GSO/TSO skbs, batches)");
    accounted = true;
  }
  if (!p.calls_moved(s) && std::abs(b.bytes - a.bytes) < kSameBytes && a.calls > 0) {
    why.push_back("same calls and bytes per segment; cycles per call " +
                  fixed(a.cycles / a.calls, 1) + " -> " + fixed(b.cycles / b.calls, 1) +
                  " (priced differently: another kernel's cost or another preset)");
  }
  std::string out;
  for (const std::string& w : why) {
    out += (out.empty() ? "" : "; ") + w;
  }
  return out;
}

// ---- the diff ---------------------------------------------------------------------------------

ordered_json change(double a, double b, int decimals) {
  return {{"a", round_to(a, decimals)},
          {"b", round_to(b, decimals)},
          {"change", round_to(b - a, decimals)}};
}

ordered_json host_diff(const Side& sa, const Side& sb, const HostSide& a, const HostSide& b) {
  const HostPair p{a, b, std::max(sb.segments, 1.0)};
  const double ka = a.cycles > 0 ? a.cpu / a.cycles : 0;
  const double kb = b.cycles > 0 ? b.cpu / b.cycles : 0;
  const double k = b.cycles > 0 ? kb : ka;  // CPU points per cycle/segment the parts are priced at
  const double dcpu = b.cpu - a.cpu;
  struct Moved {
    Sym sym;
    double dcycles;
    double points;
  };
  std::vector<Moved> moved;
  double symbols_points = 0;
  std::array<std::pair<double, double>, 7> groups{};  // by SymGroup: cycles, points
  for (std::size_t i = 0; i < kSymCount; ++i) {
    const auto s = static_cast<Sym>(i);
    const SymRow& ra = a.sym[i];
    const SymRow& rb = b.sym[i];
    const double dc = rb.cycles - ra.cycles;
    if (dc == 0 && !p.calls_moved(s) && std::abs(rb.bytes - ra.bytes) < kSameBytes) {
      continue;
    }
    const double points = dc * k;
    moved.push_back({s, dc, points});
    symbols_points += points;
    auto& g = groups[static_cast<std::size_t>(symbol_group(s))];
    g.first += dc;
    g.second += points;
  }
  std::stable_sort(moved.begin(), moved.end(), [](const Moved& x, const Moved& y) {
    if (std::abs(x.dcycles) != std::abs(y.dcycles)) {
      return std::abs(x.dcycles) > std::abs(y.dcycles);
    }
    return symbol_name(x.sym) < symbol_name(y.sym);
  });
  const double rate_points = dcpu - symbols_points;
  ordered_json h;
  h["cpu_util_pct"] = change(a.cpu, b.cpu, 4);
  h["service_demand_us_per_kb"] = change(a.sd, b.sd, 4);
  h["service_demand_us_per_kb"]["change_pct"] =
      a.sd > 0 ? round_to(100.0 * (b.sd - a.sd) / a.sd, 3) : 0.0;
  h["cycles_per_segment"] = change(a.cycles, b.cycles, 4);
  h["segments_per_s"] = {{"a", round_to(sa.segments_per_s(), 1)},
                         {"b", round_to(sb.segments_per_s(), 1)}};
  h["cpu_points"] = {{"symbols", round_to(symbols_points, 6)},
                     {"segment_rate", round_to(rate_points, 6)},
                     {"total", round_to(dcpu, 6)}};
  ordered_json jg = ordered_json::array();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].first != 0) {
      jg.push_back({{"group", std::string(group_name(static_cast<SymGroup>(g)))},
                    {"cycles_per_segment", round_to(groups[g].first, 4)},
                    {"cpu_points", round_to(groups[g].second, 6)}});
    }
  }
  h["groups"] = std::move(jg);
  ordered_json js = ordered_json::array();
  for (const Moved& m : moved) {
    const SymRow& ra = a.sym[index(m.sym)];
    const SymRow& rb = b.sym[index(m.sym)];
    ordered_json e;
    e["symbol"] = std::string(symbol_name(m.sym));
    e["group"] = std::string(group_name(symbol_group(m.sym)));
    e["cycles_per_segment"] = change(ra.cycles, rb.cycles, 4);
    e["cpu_points"] = round_to(m.points, 6);
    const double dtotal = b.cycles - a.cycles;
    e["share_pct"] = dtotal != 0 ? round_to(100.0 * m.dcycles / dtotal, 3) : 0.0;
    e["calls_per_segment"] = {{"a", round_to(ra.calls, 4)}, {"b", round_to(rb.calls, 4)}};
    e["bytes_per_segment"] = {{"a", round_to(ra.bytes, 3)}, {"b", round_to(rb.bytes, 3)}};
    e["why"] = explain(m.sym, p);
    js.push_back(std::move(e));
  }
  h["symbols"] = std::move(js);
  return h;
}

ordered_json side_json(const Side& s, bool scenario) {
  return {{"file", s.file},
          {"kind", scenario ? "scenario" : "result"},
          {"scenario", s.scenario},
          {"kernel", s.kernel},
          {"preset", s.preset}};
}

}  // namespace

DiffInput load_diff_input(const std::string& path) {
  const json doc = load_json_file(path, path);
  const bool result = doc.is_object() && doc.contains("segments") && doc.contains("hosts") &&
                      !doc.contains("traffic");
  DiffInput in;
  in.file = path;
  if (result) {
    // Key order matters (hosts as the run listed them): read the file again, ordered.
    std::ifstream f(path, std::ios::binary);
    std::ostringstream text;
    text << f.rdbuf();
    in.result = ordered_json::parse(text.str());
    return in;
  }
  const Scenario sc = load_scenario(path);
  in.result = result_json(sc, run_scenario(sc.spec), false);
  ordered_json merged = sc.document;
  merged["preset"] = sc.preset_path;  // both sides' presets as paths from here
  in.scenario = std::move(merged);
  return in;
}

ordered_json diff_json(const DiffInput& in_a, const DiffInput& in_b, const std::string& host) {
  const Side a = read_side(in_a);
  const Side b = read_side(in_b);
  ordered_json d;
  d["a"] = side_json(a, in_a.scenario.has_value());
  d["b"] = side_json(b, in_b.scenario.has_value());
  if (in_a.scenario && in_b.scenario) {
    d["inputs"] = inputs_diff(*in_a.scenario, *in_b.scenario);
  }
  d["throughput_mbps"] = change(a.throughput, b.throughput, 3);
  d["throughput_mbps"]["change_pct"] =
      a.throughput > 0 ? round_to(100.0 * (b.throughput - a.throughput) / a.throughput, 3) : 0.0;
  ordered_json hosts = ordered_json::object();
  std::vector<std::string> names;
  for (const HostSide& h : a.hosts) {
    if (b.host(h.name) != nullptr && (host.empty() || h.name == host)) {
      names.push_back(h.name);
    }
  }
  if (!host.empty() && names.empty()) {
    throw InputError(
        "--host", "",
        "expected a host of both " + a.file + " and " + b.file + ", got \"" + host + "\"");
  }
  for (const std::string& n : names) {
    hosts[n] = host_diff(a, b, *a.host(n), *b.host(n));
  }
  d["hosts"] = std::move(hosts);
  return d;
}

void print_diff_text(std::ostream& out, const ordered_json& d) {
  auto side = [&](const char* label, const ordered_json& s) {
    out << "  " << label << ": " << s.at("file").get<std::string>() << " ("
        << s.at("scenario").get<std::string>() << ", kernel " << s.at("kernel").get<std::string>()
        << ", preset " << s.at("preset").get<std::string>() << ")\n";
  };
  out << "skbsim diff, B against A\n";
  side("A", d.at("a"));
  side("B", d.at("b"));
  if (d.contains("inputs")) {
    out << "\nInputs that differ (merged scenarios; name, description and reference left out):\n";
    if (d.at("inputs").empty()) {
      out << "  none\n";
    }
    for (const ordered_json& e : d.at("inputs")) {
      out << "  " << e.at("path").get<std::string>() << ": "
          << (e.contains("a") ? e.at("a").dump() : "absent") << " -> "
          << (e.contains("b") ? e.at("b").dump() : "absent") << "\n";
    }
  }
  const ordered_json& t = d.at("throughput_mbps");
  out << "\nThroughput: " << fixed(t.at("a").get<double>(), 2) << " -> "
      << fixed(t.at("b").get<double>(), 2) << " 10^6bits/s ("
      << signed_fixed(t.at("change_pct").get<double>(), 2) << "%)\n";
  for (auto it = d.at("hosts").begin(); it != d.at("hosts").end(); ++it) {
    const ordered_json& h = it.value();
    const ordered_json& cpu = h.at("cpu_util_pct");
    const ordered_json& sd = h.at("service_demand_us_per_kb");
    const ordered_json& cyc = h.at("cycles_per_segment");
    const ordered_json& pts = h.at("cpu_points");
    const double rate_a = h.at("segments_per_s").at("a").get<double>();
    const double rate_b = h.at("segments_per_s").at("b").get<double>();
    out << "\nHost " << it.key() << ": CPU " << fixed(cpu.at("a").get<double>(), 2) << "% -> "
        << fixed(cpu.at("b").get<double>(), 2) << "% ("
        << signed_fixed(cpu.at("change").get<double>(), 2) << " points); service demand "
        << fixed(sd.at("a").get<double>(), 3) << " -> " << fixed(sd.at("b").get<double>(), 3)
        << " us/KB (" << signed_fixed(sd.at("change_pct").get<double>(), 1) << "%)\n";
    out << "  cycles per data segment " << fixed(cyc.at("a").get<double>(), 2) << " -> "
        << fixed(cyc.at("b").get<double>(), 2) << " ("
        << signed_fixed(cyc.at("change").get<double>(), 2) << "); data segments/s "
        << fixed(rate_a, 0) << " -> " << fixed(rate_b, 0) << " (" << pct_change(rate_a, rate_b)
        << ")\n\n";
    // "Of the -4.94 points: pskb_expand_head -4.94, ...": the largest parts first.
    std::vector<std::pair<double, std::string>> parts;
    for (const ordered_json& sym : h.at("symbols")) {
      parts.emplace_back(sym.at("cpu_points").get<double>(), sym.at("symbol").get<std::string>());
    }
    parts.emplace_back(pts.at("segment_rate").get<double>(), "segment rate");
    std::stable_sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) {
      return std::abs(x.first) > std::abs(y.first);
    });
    out << "  of the " << signed_fixed(pts.at("total").get<double>(), 3) << " CPU points:";
    double rest = pts.at("total").get<double>();
    for (std::size_t i = 0; i < parts.size() && i < 5; ++i) {
      out << (i == 0 ? " " : ", ") << parts[i].second << " " << signed_fixed(parts[i].first, 3);
      rest -= parts[i].first;
    }
    if (parts.size() > 5) {
      out << ", " << parts.size() - 5 << " more " << signed_fixed(rest, 3);
    }
    out << "\n\n";
    out << "   cycles/seg  CPU points    share  calls/seg A -> B     bytes/seg A -> B      "
           "symbol\n";
    std::size_t hidden = 0;
    double hidden_cycles = 0;
    double hidden_points = 0;
    for (const ordered_json& sym : h.at("symbols")) {
      const double dc = sym.at("cycles_per_segment").at("change").get<double>();
      if (std::abs(dc) < kShownCycles) {
        ++hidden;
        hidden_cycles += dc;
        hidden_points += sym.at("cpu_points").get<double>();
        continue;
      }
      const ordered_json& calls = sym.at("calls_per_segment");
      const ordered_json& bytes = sym.at("bytes_per_segment");
      const std::string c =
          fixed(calls.at("a").get<double>(), 4) + " -> " + fixed(calls.at("b").get<double>(), 4);
      const std::string by =
          fixed(bytes.at("a").get<double>(), 1) + " -> " + fixed(bytes.at("b").get<double>(), 1);
      out << std::setw(13) << signed_fixed(dc, 2) << std::setw(12)
          << signed_fixed(sym.at("cpu_points").get<double>(), 3) << std::setw(8)
          << fixed(sym.at("share_pct").get<double>(), 1) << "%  " << std::left << std::setw(21) << c
          << std::setw(22) << by << std::right << sym.at("symbol").get<std::string>() << "\n";
      out << "               why: " << sym.at("why").get<std::string>() << "\n";
    }
    if (hidden > 0) {
      out << std::setw(13) << signed_fixed(hidden_cycles, 4) << std::setw(12)
          << signed_fixed(hidden_points, 4) << "           " << hidden
          << " more symbols, each under " << kShownCycles
          << " cycles/seg (every one with its why in --format json)\n";
    }
    out << std::setw(25) << signed_fixed(pts.at("segment_rate").get<double>(), 3)
        << "           segment rate " << pct_change(rate_a, rate_b)
        << ": A's cycles per segment at B's segment rate\n";
    out << std::setw(13) << signed_fixed(cyc.at("change").get<double>(), 2) << std::setw(12)
        << signed_fixed(pts.at("total").get<double>(), 3) << "   100.0%  total (symbols "
        << signed_fixed(pts.at("symbols").get<double>(), 3) << " + segment rate "
        << signed_fixed(pts.at("segment_rate").get<double>(), 3) << " CPU points)\n";
    out << "\n  by symbol group:   cycles/seg  CPU points\n";
    for (const ordered_json& g : h.at("groups")) {
      out << "    " << std::left << std::setw(14) << g.at("group").get<std::string>() << std::right
          << std::setw(12) << signed_fixed(g.at("cycles_per_segment").get<double>(), 2)
          << std::setw(12) << signed_fixed(g.at("cpu_points").get<double>(), 3) << "\n";
    }
  }
}

int run_diff(const std::vector<std::string>& args) {
  const std::string usage = "skbsim diff A.json B.json [--format text|json] [--host NAME]";
  po::options_description visible("Options");
  visible.add_options()("help,h", "print this help")(
      "format,f", po::value<std::string>()->default_value("text"), "text or json")(
      "host", po::value<std::string>(), "only this host (default: every host of both)");
  po::options_description all;
  all.add(visible).add_options()("files", po::value<std::vector<std::string>>());
  po::positional_options_description pos;
  pos.add("files", 2);
  po::variables_map vm;
  if (!parse_args(args, visible, all, pos, vm, usage)) {
    return kExitUsage;
  }
  if (vm.count("help") != 0) {
    std::cout
        << "Usage: " << usage
        << "\n\nCompares B with A: two scenarios (both are run) or two results files from\n"
           "`skbsim run --format json`. Prints the inputs that differ (scenarios), the change\n"
           "in throughput, and per host the change in CPU utilisation and service demand, and\n"
           "where it comes from: each kernel symbol's change in cycles per data segment, sorted\n"
           "by size, with its share of the CPU change in points. The symbols' parts plus one\n"
           "for the change of segment rate add up exactly to the CPU change. Every symbol that\n"
           "moved gets a 'why' from the data: its calls and bytes per segment, the callers the\n"
           "kernel source gives it, the allocation a free mirrors. See docs/whatif.md.\n\n"
        << visible;
    return 0;
  }
  const std::string format = vm["format"].as<std::string>();
  const auto files = vm.count("files") != 0 ? vm["files"].as<std::vector<std::string>>()
                                            : std::vector<std::string>{};
  if (files.size() != 2 || (format != "text" && format != "json")) {
    std::cerr << "skbsim diff: expected A.json B.json and --format text|json\n\nUsage: " << usage
              << "\n";
    return kExitUsage;
  }
  try {
    // The two sides are independent: B loads (and runs) on a second thread.
    DiffInput a;
    DiffInput b;
    std::exception_ptr b_error;
    {
      std::jthread other([&] {
        try {
          b = load_diff_input(files[1]);
        } catch (...) {
          b_error = std::current_exception();
        }
      });
      a = load_diff_input(files[0]);
    }
    if (b_error) {
      std::rethrow_exception(b_error);
    }
    const ordered_json d =
        diff_json(a, b, vm.count("host") != 0 ? vm["host"].as<std::string>() : "");
    if (format == "json") {
      std::cout << d.dump(2) << "\n";
    } else {
      print_diff_text(std::cout, d);
    }
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitUsage;
  } catch (const SkbBug& e) {
    std::cerr << "skbsim diff: the model hit a kernel BUG condition: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace skbsim::sim
