#pragma once
// measure_report.hpp — what `skbsim measure` writes, in the project's own formats
// (docs/measure.md):
//
//   DIR/<config>.json               a scenario (docs/scenarios.md) that extends the shared piece of
//                                   its topology, with the measured feature set, the flow as
//                                   iperf3 ran it, and a `reference` block holding the medians
//                                   and, from the traced run, `reference.per_segment`;
//   DIR/measurements/<config>.json  the measurement: machine, settings, every run's figures,
//                                   medians with min/max/MAD, the traced run's raw counts;
//   DIR/summary.txt                 what the command printed.
//
// <config> is "<topology>-<variant>-<rate>", e.g. "forward-off-unlimited", "direct-on-1000mbps".
// Pure functions from plain structs to JSON: no clock, no files.

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/measure_host.hpp"
#include "sim/measure_net.hpp"
#include "sim/measure_speed.hpp"
#include "sim/measure_trace.hpp"

namespace skbsim::sim::measure {

struct Configuration {
  Topology topology = Topology::kDirect;
  Variant variant = Variant::kOn;
  std::optional<double> rate_mbps;  // nullopt: unlimited
  std::string name() const;         // "forward-off-unlimited"
  std::string rate_label() const;   // "unlimited", "1000mbps"
};

// One iperf3 stream, client -> server, and what the machine did meanwhile.
struct RunFigures {
  double wall_s = 0;  // the client's lifetime, over which CPU time is counted
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  double stream_s = 0;         // iperf3's receiver seconds
  double throughput_mbps = 0;  // receiver's goodput, 10^6 bit/s
  double sender_throughput_mbps = 0;
  std::int64_t retransmits = 0;
  int mss = 0;  // iperf3 start.tcp_mss_default
  std::string sender_congestion;    // iperf3 end.sender_tcp_congestion ("" when not reported)
  std::string receiver_congestion;  // end.receiver_tcp_congestion
  CpuUsage cpu;
  double service_demand_us_per_kb = 0;        // non-idle µs / (bytes received / 1024)
  double service_demand_ticks_us_per_kb = 0;  // tick-sampled busy µs / KB
  std::int64_t client_out_segs = 0;           // TcpOutSegs in the client namespace (wire segments)
  std::int64_t client_retrans_segs = 0;
  std::int64_t server_in_segs = 0;
  std::int64_t server_out_segs = 0;   // the ACKs
  // The stream's sk_rcvbuf at the server, read (ss -tmi) four fifths into the run: the buffer
  // autotuning had given it by then. nullopt when ss could not say or the run ended first.
  std::optional<std::int64_t> server_rcvbuf;
  // kRecordedTcpExt counters over the run, in each namespace (those /proc/net/netstat has)
  std::map<std::string, std::int64_t> client_tcpext;
  std::map<std::string, std::int64_t> server_tcpext;
  nlohmann::ordered_json iperf3_cpu;  // iperf3's own end.cpu_utilization_percent
  Activity activity;  // per-CPU busy time, NET_RX/NET_TX softirqs, IPIs; context switches
  std::optional<RunSpeed> speed;  // the speed probe on each side of the run (measure_speed.hpp)
  std::string unsteady;           // why the probe says the machine ran slow, "" when it did not
};

struct TraceOutcome {
  std::string status = "off";  // "ok", "off" (--trace off), "unavailable", "refused"
  std::string reason;          // why not "ok"
  std::vector<std::string> missing_tracepoints;
  std::vector<std::string> slab_caches;  // the kmem_cache names traced (skb_cache_names())
  std::map<std::string, std::vector<std::string>> slab_merges;  // skb_cache_merges()
  std::optional<RunFigures> run;  // the traced run's own figures (not in the medians)
  // The second traced run's, which traced only the allocations (is_allocation_tracepoint): their
  // counts in `counts` are scaled to `run`'s segments (merge_allocation_counts). Empty when no
  // allocation tracepoint was present.
  std::optional<RunFigures> alloc_run;
  // Why there is no allocations' run although the main one traced ("" when nothing was refused):
  // its counts (pskb_expand_head, skb_segment's outputs, sk_buff allocations) are then absent.
  std::string allocations_refused;
  std::optional<TraceCounts> counts;
};

struct ConfigResult {
  Configuration config;
  std::string date;  // UTC, ISO 8601, when its first run started
  std::vector<RunFigures> runs;           // the runs the medians are of
  std::vector<RunFigures> unsteady_runs;  // runs set aside because the machine ran slow, redone
  double settle_wait_s = 0;  // time spent waiting for the machine's normal speed before runs
  TraceOutcome trace;
  std::map<std::string, std::map<std::string, bool>> features;  // ethtool -k per veth end
  std::map<std::string, std::string> sysctls;  // name -> value in the namespace that matters
};

// Everything about the whole invocation.
struct MeasureContext {
  Machine machine;
  std::map<std::string, std::string> tool_versions;  // "iperf3" -> "iperf 3.12 (cJSON 1.7.15)"
  double background_non_idle_pct = 0;                // the machine's own load before the first run
  double background_wall_s = 0;
  int duration_s = 0;
  int runs = 0;
  int client_cpu = -1;  // iperf3 -A, -1 when not pinned
  int server_cpu = -1;
  std::string command;  // the command line as given
  std::string route_congestion_control;  // pinned on the ends' routes (NetPlan); "" when not
  // The scenarios' names are "<set_name>-<config>": --out's last component (vm-2core), so that
  // two machines' sets validated together stay apart.
  std::string set_name = "measured";
  int unsteady_retries = 0;       // --unsteady-retries
  std::string order = "grouped";  // --order: "interleaved" or "grouped"
  SpeedYardstick first_speed;     // the probes before the first run
  SpeedYardstick best_speed;      // the fastest the probes saw the machine, at the end
};

// The measurement file (schema 1, "kind": "skbsim-measurement").
nlohmann::ordered_json measurement_json(const MeasureContext& ctx, const ConfigResult& r);

// Whether what `d` transmits travels toward the client: the stream's reverse direction, which
// carries nothing but the receiver's ACKs. A server-side end sends toward the client, and so does
// an end whose peer is the client's; the bridge itself forwards nothing of its own.
bool xmit_toward_client(const NetPlan& plan, const PlanDevice& d);

// reference.per_segment from a traced run (docs/measure.md): counts per wire segment. With
// untraced_acks (the untraced runs' ACKs per segment), tcp_acks_sent is that rate and each count
// of the reverse direction (what travels toward the client: the ACKs) is the traced count per
// traced ACK times it; the data direction's counts and every bytes-per-skb figure are the trace's.
// Requires: segments > 0.
nlohmann::ordered_json per_segment_json(const TraceCounts& counts, std::int64_t segments,
                                        const NetPlan& plan, const std::string& source,
                                        std::optional<double> untraced_acks = std::nullopt);

// reference.profile_groups from a measurement's trace.profile (as measurement_json writes it) and
// the untraced runs' median service demand: each busy group's share, weighted by CPU time where
// the profile has the weights (group_shares_cpu_weighted), else by samples, times the service
// demand, in µs/KB. Null when the profile has no busy samples. The committed set's scenarios hold
// exactly this (MeasureReport.CommittedProfileGroupsAreDerivedFromTheirMeasurements checks it).
nlohmann::ordered_json reference_profile_groups(const nlohmann::ordered_json& profile,
                                                double service_demand_us_per_kb,
                                                const std::string& source);

// The scenario file. `extends` is the shared piece's path relative to the scenario's directory,
// `measurement_file` the measurement's path relative to it too.
nlohmann::ordered_json scenario_json(const MeasureContext& ctx, const ConfigResult& r,
                                     const std::string& extends,
                                     const std::string& measurement_file);

// One line per configuration for the summary table, with a header line.
std::string summary_header();
std::string summary_row(const ConfigResult& r);
// The traced run's highlights, a few lines ("" when not traced).
std::string trace_summary(const ConfigResult& r);

// `skbsim measure --compare DIR`: each configuration's medians (throughput, non-idle CPU, service
// demand) against the reference of DIR/<config>.json, a row per figure with the difference in
// percent; `all_within` false when one is beyond `tolerance_pct` or a configuration has no file
// there. It first says whether `machine` is the one the set was measured on (see
// machine_differences). Where both sides have speed probes it also counts the medians adjusted to
// the set's speed (each configuration's ALU step now against the set's; docs/measure.md, "At the
// set's speed"), as context, or as the verdict (`all_within`) with `judge_speed_adjusted` when
// every configuration has them. Then, as context, the kernel's per-segment counts now (see
// reference.per_segment) against the set's, by count_within, for the configurations traced on
// both sides. Text for the summary.
std::string compare_text(const std::vector<ConfigResult>& results, const std::filesystem::path& dir,
                         const Machine& machine, double tolerance_pct, bool& all_within,
                         bool judge_speed_adjusted = false);

// The counts of reference.per_segment that `skbsim validate` holds the model's to, and --compare a
// new campaign's: these counters, and these of each device.
inline constexpr std::array<std::string_view, 9> kValidatedCounters = {
    "pskb_expand_head_calls",
    "skb_segment_outputs",
    "consume_skb_calls",
    "kfree_skb_calls",
    "skb_copy_datagram_iovec_calls",
    "skb_copy_datagram_iovec_bytes",
    "tcp_acks_sent",
    "context_switches",
    "ipis"};
inline constexpr std::array<std::string_view, 12> kValidatedDeviceCounts = {
    "xmit_skbs",
    "xmit_segments",
    "xmit_gso_skbs",
    "xmit_ip_summed_none",
    "xmit_ip_summed_partial",
    "xmit_linear_bytes_per_skb",
    "rx_skbs",
    "rx_gso_skbs",
    "rx_ip_summed_none",
    "rx_ip_summed_unnecessary",
    "rx_ip_summed_partial",
    "rx_linear_bytes_per_skb"};

// reference.per_segment's rule, by which `skbsim validate` holds the model's counts to the
// kernel's and --compare a new campaign's to a committed set's: within `tolerance_pct` of
// `reference` when `relative`, else within `abs_tolerance` of it (a count under one per hundred
// segments, whose relative error says nothing).
bool count_within(double reference, double value, double tolerance_pct, bool relative,
                  double abs_tolerance = 0.002);
// Whether that rule holds `key` relatively: an average over a device's skbs (`*_per_skb`) always,
// a count when it is at least one per hundred segments.
bool count_relative(std::string_view key, double reference);
// The count a device's `key` is over: "xmit_skbs" for "xmit_linear_bytes_per_skb", the key itself
// for a count. A device count both sides leave under kNegligibleDeviceCount a segment (a bridge's
// own few neighbour-discovery frames in millions of segments) is not compared, nor an average
// over such a count.
std::string device_count_over(std::string_view key);
inline constexpr double kNegligibleDeviceCount = 0.0005;

// The machine a committed set was measured on: the "machine" object of its first measurement
// file (DIR/measurements/*.json, by name); nullopt when it has none.
std::optional<nlohmann::ordered_json> committed_machine(const std::filesystem::path& dir);

// How `now` differs from a committed set's machine, one phrase each ("virtualisation PVM+docker,
// now KVM+docker"): the kernel release, the virtualisation, the CPU model, the CPU count, and
// the clock when it differs by more than 5 %. Empty: the same machine class.
std::vector<std::string> machine_differences(const nlohmann::ordered_json& committed,
                                             const Machine& now);

// The set `--compare DIR` means on this machine. DIR itself when it is a set (it has
// measurements/); else the one subdirectory of DIR that is a set measured on a machine of this
// class (no machine_differences). Throws std::runtime_error naming each set and its machine when
// no subdirectory, or more than one, matches.
std::filesystem::path resolve_compare_dir(const std::filesystem::path& dir, const Machine& now);

// A one-line description of the machine for `reference.source`.
std::string machine_line(const Machine& m);

// Rounds to `decimals` places, for numbers written to files.
double rounded(double v, int decimals);

}  // namespace skbsim::sim::measure
