// commands.cpp — `skbsim run`, `skbsim validate`, `skbsim calibrate`.

#include "sim/commands.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "sim/calibrate.hpp"
#include "sim/cli_args.hpp"
#include "sim/input_error.hpp"
#include "sim/kernel_groups.hpp"
#include "sim/measure_net.hpp"
#include "sim/measure_report.hpp"
#include "sim/output_dir.hpp"
#include "sim/plot.hpp"
#include "sim/report.hpp"
#include "sim/scenario.hpp"
#include "skbsim/bug.hpp"

#include <unistd.h>

namespace skbsim::sim {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;
constexpr int kExitUsage = 2;


std::string fixed(double v, int d) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(d) << v;
  return s.str();
}

bool stderr_is_terminal() { return isatty(STDERR_FILENO) != 0; }

struct Check {
  std::string scenario;
  std::string figure;
  std::string measured;
  std::string predicted;
  std::string error;
  bool ok;
  std::string note = {};  // context beside the verdict, which it does not change
  // The number the row judged (a count, a figure, a rank): `validate --runs` keeps, of each row
  // its runs gave, the one in the middle by it. NaN: nothing to order by.
  double value = std::numeric_limits<double>::quiet_NaN();
};

// Profile expectations of a reference: symbols among the top N of the host, symbols absent.
void profile_checks(const Scenario& sc, const RunResult& r, std::vector<Check>& out) {
  const Reference& ref = *sc.reference;
  const HostResult* h = local_host(sc, r);
  if (h == nullptr) {
    return;
  }
  std::vector<std::pair<std::int64_t, std::string>> rows;
  for (std::size_t i = 0; i < kSymCount; ++i) {
    if (h->cells[i].calls > 0) {
      rows.emplace_back(h->cells[i].cost_ps, std::string(symbol_name(static_cast<Sym>(i))));
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (const std::string& want : ref.profile_top) {
    std::size_t rank = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].second == want) {
        rank = i + 1;
      }
    }
    out.push_back({sc.name, "profile rank " + want, "top " + std::to_string(ref.profile_top_n),
                   rank == 0 ? "absent" : "#" + std::to_string(rank), "",
                   rank != 0 && rank <= ref.profile_top_n});
    out.back().value = rank == 0 ? static_cast<double>(rows.size() + 1) : static_cast<double>(rank);
  }
  for (const std::string& gone : ref.profile_absent) {
    bool present = false;
    for (const auto& row : rows) {
      present = present || row.second == gone;
    }
    out.push_back({sc.name, "profile " + gone, "absent", present ? "present" : "absent", "",
                   !present});
    out.back().value = present ? 1 : 0;
  }
}

}  // namespace

std::vector<std::string> scenario_files(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    if (!fs::is_directory(p)) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    for (auto it = fs::recursive_directory_iterator(p); it != fs::recursive_directory_iterator();
         ++it) {
      const std::string leaf = it->path().filename().string();
      if (it->is_directory() &&
          (leaf == "shared" || leaf == "models" || leaf == "ops" || leaf == "studies" ||
           leaf == "measurements")) {
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file() && it->path().extension() == ".json") {
        found.push_back(it->path().string());
      }
    }
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

namespace {

// `p` as written but with its directory resolved (symlinks, "..", relative): the place a file or
// directory at `p` would take. A link at `p` itself stays a link, as write_atomically replaces it.
fs::path place_of(const fs::path& p) {
  const fs::path named = p.has_filename() ? p : p.parent_path();  // "res/" is "res"
  std::error_code ec;
  const fs::path abs = fs::absolute(named, ec);
  const fs::path dir = fs::weakly_canonical(abs.parent_path(), ec);
  return (ec ? abs.parent_path().lexically_normal() : dir) / abs.filename();
}

// Why --timeline FILE cannot be written beside --out DIR (empty: it can): FILE is DIR, lies inside
// it (replaced whole), holds it, or is one of the names write_atomically builds beside it.
std::string timeline_clash(const fs::path& file, const fs::path& dir) {
  const fs::path f = place_of(file);
  const fs::path d = place_of(dir);
  const auto within = [](const fs::path& inner, const fs::path& outer) {
    return std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end()).first ==
           outer.end();
  };
  if (f == d) {
    return "the --out directory itself";
  }
  if (within(f, d)) {
    return "a file inside the --out directory, which is replaced whole";
  }
  if (within(d, f)) {
    return "a directory that holds the --out directory";
  }
  if (f == fs::path(d.string() + ".partial") || f == fs::path(d.string() + ".old")) {
    return "a name --out uses beside its directory while it writes";
  }
  return "";
}

}  // namespace

