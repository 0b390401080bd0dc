#pragma once
// report.hpp — what `skbsim run` prints and writes: the results JSON (docs/results.md), netperf's
// own text layout, a perf-report-like profile per host, and the life of one traced segment.

#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sim/run.hpp"
#include "sim/scenario.hpp"

namespace skbsim::sim {

struct ReportOptions {
  bool profile = false;  // include the per-host profile in the text output
  bool trace = false;    // include the traced segment's life
  std::size_t profile_rows = 25;
};

// The model's value of a reference figure (ReferenceFigure::key): the throughput, the local or
// remote host's CPU utilisation or service demand, or one local CPU's busy share; nullopt when
// the run has no such host or CPU.
std::optional<double> predicted_figure(const RunResult& r, const HostResult* local,
                                       const HostResult* remote, const std::string& key);
// The model's count per wire segment of a reference.per_segment counter (one of
// measure::kValidatedCounters): calls or bytes of its symbol on host `h` over the run's segments;
// nullopt for another key or a run without segments.
std::optional<double> predicted_counter(const RunResult& r, const HostResult& h,
                                        std::string_view key);
// Predicted - measured, in percent of measured, for every figure the reference has.
nlohmann::ordered_json error_pct(const RunResult& r, const Reference& ref);
// The whole result as JSON (schema 1, docs/results.md). Deterministic: ordered keys, no clocks.
nlohmann::ordered_json result_json(const Scenario& sc, const RunResult& r, bool with_trace);
// netperf's TCP_STREAM -c -C layout, then the reference and the error, then profile/trace.
void print_text(std::ostream& out, const Scenario& sc, const RunResult& r, const ReportOptions& o);
void print_profile(std::ostream& out, const Scenario& sc, const RunResult& r, std::size_t rows);
void print_trace(std::ostream& out, const Scenario& sc, const RunResult& r);
// The TCP sockets' timeline (RunResult::timeline) as tab-separated columns with a header line:
// time_us (from the measured window's start), cpu, context, flow, socket, event (kSockEventNames),
// bytes, unread, and the ACK's path.
std::string timeline_tsv(const RunResult& r);

// One device's counts per wire segment under the keys skbsim measure writes for a real device
// (reference.per_segment.devices): xmit_skbs, xmit_segments, xmit_gso_skbs,
// xmit_ip_summed_{none,unnecessary,complete,partial}, xmit_{len,data_len,linear}_bytes_per_skb
// and the rx_ ones (without rx_segments).
std::map<std::string, double> device_per_segment(const DevCounters& c, double segments);

// The run's host of that name; null when it has none.
const HostResult* find_host(const RunResult& r, const std::string& name);
// The host whose CPU the reference (or, without one, the first flow's sender) describes.
const HostResult* local_host(const Scenario& sc, const RunResult& r);
const HostResult* remote_host(const Scenario& sc, const RunResult& r);

}  // namespace skbsim::sim
