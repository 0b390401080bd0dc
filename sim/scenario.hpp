#pragma once
// scenario.hpp — scenario files (scenarios/*.json, docs/scenarios.md): one netperf-like run
// described in JSON, read and validated in full into a plain ScenarioSpec before anything runs.
//
//   file.json --extends--> base.json --extends--> ...     each applied to its base as an
//        \____________ RFC 7386 merge patch ____________/  RFC 7386 JSON Merge Patch
//                             |
//                  merged document --validate--> Scenario{spec, preset, reference}
//
// Every mistake is one InputError line, "FILE: /json/pointer: expected ..., got ...", where FILE
// is the path as the user gave it; when the offending value came from an extended file, the line
// ends with "(set in <that file>)". Cross-references are checked too: devices and namespaces that
// exist, peers that name each other, and that every flow has a route both ways.
//
// The downside of validating everything up front is that the reader knows the model's rules
// (which kernel has which device kind and feature); they are all in scenario.cpp.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cost_preset.hpp"
#include "sim/input_error.hpp"
#include "sim/run.hpp"

namespace skbsim::sim {

// reference.cpu_busy_pct_by_cpu[i] as a figure: "cpu_busy_pct_cpu0", ...
inline constexpr std::string_view kCpuBusyFigurePrefix = "cpu_busy_pct_cpu";

// One measured figure of the reference block, by its JSON key.
struct ReferenceFigure {
  std::string key;  // "throughput_mbps", "cpu_util_pct", ...
  double value = 0;
  // Whether a prediction's error relative to it means anything: not for a figure measured at 0
  // (a CPU that did nothing).
  bool has_relative_error() const noexcept { return value != 0; }
};

// reference.per_segment: event counts per wire segment, counted by tracepoints on a real kernel
// (`skbsim measure`, docs/measure.md). Counter names that the model's results have
// (`hosts.<h>.per_segment.<symbol>_calls`, `_bytes`, docs/results.md) compare directly.
struct PerSegmentReference {
  std::string source;
  double tolerance_pct = 10;
  std::uint64_t segments = 0;  // the wire segments the counts were divided by
  std::map<std::string, double> counters;  // "pskb_expand_head_calls" -> 0.034
  std::map<std::string, std::map<std::string, double>> devices;  // device -> "xmit_skbs" -> ...
};

// reference.profile_groups: where a real kernel's busy time went, by kernel-profile group (the
// bpftrace profile of `skbsim measure`, docs/measure.md "The kernel profile"), in µs per KB of
// goodput: each group's CPU-weighted share of the busy samples times the measured service demand.
// The model's symbols fall in the same groups (sim/kernel_groups.hpp).
struct ProfileGroupsReference {
  std::string source;
  double tolerance_pct = 25;
  std::uint64_t busy_samples = 0;  // what the shares are of (their precision)
  std::map<std::string, double> us_per_kb;  // "ip" -> 0.087
};

// The measurement a scenario reproduces (for the report's comparison and `skbsim calibrate`).
struct Reference {
  std::string source;  // where the figures come from (a mail, a paper, a run)
  double tolerance_pct = 0;
  std::string host;  // the host the CPU figures are for ("" when only throughput is given)
  std::optional<double> throughput_mbps;
  std::optional<double> cpu_util_pct;
  std::optional<double> service_demand_us_per_kb;
  std::optional<double> remote_cpu_util_pct;
  std::optional<double> remote_service_demand_us_per_kb;
  std::string remote_host;               // the host the remote_* figures are for
  std::vector<std::string> profile_top;  // kernel symbols expected among the top N of `host`
  std::uint32_t profile_top_n = 5;
  std::vector<std::string> profile_absent;  // kernel symbols expected not to run at all on `host`
  std::optional<PerSegmentReference> per_segment;
  std::optional<ProfileGroupsReference> profile_groups;
  // Each CPU of `host`: its non-idle share of the wall time, % (the model's
  // cpu_busy_pct_by_cpu): where the work ran, which decides what saturates.
  std::vector<double> cpu_busy_pct_by_cpu;