int run_run(const std::vector<std::string>& args) {
  const std::string usage =
      "skbsim run SCENARIO.json [--out DIR] [--format text|json] [--trace N] [--profile]\n"
      "           [--timeline FILE]";
  po::options_description visible("Options");
  visible.add_options()("help,h", "print this help")(
      "out,o", po::value<std::string>(), "also write DIR/result.json and DIR/result.txt")(
      "format,f", po::value<std::string>()->default_value("text"),
      "stdout: text (netperf's layout) or json (docs/results.md)")(
      "trace,t", po::value<std::uint32_t>(), "follow data segment N hop by hop")(
      "profile,p", "print a perf-report-like profile per host")(
      "timeline", po::value<std::string>(),
      "write the TCP sockets' events in the measured window to FILE (tab-separated: sends, "
      "transmits, arrivals, wake-ups, reads, ACKs; docs/results.md)");
  po::options_description all;
  all.add(visible).add_options()("scenario", po::value<std::string>());
  po::positional_options_description pos;
  pos.add("scenario", 1);
  po::variables_map vm;
  if (!parse_args(args, visible, all, pos, vm, usage)) {
    return kExitUsage;
  }
  if (vm.count("help") != 0) {
    std::cout << "Usage: " << usage
              << "\n\nRuns one scenario and prints what the kernel would spend, in netperf's own\n"
                 "layout, next to the measured reference and the error in percent.\n\n"
              << visible;
    return 0;
  }
  const std::string format = vm["format"].as<std::string>();
  if (vm.count("scenario") == 0 || (format != "text" && format != "json")) {
    std::cerr << "skbsim run: expected SCENARIO.json and --format text|json\n\nUsage: " << usage
              << "\n";
    return kExitUsage;
  }
  try {
    Scenario sc = load_scenario(vm["scenario"].as<std::string>());
    const bool trace = vm.count("trace") != 0;
    if (trace) {
      sc.spec.trace_segment = vm["trace"].as<std::uint32_t>();
    }
    sc.spec.timeline = vm.count("timeline") != 0;
    const std::optional<fs::path> timeline =
        sc.spec.timeline ? std::optional<fs::path>(vm["timeline"].as<std::string>()) : std::nullopt;
    // Checked before the run, so that both outputs are written or neither.
    if (timeline) {
      std::error_code ec;
      if (!timeline->has_filename()) {
        throw InputError("--timeline", "",
                         "expected a file name, got '" + timeline->string() + "'");
      }
      if (fs::is_directory(*timeline, ec)) {
        throw InputError(timeline->string(), "", "expected a file, got a directory");
      }
      if (vm.count("out") != 0) {
        if (const std::string why = timeline_clash(*timeline, vm["out"].as<std::string>());
            !why.empty()) {
          throw InputError(timeline->string(), "",
                           "expected a file apart from the --out directory, got " + why);
        }
      }
    }
    const RunResult r = run_scenario(sc.spec);
    ReportOptions o;
    o.profile = vm.count("profile") != 0;
    o.trace = trace;
    std::ostringstream text;
    print_text(text, sc, r, o);
    const std::string json = result_json(sc, r, trace).dump(2) + "\n";
    // The timeline waits beside its place (FILE.partial) until --out is in; then it moves in.
    if (timeline) {
      stage_file(*timeline, timeline_tsv(r));
    }
    if (vm.count("out") != 0) {
      try {
        write_atomically(vm["out"].as<std::string>(),
                         {{"result.json", json}, {"result.txt", text.str()}});
      } catch (const InputError&) {
        if (timeline) {
          drop_staged(*timeline);
        }
        throw;
      }
    }
    if (timeline) {
      try {
        commit_staged(*timeline);
      } catch (const InputError& e) {
        if (vm.count("out") == 0) {
          throw;
        }
        throw InputError(e.file(), e.pointer(), e.message() + " (--out was written)");
      }
    }
    std::cout << (format == "json" ? json : text.str()) << std::flush;
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitUsage;
  } catch (const SkbBug& e) {
    std::cerr << "skbsim run: the model hit a kernel BUG condition: " << e.what() << "\n";
    return 1;
  } catch (const fs::filesystem_error& e) {
    std::cerr << "skbsim run: " << e.what() << "\n";
    return kExitUsage;
  }
  return 0;
}

namespace {

// reference.per_segment: the tracepoint counts the model has a counter for, per wire segment on
// the reference host, within the block's tolerance; a count under one per hundred segments is
// compared absolutely (the error column shows the difference, not a percentage), within one per
// five hundred segments, since a relative error of a near-zero count says nothing.
// One figure, model against the kernel: relatively within the tolerance, or, for a value too small
// for a percentage to mean anything, absolutely within `abs_tolerance` (a count: 0.002 per
// segment).
Check count_check(const std::string& scenario, const std::string& figure, double measured,
                  double predicted, double tolerance_pct, bool relative, int decimals,
                  double abs_tolerance = 0.002) {
  const double diff = predicted - measured;
  const bool ok =
      measure::count_within(measured, predicted, tolerance_pct, relative, abs_tolerance);
  const std::string error =
      relative ? (diff >= 0 ? "+" : "") +
                     (measured > 0 ? fixed(100.0 * diff / measured, 1) + "%" : "inf")
               : (diff >= 0 ? " +" : " ") + fixed(diff, decimals);
  Check c{scenario, figure, fixed(measured, decimals), fixed(predicted, decimals), error, ok};
  c.value = predicted;
  return c;
}

// The measurement file `skbsim measure` wrote beside a measured scenario
// (DIR/measurements/<the scenario's file name>), when there is one and it parses.
std::optional<nlohmann::json> measurement_file(const Scenario& sc) {
  const fs::path file(sc.file);
  std::ifstream in(file.parent_path() / "measurements" / file.filename());
  if (!in) {
    return std::nullopt;
  }
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // not a measurement file: no context, the checks stand alone
  }
}

// The number at `at` in a JSON document, when it is one.
std::optional<double> number_at(const nlohmann::json& doc, const nlohmann::json::json_pointer& at) {
  // contains() is false where a step is missing or not an object
  if (!doc.contains(at) || !doc.at(at).is_number()) {
    return std::nullopt;
  }
  return doc.at(at).get<double>();
}

// A count per segment the client sent, from a run record's tcp block: `counter` a pointer into it.
std::optional<double> per_client_segment(const nlohmann::json& run, const std::string& counter) {
  const auto n = number_at(run, nlohmann::json::json_pointer("/tcp" + counter));
  const auto segs = number_at(run, nlohmann::json::json_pointer("/tcp/client_out_segs"));
  if (!n || !segs || *segs <= 0) {
    return std::nullopt;
  }
  return *n / *segs;
}

using Range = std::optional<std::pair<double, double>>;

// The middle value; of an even count the lower middle (a value some run gave, not a mean). v is
// not empty.
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

// The untraced runs' records (the measurement's /runs); none when it has no such array.
const nlohmann::json& untraced_runs(const nlohmann::json& m) {
  static const nlohmann::json::json_pointer kRuns("/runs");
  static const nlohmann::json kNone = nlohmann::json::array();
  return m.contains(kRuns) && m.at(kRuns).is_array() ? m.at(kRuns) : kNone;
}

// `of` of each untraced run (the measurement's /runs), in their order, the runs it says nothing
// of (nullopt) left out.
template <class Of>
std::vector<double> untraced_values(const nlohmann::json& m, const Of& of) {
  std::vector<double> values;
  for (const nlohmann::json& run : untraced_runs(m)) {
    if (const std::optional<double> v = of(run)) {
      values.push_back(*v);
    }
  }
  return values;
}

// The min..max over the untraced runs of `counter` per client segment, the runs without it left
// out (a run without both counts says nothing).
Range untraced_range(const nlohmann::json& m, const std::string& counter) {
  const std::vector<double> v = untraced_values(
      m, [&counter](const nlohmann::json& run) { return per_client_segment(run, counter); });
  if (v.empty()) {
    return std::nullopt;
  }
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return std::pair{*lo, *hi};
}

// The kernel's own spread of the ACKs per segment: each untraced run's server TcpOutSegs over the
// client's, min..max. The ACK rate of a run depends on when its reader ran (docs/measure.md,
// "One ACK per write, or two"), and every count of the reverse direction in
// reference.per_segment is scaled to the runs' median.
Range ack_rate_runs(const nlohmann::json& m) {
  return untraced_range(m, "/server_out_segs");
}

// Of the untraced runs with an ACK rate that recorded the server's TcpExt PruneCalled, how many
// had it above zero: {pruned, recorded}, nullopt when none recorded it (sets measured before it
// was). A run whose receive queue's memory reached sk_rcvbuf went through tcp_prune_queue, whose
// tcp_clamp_window raised sk_rcvbuf and left window_clamp under the buffer's space; while that
// lasts its softirq ACKs every few segments (docs/measure.md, "ACKs after the queue outgrew its
// buffer").
std::optional<std::pair<int, int>> pruned_runs(const nlohmann::json& m) {
  static const nlohmann::json::json_pointer kPrune("/tcp/server_tcpext/PruneCalled");
  int pruned = 0;
  int recorded = 0;
  for (const nlohmann::json& run : untraced_runs(m)) {
    const auto n = number_at(run, kPrune);
    if (n && per_client_segment(run, "/server_out_segs")) {  // the runs the spread is of
      ++recorded;
      pruned += *n > 0 ? 1 : 0;
    }
  }
  if (recorded == 0) {
    return std::nullopt;
  }
  return std::pair{pruned, recorded};
}

// The per-segment counts come from the traced run. At a fixed rate the probes' own cost can
// keep its sender from the rate; behind, it writes back to back and tcp_push can autocork a
// write's sub-size-goal tail while earlier skbs are still in flight (tcp_should_autocork), so
// the next write fills it: fewer lone tails, fewer clones for ip_forward's skb_cow to copy
// (docs/measure.md, "A traced run that fell behind"). Says so when the traced run that counted
// the allocations (the second, "allocations_run", in sets measured since 2026-12-07; before,
// the one traced run) fell more than 5 % short, with TCPAutoCorking per thousand segments in
// that run and in the untraced ones: whether it corked is for the reader to see, falling behind
// alone need not.
std::optional<std::string> traced_run_behind(const nlohmann::json& m) {
  static const nlohmann::json::json_pointer kRate("/configuration/rate_mbps");
  static const nlohmann::json::json_pointer kAllocRun("/trace/allocations_run");
  static const nlohmann::json::json_pointer kRun("/trace/run");
  static const nlohmann::json::json_pointer kThroughput("/throughput_mbps");
  const auto rate = number_at(m, kRate);
  const bool split = m.contains(kAllocRun);
  const nlohmann::json::json_pointer& at = split ? kAllocRun : kRun;
  if (!rate || *rate <= 0 || !m.contains(at) || !m.at(at).is_object()) {
    return std::nullopt;
  }
  const nlohmann::json& traced = m.at(at);
  const auto got = number_at(traced, kThroughput);
  if (!got || *got >= 0.95 * *rate) {
    return std::nullopt;
  }
  std::string note = std::string(split ? "allocations' traced run" : "traced run") + " at " +
                     fixed(*got, 0) + " of " + fixed(*rate, 0) + " Mbit/s";
  static const std::string kCorked = "/client_tcpext/TCPAutoCorking";
  const auto corked = per_client_segment(traced, kCorked);
  if (!corked) {
    return note;
  }
  note += ", TCPAutoCorking " + fixed(*corked * 1000, 1) + " per 1000 segments";
  if (const Range runs = untraced_range(m, kCorked)) {
    note += " (untraced runs " + fixed(runs->first * 1000, 1) + ".." +
            fixed(runs->second * 1000, 1) + ")";
  }
  return note;
}

// The skbs merged into a queue's tail per segment (tcp_try_coalesce: TCPRcvCoalesce;
// tcp_add_backlog: TCPBacklogCoalesce), the kernel's from the untraced runs' TcpExt (the
// measurement's summary.tcpext, per client segment, over the runs that recorded it), the model's
// from its sockets (CoalesceStats). In a stream the server merges the data and the client the
// pure ACKs. Where an skb is merged says where the reader was when it arrived: into the backlog
// only while the application held the socket, into the receive queue behind a tail the reader
// had not read (from the softirq with the socket free, or from the backlog in the owner's
// release_sock); and only into a tail no clone shares (skb_try_coalesce: `if (skb_cloned(to))
// return false`), so with the defaults where ip_forward's skb_cow copied, and elsewhere hardly
// ever (a clone whose original an ACK has freed).
struct CoalesceCounter {
  const char* side;     // the namespace: "server" or "client"
  const char* counter;  // its TcpExt counter
  std::uint64_t CoalesceStats::*model;
};
constexpr std::array<CoalesceCounter, 3> kCoalesceCounters = {{
    {"server", "TCPRcvCoalesce", &CoalesceStats::receive_queue},
    {"server", "TCPBacklogCoalesce", &CoalesceStats::backlog_data},
    {"client", "TCPBacklogCoalesce", &CoalesceStats::backlog_acks},
}};

void coalesce_checks(const Scenario& sc, const RunResult& r, const nlohmann::json& m,
                     double tolerance_pct, std::vector<Check>& checks) {
  if (r.type != TrafficType::kTcpStream || r.segments == 0) {
    return;
  }
  const double segs = static_cast<double>(r.segments);
  for (const CoalesceCounter& c : kCoalesceCounters) {
    const std::string at = std::string("/summary/tcpext/") + c.side + "/per_segment/" + c.counter;
    const auto median = number_at(m, nlohmann::json::json_pointer(at + "/median"));
    const auto lo = number_at(m, nlohmann::json::json_pointer(at + "/min"));
    const auto hi = number_at(m, nlohmann::json::json_pointer(at + "/max"));
    if (!median || !lo || !hi) {
      continue;  // a set measured before the counter was recorded
    }
    const double predicted = static_cast<double>(r.coalesced.*c.model) / segs;
    if (*hi < 0.0005 && predicted < 0.0005) {
      continue;  // neither merges: the row would say nothing
    }
    checks.push_back(count_check(sc.name, std::string("per segment ") + c.side + " " + c.counter,
                                 *median, predicted, tolerance_pct, *median >= 0.01, 4));
    checks.back().note = "kernel runs " + fixed(*lo, 4) + ".." + fixed(*hi, 4);
  }
}