  // The numeric figures present, in the order above; CPU i's busy share as "cpu_busy_pct_cpu<i>".
  std::vector<ReferenceFigure> figures() const;
};

struct Scenario {
  std::string file;  // as the user gave it
  std::string name;
  std::string description;
  ScenarioSpec spec;        // spec.cost = preset.model()
  std::string preset_path;  // as resolved (relative to the current directory when `file` is)
  CostPreset preset;
  std::optional<Reference> reference;
  nlohmann::ordered_json document;  // the merged document as read (no "extends"; "preset"
                                    // relative to the directory of `file`)
};

// Reads `path`, follows "extends", validates everything and loads the preset.
// Throws InputError (one line, naming the JSON pointer) on any mistake.
Scenario load_scenario(const std::string& path);

// The same from an already-merged document (what Scenario::document holds): `file` is only used
// in error messages, relative preset paths resolve against `base_dir`. "extends" is an error here.
Scenario scenario_from_json(const nlohmann::json& merged, const std::string& file,
                            const std::string& base_dir);

// The keys each object of the format accepts (docs/scenario.schema.json must list the same; a
// test checks it).
namespace scenario_keys {
// Every object but the top level (which has "description") and a feature edit may carry a
// "comment" string, ignored by the reader.
inline constexpr std::array<std::string_view, 15> kTop = {
    "schema",  "name",  "description", "extends", "kernel",  "kernel_config", "preset", "seed",
    "hosts",   "namespaces", "devices", "traffic", "patches", "trace_segment", "reference"};
inline constexpr std::array<std::string_view, 2> kKernelConfig = {"max_header", "comment"};
inline constexpr std::array<std::string_view, 6> kHost = {
    "name", "cpus", "cpus_counted", "skb_defer_max", "defer_count", "comment"};
inline constexpr std::array<std::string_view, 7> kNamespace = {
    "name", "host", "ip_forward", "tcp_backlog_ack_defer", "addresses", "routes", "comment"};
inline constexpr std::array<std::string_view, 3> kRoute = {"to", "dev", "comment"};
inline constexpr std::array<std::string_view, 14> kDevice = {
    "name",  "kind",      "ns",       "peer",    "ports",   "mtu",          "tx_queue_len",
    "features", "model", "rate_mbps", "delay_us", "irq_cpu", "irq_delay_us", "comment"};
inline constexpr std::array<std::string_view, 5> kNicOnly = {"model", "rate_mbps", "delay_us",
                                                             "irq_cpu", "irq_delay_us"};
inline constexpr std::array<std::string_view, 2> kFeatureEdit = {"add", "remove"};
inline constexpr std::array<std::string_view, 5> kTraffic = {"test", "duration_s", "warmup_s",
                                                             "flows", "comment"};
inline constexpr std::array<std::string_view, 20> kFlow = {
    "from",         "to",           "to_addr",         "send_size",
    "sndbuf",       "rcvbuf",       "rcvbuf_locked",   "tcp_rmem_max",
    "mss",          "request_size", "response_size",   "sender_cpu",
    "receiver_cpu", "rate_mbps",    "pacing_timer_us", "recv_size",
    "reader",       "count",        "expect",          "comment"};
inline constexpr std::array<std::string_view, 3> kPatches = {"skip_cow_from", "netfilter",
                                                             "comment"};
inline constexpr std::array<std::string_view, 16> kReference = {
    "source",          "tolerance_pct",       "host",
    "throughput_mbps", "cpu_util_pct",        "service_demand_us_per_kb",
    "remote_host",     "remote_cpu_util_pct", "remote_service_demand_us_per_kb",
    "profile_top",     "profile_top_n",       "profile_absent",
    "per_segment",     "profile_groups",      "cpu_busy_pct_by_cpu",
    "comment"};
inline constexpr std::array<std::string_view, 5> kProfileGroups = {
    "source", "tolerance_pct", "busy_samples", "us_per_kb", "comment"};
inline constexpr std::array<std::string_view, 6> kPerSegment = {
    "source", "tolerance_pct", "segments", "counters", "devices", "comment"};
}  // namespace scenario_keys

}  // namespace skbsim::sim