// The data skbs the server merged into another per client segment in one run record: into the
// receive queue's tail and into the backlog's (TCPRcvCoalesce + TCPBacklogCoalesce).
std::optional<double> server_merges(const nlohmann::json& run) {
  const auto rq = per_client_segment(run, "/server_tcpext/TCPRcvCoalesce");
  const auto backlog = per_client_segment(run, "/server_tcpext/TCPBacklogCoalesce");
  if (!rq || !backlog) {
    return std::nullopt;
  }
  return *rq + *backlog;
}

// The traced run's merges against the untraced runs' (the median run, the lower middle of an
// even count; summary.tcpext's medians are the mean of the middle two): an skb merged into
// another, in the receive queue or the backlog, is read and freed with it (kfree_skb_partial,
// no consume_skb), so a traced run that merged fewer counts more skb_copy_datagram_iovec and
// consume_skb calls than the untraced runs made. The probes can move the reader against the
// softirq that far (forward with the defaults at 1000 Mbit/s on kvm-2core-v1252: 0.0014 merged
// traced, 0.0204 untraced). Said beside those two rows when the two differ by more than a tenth
// and by at least one skb in a thousand segments.
std::optional<std::string> traced_run_merges(const nlohmann::json& m) {
  static const nlohmann::json::json_pointer kRun("/trace/run");
  if (!m.contains(kRun) || !m.at(kRun).is_object()) {
    return std::nullopt;
  }
  const auto traced = server_merges(m.at(kRun));
  std::vector<double> runs = untraced_values(m, server_merges);
  if (!traced || runs.empty()) {
    return std::nullopt;
  }
  const double untraced = median_of(std::move(runs));
  const double diff = std::abs(*traced - untraced);
  if (diff < 0.001 || diff <= 0.1 * untraced) {
    return std::nullopt;
  }
  return "server merged " + fixed(*traced, 4) +
         " skbs a segment into another (TCPRcvCoalesce + TCPBacklogCoalesce) in the traced run, " +
         fixed(untraced, 4) + " in the median untraced run";
}

void per_segment_checks(const Scenario& sc, const RunResult& r, std::vector<Check>& checks) {
  const Reference& ref = *sc.reference;
  const HostResult* h = local_host(sc, r);
  if (!ref.per_segment || h == nullptr || r.segments == 0) {
    return;
  }
  const PerSegmentReference& ps = *ref.per_segment;
  const double segs = static_cast<double>(r.segments);
  const auto measurement = measurement_file(sc);
  const auto behind = measurement ? traced_run_behind(*measurement) : std::nullopt;
  const auto merges = measurement ? traced_run_merges(*measurement) : std::nullopt;
  for (const std::string_view k : measure::kValidatedCounters) {
    const std::string key(k);
    auto it = ps.counters.find(key);
    const auto count = predicted_counter(r, *h, key);
    if (it == ps.counters.end() || !count) {
      continue;
    }
    const double measured = it->second;
    checks.push_back(count_check(sc.name, "per segment " + key, measured, *count, ps.tolerance_pct,
                                 measure::count_relative(key, measured), 4));
    if (key == "tcp_acks_sent" && measurement) {
      if (const auto runs = ack_rate_runs(*measurement)) {
        checks.back().note = "kernel runs " + fixed(runs->first, 4) + ".." + fixed(runs->second, 4);
        if (const auto pruned = pruned_runs(*measurement)) {
          checks.back().note += ", receive queue pruned in " + std::to_string(pruned->first) +
                                " of " + std::to_string(pruned->second);
        }
      }
    }
    if (key == "pskb_expand_head_calls" && behind) {
      checks.back().note = *behind;
    }
    if ((key == "consume_skb_calls" || key == "skb_copy_datagram_iovec_calls") && merges) {
      checks.back().note = *merges;
    }
  }
  if (measurement) {
    coalesce_checks(sc, r, *measurement, ps.tolerance_pct, checks);
  }
  // Per device: the skbs crossing it per segment, by ip_summed, GSO or not, and their linear
  // length; negligible counts (measure::device_count_over) are not shown.
  for (const auto& [dev, measured_counts] : ps.devices) {
    const auto it = std::find_if(h->devices.begin(), h->devices.end(),
                                 [&dev](const auto& d) { return d.first == dev; });
    if (it == h->devices.end()) {
      continue;
    }
    const auto model = device_per_segment(it->second, segs);
    for (const std::string_view k : measure::kValidatedDeviceCounts) {
      const std::string key(k);
      const auto m = measured_counts.find(key);
      const auto p = model.find(key);
      if (m == measured_counts.end() || p == model.end()) {
        continue;
      }
      const std::string over = measure::device_count_over(key);
      const auto negligible = [&over](const std::map<std::string, double>& counts) {
        const auto c = counts.find(over);
        return c == counts.end() || c->second < measure::kNegligibleDeviceCount;
      };
      if (negligible(measured_counts) && negligible(model)) {
        continue;
      }
      const double measured = m->second;
      const double predicted = p->second;
      const bool per_skb = over != key;
      checks.push_back(count_check(sc.name, dev + " " + key, measured, predicted, ps.tolerance_pct,
                                   measure::count_relative(key, measured), per_skb ? 0 : 4));
    }
  }
}

// reference.profile_groups: the model's µs/KB in each kernel-profile group it has symbols in,
// against the kernel profile's, within the block's tolerance; a group under 0.02 us/KB (a few
// dozen samples in a traced run) is compared absolutely, within 0.01 us/KB. The groups the model
// has no symbol in (time it does not model: irqs-off stretches, lock spinning, ...) are listed in
// one row, unjudged.
void profile_group_checks(const Scenario& sc, const RunResult& r, std::vector<Check>& checks) {
  const Reference& ref = *sc.reference;
  const HostResult* h = local_host(sc, r);
  if (!ref.profile_groups || h == nullptr) {
    return;
  }
  const auto model = group_us_per_kb(*h);
  double unmodelled = 0;
  for (const auto& [group, measured] : ref.profile_groups->us_per_kb) {
    if (!model_has_group(group)) {
      unmodelled += measured;
      continue;
    }
    const auto it = model.find(group);
    const double predicted = it == model.end() ? 0.0 : it->second;
    checks.push_back(count_check(sc.name, "profile us/KB " + group, measured, predicted,
                                 ref.profile_groups->tolerance_pct,
                                 measured >= kProfileGroupRelativeFloorUsPerKb, 3, 0.01));
  }
  if (unmodelled > 0) {
    checks.push_back({sc.name, "profile us/KB not modelled", fixed(unmodelled, 3), "-", "", true});
  }
}

// Issue 5's point 2 in validate's own rows: for each measured `forward` or `bridge` scenario,
// named <set>-<topology>-<variant>-<rate> by `skbsim measure` (Configuration::name), whose
// <set>-direct-<variant>-<rate> ran in the same invocation, the ratio of the two service
// demands, the model's against the kernel's, within kRatioTolerancePct (what the model predicts
// of a topology, free of the cost it shares with `direct`).
constexpr double kRatioTolerancePct = 15.0;

struct Demand {
  double measured = 0;
  double predicted = 0;
};

void ratio_checks(const std::map<std::string, Demand>& demand, std::vector<Check>& checks) {
  for (const auto& [name, routed] : demand) {
    for (const measure::Topology t : {measure::Topology::kForward, measure::Topology::kBridge}) {
      const std::string topology = "-" + std::string(measure::topology_name(t)) + "-";
      const std::size_t at = name.rfind(topology);
      if (at == std::string::npos) {
        continue;
      }
      const std::string direct = name.substr(0, at) + "-" +
                                 std::string(measure::topology_name(measure::Topology::kDirect)) +
                                 "-" + name.substr(at + topology.size());
      const auto d = demand.find(direct);
      if (d == demand.end() || d->second.measured <= 0 || d->second.predicted <= 0) {
        continue;
      }
      checks.push_back(
          count_check(name, "service demand / direct's", routed.measured / d->second.measured,
                      routed.predicted / d->second.predicted, kRatioTolerancePct, true, 3));
    }
  }
}

// One run of a scenario that has a reference: its rows, and in `demand` its service demands for
// ratio_checks when the reference has one.
std::vector<Check> scenario_rows(const Scenario& sc, const RunResult& r,
                                 std::optional<Demand>& demand) {
  std::vector<Check> checks;
  const Reference& ref = *sc.reference;
  const auto err = error_pct(r, ref);
  const HostResult* local = local_host(sc, r);
  const HostResult* remote = remote_host(sc, r);
  for (const ReferenceFigure& f : ref.figures()) {
    const std::optional<double> predicted = predicted_figure(r, local, remote, f.key);
    if (!predicted || !err.contains(f.key)) {
      continue;
    }
    const double e = err[f.key].get<double>();
    if (f.key == "service_demand_us_per_kb") {
      demand = Demand{f.value, *predicted};
    }
    checks.push_back({sc.name, f.key, fixed(f.value, 2), fixed(*predicted, 2),
                      (e >= 0 ? "+" : "") + fixed(e, 1) + "%", std::abs(e) <= ref.tolerance_pct});
    checks.back().value = *predicted;
  }
  profile_checks(sc, r, checks);
  per_segment_checks(sc, r, checks);
  profile_group_checks(sc, r, checks);
  return checks;
}

// validate --runs: of the rows one scenario's runs gave for each figure, the run's own row whose
// value is the median (the lower middle where a figure was left out of some runs, so that an even
// number remain), its error and verdict with it. A row the kernel's runs gave a range for (its note
// "kernel runs a..b") also gets the range the model's runs spanned.
std::vector<Check> median_rows(const std::vector<std::vector<Check>>& runs) {
  if (runs.size() == 1) {
    return runs.front();
  }
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Check*>> by_figure;
  for (const std::vector<Check>& run : runs) {
    for (const Check& c : run) {
      std::vector<const Check*>& rows = by_figure[c.figure];
      if (rows.empty()) {
        order.push_back(c.figure);
      }
      rows.push_back(&c);
    }
  }
  std::vector<Check> out;
  for (const std::string& figure : order) {
    std::vector<const Check*>& rows = by_figure[figure];
    if (std::any_of(rows.begin(), rows.end(),
                    [](const Check* c) { return std::isnan(c->value); })) {
      out.push_back(*rows.front());  // nothing to order by: the first run's
      continue;
    }
    std::stable_sort(rows.begin(), rows.end(),
                     [](const Check* a, const Check* b) { return a->value < b->value; });
    Check mid = *rows[(rows.size() - 1) / 2];
    if (mid.note.starts_with("kernel runs")) {
      mid.note +=
          ", model runs " + fixed(rows.front()->value, 4) + ".." + fixed(rows.back()->value, 4);
    }
    out.push_back(std::move(mid));
  }
  return out;
}

}  // namespace

int run_validate(const std::vector<std::string>& args) {
  const std::string usage = "skbsim validate [SCENARIO|DIR]... [--seed N] [--runs N] [--plot DIR]";
  po::options_description visible("Options");
  visible.add_options()("help,h", "print this help")("json", "print the table as JSON")(
      "seed", po::value<std::string>(),
      "run every scenario with this seed in place of its own, 0..2^64-1: another sequence of "
      "wake-up latency draws where the preset has idle_wake_spread or "
      "idle_wake_blocked_spread")(
      "runs", po::value<std::string>(),
      "run every scenario this many times (odd, 1..99), with its seed and the next ones, and "
      "judge each figure's median run, as a measured set's throughput, CPU and ACK figures "
      "are medians of its runs (default 1)")(
      "plot", po::value<std::string>(),
      "also draw DIR/predicted-vs-measured.svg and .png (skbsim plot; with --runs, the first "
      "run's)");
  po::options_description all;
  all.add(visible).add_options()("paths", po::value<std::vector<std::string>>());
  po::positional_options_description pos;
  pos.add("paths", -1);
  po::variables_map vm;
  if (!parse_args(args, visible, all, pos, vm, usage)) {
    return kExitUsage;
  }
  if (vm.count("help") != 0) {
    std::cout << "Usage: " << usage
              << "\n\nRuns every scenario that has a reference (default: scenarios/) and prints\n"
                 "measured, predicted and error for each figure; exits 1 when an error is beyond\n"
                 "the tolerance the scenario states.\n\n"
              << visible;
    return 0;
  }
  std::vector<std::string> paths = vm.count("paths") != 0
                                       ? vm["paths"].as<std::vector<std::string>>()
                                       : std::vector<std::string>{"scenarios"};
  std::optional<std::uint64_t> seed;
  if (vm.count("seed") != 0) {
    const std::string& v = vm["seed"].as<std::string>();
    seed = parse_uint64(v);
    if (!seed) {
      std::cerr << "skbsim validate: expected --seed to be an integer 0..2^64-1, got \"" << v
                << "\"\n\nUsage: " << usage << "\n";
      return kExitUsage;
    }
  }
  std::uint64_t runs = 1;
  if (vm.count("runs") != 0) {
    const std::string& v = vm["runs"].as<std::string>();
    const std::optional<std::uint64_t> n = parse_uint64(v);
    if (!n || *n < 1 || *n > 99 || *n % 2 == 0) {
      std::cerr << "skbsim validate: expected --runs to be an odd integer 1..99, got \"" << v
                << "\"\n\nUsage: " << usage << "\n";
      return kExitUsage;
    }
    runs = *n;
  }
  std::vector<Scenario> scenarios;
  try {
    for (const std::string& f : scenario_files(paths)) {
      scenarios.push_back(load_scenario(f));
      if (seed) {
        scenarios.back().spec.seed = *seed;
      }
    }
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitUsage;
  }
  std::vector<Check> checks;
  std::vector<PlotInput> plotted;
  std::map<std::string, Demand> demand;  // service demands, for ratio_checks
  std::size_t done = 0;
  std::size_t with_ref = 0;
  for (const Scenario& sc : scenarios) {
    with_ref += sc.reference ? 1 : 0;
  }
  for (const Scenario& sc : scenarios) {
    if (!sc.reference) {
      continue;
    }
    if (stderr_is_terminal()) {
      std::cerr << "\r[" << ++done << "/" << with_ref << "] " << sc.name << "\033[K" << std::flush;
    }
    std::vector<std::vector<Check>> rows;
    std::vector<double> demands;
    std::optional<double> measured_demand;
    std::optional<PlotInput> plot;
    bool bug = false;
    for (std::uint64_t k = 0; k < runs; ++k) {
      ScenarioSpec spec = sc.spec;
      spec.seed += k;  // the scenario's seed (or --seed), then the next ones
      RunResult r;
      try {
        r = run_scenario(spec);
      } catch (const SkbBug& e) {
        checks.push_back({sc.name, "run", "", "BUG",
                          std::string(e.what()) + " (seed " + std::to_string(spec.seed) + ")",
                          false});
        bug = true;
        break;
      }
      if (k == 0 && vm.count("plot") != 0) {
        plot = PlotInput{sc.file, nlohmann::json(result_json(sc, r, false))};
      }
      std::optional<Demand> d;
      rows.push_back(scenario_rows(sc, r, d));
      if (d) {
        measured_demand = d->measured;
        demands.push_back(d->predicted);
      }
    }
    if (bug) {
      continue;  // the BUG row alone: no figure of a run that did not finish, nor a plot
    }
    if (plot) {
      plotted.push_back(std::move(*plot));
    }
    std::vector<Check> judged = median_rows(rows);
    checks.insert(checks.end(), judged.begin(), judged.end());
    if (measured_demand) {
      demand[sc.name] = {*measured_demand, median_of(demands)};
    }
  }
  ratio_checks(demand, checks);
  if (stderr_is_terminal() && done > 0) {
    std::cerr << "\r\033[K" << std::flush;
  }
  if (vm.count("plot") != 0) {
    PlotOptions o;
    o.breakdown = false;
    o.sweeps = false;
    try {
      if (plotted.empty()) {
        throw InputError(paths.front(), "", "expected a scenario with a reference to plot, got none");
      }
      write_plots(vm["plot"].as<std::string>(), plotted, o);
    } catch (const InputError& e) {
      std::cerr << e.what() << "\n";
      return kExitUsage;
    }
  }
  bool all_ok = true;
  if (vm.count("json") != 0) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const Check& c : checks) {
      j.push_back({{"scenario", c.scenario}, {"figure", c.figure}, {"measured", c.measured},
                   {"predicted", c.predicted}, {"error", c.error}, {"ok", c.ok}});
      if (!c.note.empty()) {
        j.back()["note"] = c.note;
      }
      all_ok = all_ok && c.ok;
    }
    std::cout << j.dump(2) << "\n";
  } else {
    // The scenario column as wide as its longest name: a measured set's names run past 38.
    int width = 38;
    for (const Check& c : checks) {
      width = std::max(width, static_cast<int>(c.scenario.size()) + 2);
    }
    std::cout << std::left << std::setw(width) << "scenario" << std::setw(34) << "figure"
              << std::right << std::setw(10) << "measured" << std::setw(11) << "predicted"
              << std::setw(9) << "error" << "  ok\n";
    for (const Check& c : checks) {
      std::cout << std::left << std::setw(width) << c.scenario << std::setw(34) << c.figure
                << std::right << std::setw(10) << c.measured << std::setw(11) << c.predicted
                << std::setw(9) << c.error << "  " << (c.ok ? "yes" : "NO")
                << (c.note.empty() ? "" : "  (" + c.note + ")") << "\n";
      all_ok = all_ok && c.ok;
    }
  }
  return all_ok ? 0 : 1;
}

namespace {

// calibrate --figure: the figures left out are dropped from every reference before the fit (a
// CPU-bound measurement's utilisation says how many CPUs the pipeline kept busy, not what a byte
// costs; its service demand does). Each CPU's busy share, a kernel profile's groups and the counts
// per segment are fitted only when named.
constexpr std::array<std::string_view, 4> kCpuFigures = {"cpu_util_pct", "service_demand_us_per_kb",
                                                         "remote_cpu_util_pct",
                                                         "remote_service_demand_us_per_kb"};
constexpr std::string_view kBusyFigures = "cpu_busy_pct_by_cpu";

struct FigureChoice {
  std::set<std::string, std::less<>> named;     // the CPU figures and cpu_busy_pct_by_cpu named
  std::set<std::string, std::less<>> groups;    // profile:<group>
  std::set<std::string, std::less<>> counters;  // count:<counter>
  bool profile_unlimited_only = false;          // --profile-unlimited-only
};

// --figure's names, checked: an InputError naming --figure for one calibrate cannot fit.
FigureChoice figure_choice(const std::vector<std::string>& figures, bool profile_unlimited_only) {
  FigureChoice c;
  c.profile_unlimited_only = profile_unlimited_only;
  for (const std::string& fig : figures) {
    if (fig.rfind(kCountFigurePrefix, 0) == 0) {
      const std::string counter = fig.substr(kCountFigurePrefix.size());
      if (std::find(measure::kValidatedCounters.begin(), measure::kValidatedCounters.end(),
                    counter) == measure::kValidatedCounters.end()) {
        std::string counters;
        for (const std::string_view k : measure::kValidatedCounters) {
          counters += (counters.empty() ? "" : ", ") + std::string(k);
        }
        throw InputError("--figure", "",
                         "expected count:<counter> with a counter of reference.per_segment "
                         "that validate compares (" +
                             counters + "), got \"" + fig + "\"");
      }
      c.counters.insert(counter);
    } else if (fig.rfind(kProfileFigurePrefix, 0) == 0) {
      const std::string group = fig.substr(kProfileFigurePrefix.size());
      if (!is_busy_group(group) || !model_has_group(group)) {
        throw InputError("--figure", "",
                         "expected profile:<group> with a kernel-profile group the model has "
                         "symbols in (docs/measure.md, \"The kernel profile\"), got \"" +
                             fig + "\"");
      }
      c.groups.insert(group);
    } else if (std::find(kCpuFigures.begin(), kCpuFigures.end(), fig) != kCpuFigures.end() ||
               fig == kBusyFigures) {
      c.named.insert(fig);
    } else {
      throw InputError("--figure", "",
                       "expected one of cpu_util_pct, service_demand_us_per_kb, "
                       "remote_cpu_util_pct, remote_service_demand_us_per_kb, "
                       "cpu_busy_pct_by_cpu, profile:<group>, count:<counter>, got \"" +
                           fig + "\"");
    }
  }
  return c;
}

// Trims `sc`'s reference to the figures `c` fits (it changes `sc`), and says whether anything is
// left to fit.
bool keep_fitted_figures(Scenario& sc, const FigureChoice& c) {
  if (!sc.reference) {
    return false;
  }
  Reference& r = *sc.reference;
  const auto keep = [&c](std::optional<double>& v, std::string_view name) {
    if (!c.named.contains(name)) {
      v.reset();
    }
  };
  keep(r.cpu_util_pct, "cpu_util_pct");
  keep(r.service_demand_us_per_kb, "service_demand_us_per_kb");
  keep(r.remote_cpu_util_pct, "remote_cpu_util_pct");
  keep(r.remote_service_demand_us_per_kb, "remote_service_demand_us_per_kb");
  if (!c.named.contains(kBusyFigures)) {
    r.cpu_busy_pct_by_cpu.clear();
  }
  if (c.profile_unlimited_only &&
      std::any_of(sc.spec.flows.begin(), sc.spec.flows.end(),
                  [](const FlowSpec& fl) { return fl.rate_bps != 0; })) {
    r.profile_groups.reset();
  }
  if (r.profile_groups) {
    std::erase_if(r.profile_groups->us_per_kb,
                  [&c](const auto& g) { return !c.groups.contains(g.first); });
    if (r.profile_groups->us_per_kb.empty()) {
      r.profile_groups.reset();
    }
  }
  // Counts: only the named counters, and only where validate holds them relatively (the
  // devices' counts are not fitted).
  if (r.per_segment) {
    PerSegmentReference& ps = *r.per_segment;
    ps.devices.clear();
    std::erase_if(ps.counters, [&c](const auto& k) {
      return !c.counters.contains(k.first) || !measure::count_relative(k.first, k.second);
    });
    if (ps.counters.empty()) {
      r.per_segment.reset();
    }
  }
  const auto figs = r.figures();
  return r.profile_groups || r.per_segment ||
         std::any_of(figs.begin(), figs.end(), is_fitted_figure);
}

}  // namespace

int run_calibrate(const std::vector<std::string>& args) {
  const std::string usage =
      "skbsim calibrate --scenarios DIR|FILE... --preset PRESET.json [--free PARAM...] "
      "[--figure NAME...] [--profile-unlimited-only] [--start FACTOR...] [--out FILE]";
  po::options_description visible("Options");
  visible.add_options()("help,h", "print this help")(
      "scenarios,s", po::value<std::vector<std::string>>()->multitoken(),
      "the scenarios with references to fit to (directories or files)")(
      "preset,p", po::value<std::string>(), "the starting preset")(
      "free", po::value<std::vector<std::string>>()->multitoken(),
      "parameters to fit: call_scale, copy_bytes_per_ns, copy_to_user_bytes_per_ns, "
      "csum_bytes_per_ns, fused_bytes_per_ns, page_ref_cycles, idle_exit_blocked_us, "
      "skb_handover_ns, cycles:<symbol>, group_scale:<group> (default: call_scale)")(
      "figure", po::value<std::vector<std::string>>()->multitoken(),
      "the reference figures to fit: cpu_util_pct, service_demand_us_per_kb, "
      "remote_cpu_util_pct, remote_service_demand_us_per_kb (default: all of these a reference "
      "has), cpu_busy_pct_by_cpu (each CPU's busy share; only when named), profile:<group> (a "
      "group's us/KB in reference.profile_groups; only when named), count:<counter> (a count "
      "per wire segment in reference.per_segment, such as count:tcp_acks_sent; only when named, "
      "and only where validate holds it relatively, at one per hundred segments or more)")(
      "out,o", po::value<std::string>(), "where to write the fitted preset (default: print it)")(
      "prior", po::value<std::vector<std::string>>()->multitoken(),
      "PARAM=FACTOR: condition the fit with a log-normal prior on a free parameter, centred on "
      "its starting value, FACTOR (> 1) times or 1/FACTOR of it at one standard deviation "
      "(default: none)")(
      "profile-unlimited-only",
      "fit profile:<group> figures only from references whose flows have no rate limit: at a "
      "fixed rate the kernel spreads the cost of leaving idle over every function it runs "
      "next (cold caches), where the model charges it to one symbol (cpu.idle_exit_blocked_us); "
      "the rate-limited references' other figures still count")("no-loo",
                                                                "skip the leave-one-out table")(
      "start", po::value<std::vector<std::string>>()->multitoken(),
      "FACTOR...: start a descent from the preset's values times each FACTOR, every free "
      "parameter alike (default: 1 0.5 2); one FACTOR redoes one descent of a fit record's "
      "\"descents\"");
  po::variables_map vm;
  if (!parse_args(args, visible, visible, {}, vm, usage)) {
    return kExitUsage;
  }
  if (vm.count("help") != 0) {
    std::cout << "Usage: " << usage
              << "\n\nFits the named cost parameters of PRESET to the CPU figures (and the counts\n"
                 "--figure names) of every scenario in DIR that has a reference, by bounded\n"
                 "least squares, writes the fitted preset with its residuals and this command,\n"
                 "and prints a leave-one-out table: each reference predicted by a fit that did\n"
                 "not see it.\n\n"
              << visible;
    return 0;
  }
  if (vm.count("scenarios") == 0 || vm.count("preset") == 0) {
    std::cerr << "skbsim calibrate: expected --scenarios DIR and --preset PRESET.json\n\nUsage: "
              << usage << "\n";
    return kExitUsage;
  }
  const std::vector<std::string> free = vm.count("free") != 0
                                            ? vm["free"].as<std::vector<std::string>>()
                                            : std::vector<std::string>{"call_scale"};
  std::string command = "skbsim calibrate";
  for (const std::string& a : args) {
    command += " " + a;
  }
  try {
    const std::string preset_path = vm["preset"].as<std::string>();
    const CostPreset start = CostPreset::load(preset_path, preset_path);
    for (const std::string& p : free) {
      if (!start.has_param(p)) {
        throw InputError("--free", "", "expected a preset parameter, got \"" + p + "\"");
      }
    }
    std::map<std::string, double> priors;
    if (vm.count("prior") != 0) {
      for (const std::string& w : vm["prior"].as<std::vector<std::string>>()) {
        const auto eq = w.find('=');
        const std::string param = w.substr(0, eq);
        if (eq == std::string::npos ||
            std::find(free.begin(), free.end(), param) == free.end()) {
          throw InputError("--prior", "",
                           "expected PARAM=FACTOR with a parameter --free names, got \"" + w +
                               "\"");
        }
        const std::string num = w.substr(eq + 1);
        const double factor = parse_double(num).value_or(0);
        if (!(factor > 1)) {
          throw InputError("--prior", "",
                           "expected a factor above 1 after \"" + param + "=\", got \"" + num +
                               "\"");
        }
        priors[param] = factor;
      }
    }
    std::vector<double> starts = kFitStarts;
    if (vm.count("start") != 0) {
      starts.clear();
      for (const std::string& w : vm["start"].as<std::vector<std::string>>()) {
        const double factor = parse_double(w).value_or(0);
        if (!(factor >= 0.01 && factor <= 100)) {
          throw InputError("--start", "", "expected a factor in [0.01, 100], got \"" + w + "\"");
        }
        starts.push_back(factor);
      }
    }
    const std::vector<std::string> figures =
        vm.count("figure") != 0 ? vm["figure"].as<std::vector<std::string>>()
                                : std::vector<std::string>(kCpuFigures.begin(), kCpuFigures.end());
    const FigureChoice choice = figure_choice(figures, vm.count("profile-unlimited-only") != 0);
    const auto inputs = vm["scenarios"].as<std::vector<std::string>>();
    std::vector<Scenario> scenarios;
    for (const std::string& f : scenario_files(inputs)) {
      Scenario sc = load_scenario(f);
      if (keep_fitted_figures(sc, choice)) {
        scenarios.push_back(std::move(sc));
      }
    }
    if (scenarios.empty()) {
      throw InputError(inputs.front(), "", "expected scenarios with CPU references, got none");
    }
    const FitResult f = fit(scenarios, start, free, priors, starts);
    if (f.residuals.empty()) {
      // (a profile group or a count under the floor in every reference, or a host the run lacks)
      throw InputError("--figure", "",
                       "expected a figure the model predicts in the references, "
                       "got none to fit");
    }
    std::cout << "Fitted " << f.free.size() << " parameter(s) to " << f.residuals.size()
              << " figures of " << scenarios.size() << " scenarios in " << f.iterations
              << " iterations; rms error " << fixed(f.rms_pct, 2) << "%\n";
    for (const std::string& p : f.free) {
      std::cout << "  " << std::left << std::setw(24) << p << std::right
                << fixed(start.get(p), 4) << " -> " << fixed(f.preset.get(p), 4) << "\n";
    }
    // Columns as wide as the longest scenario and figure name, two spaces apart.
    int name_w = 8;
    int figure_w = 6;
    for (const Residual& r : f.residuals) {
      name_w = std::max(name_w, static_cast<int>(r.scenario.size()));
      figure_w = std::max(figure_w, static_cast<int>(r.figure.size()));
    }
    name_w += 2;
    figure_w += 2;
    const auto print_row = [name_w, figure_w](const Residual& r) {
      // a count per segment to validate's four decimals (one ACK a write is 0.011)
      const int decimals = r.figure.starts_with(kCountFigurePrefix) ? 4 : 3;
      std::cout << std::left << std::setw(name_w) << r.scenario << std::setw(figure_w) << r.figure
                << std::right << std::setw(10) << fixed(r.measured, decimals) << std::setw(11)
                << fixed(r.predicted, decimals) << std::setw(8) << fixed(r.error_pct(), 1) << "%\n";
    };
    std::cout << "\n"
              << std::left << std::setw(name_w) << "scenario" << std::setw(figure_w) << "figure"
              << std::right << std::setw(10) << "measured" << std::setw(11) << "fitted"
              << std::setw(9) << "error\n";
    for (const Residual& r : f.residuals) {
      print_row(r);
    }
    if (vm.count("no-loo") == 0 && scenarios.size() > 1) {
      std::cout << "\nLeave-one-out (each scenario predicted by a fit of the others):\n";
      for (const LeaveOneOut& l : leave_one_out(scenarios, start, free, priors, starts)) {
        for (const Residual& r : l.predicted) {
          print_row(r);
        }
      }
    }
    nlohmann::ordered_json fitted = f.preset.to_json(fit_record(f, command));
    const std::string name = start.name();
    if (name.size() < 7 || name.compare(name.size() - 7, 7, "-fitted") != 0) {
      fitted["name"] = name + "-fitted";  // results name the preset they were computed with
    }
    const std::string out = fitted.dump(2) + "\n";
    if (vm.count("out") != 0) {
      write_file_atomically(vm["out"].as<std::string>(), out);
      std::cout << "\nwrote " << vm["out"].as<std::string>() << "\n";
    } else {
      std::cout << "\n" << out;
    }
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitUsage;
  }
  return 0;
}

}  // namespace skbsim::sim
