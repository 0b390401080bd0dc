#pragma once
// measure_host.hpp — what `skbsim measure` reads from the machine itself: the description that
// goes into every measurement file (kernel, CPU, clock, CPU count, virtualisation), CPU time from
// /proc/stat, TCP counters from /proc/net/snmp, and the statistics of repeated runs.
//
// CPU time, two ways (docs/measure.md says why both):
//   non-idle:  CPUs × wall − idle − iowait − steal, with wall from CLOCK_MONOTONIC. On a
//              tickless kernel idle and iowait are measured at idle entry and exit, so this is
//              exact up to /proc/stat's 1/USER_HZ resolution.
//   ticks:     user + nice + system + irq + softirq, the fields the scheduler tick samples; on a
//              virtual machine at low load they can be far off.
// Pure functions on text, so the tests feed them fixtures.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace skbsim::sim::measure {

// The aggregate "cpu" line of /proc/stat, in USER_HZ ticks: user nice system idle iowait irq
// softirq steal guest guest_nice (guest time is already inside user and nice).
struct CpuTicks {
  std::array<std::uint64_t, 10> v{};
  std::uint32_t cpus = 0;  // the "cpuN" lines
};
// Throws MeasureError when the text has no "cpu " line.
CpuTicks parse_proc_stat(const std::string& text);

struct CpuUsage {
  double wall_s = 0;
  std::uint32_t cpus = 0;
  double non_idle_us = 0;     // cpus × wall − idle − iowait − steal
  double non_idle_pct = 0;    // non_idle_us / (cpus × wall)
  double ticks_busy_us = 0;   // (user + nice + system + irq + softirq) ticks as time
  double ticks_busy_pct = 0;  // the same over all ticks counted
  double steal_pct = 0;       // steal ticks over all ticks counted
  double iowait_pct = 0;
  std::map<std::string, std::uint64_t> tick_deltas;  // per field
};
// `hz` is sysconf(_SC_CLK_TCK).
CpuUsage cpu_usage(const CpuTicks& before, const CpuTicks& after, double wall_s, long hz);

// The "Tcp:" pair of lines of /proc/net/snmp as name -> value (InSegs, OutSegs, RetransSegs...).
// Throws MeasureError when there is none.
std::map<std::string, std::int64_t> parse_snmp_tcp(const std::string& text);

struct Spread {
  std::size_t n = 0;
  double median = 0;
  double min = 0;
  double max = 0;
  double mad = 0;  // median absolute deviation from the median (unscaled)
};
// Requires: !values.empty().
Spread spread(std::vector<double> values);

struct Machine {
  std::string kernel;             // uname -r
  std::string kernel_version;     // uname -v
  std::string arch;               // uname -m
  std::string cpu_model;          // /proc/cpuinfo "model name"
  std::optional<double> cpu_mhz;  // /proc/cpuinfo "cpu MHz" of the first CPU
  std::uint32_t cpus = 0;         // online CPUs
  long clk_tck = 100;             // USER_HZ
  bool hypervisor_flag = false;   // the cpuinfo "hypervisor" flag
  std::string kernel_hypervisor;  // the kernel log's "Hypervisor detected: X", "" if not found
  std::string systemd_detect_vm;  // systemd-detect-virt --vm, "" when not installed
  std::string systemd_detect_container;  // systemd-detect-virt --container
  std::string dmi_vendor;                // /sys/class/dmi/id/sys_vendor, "" when absent
  std::string dmi_product;               // /sys/class/dmi/id/product_name
  // "<vm>" or "<vm>+<container>": the vm from the kernel log, else systemd-detect-virt --vm, else
  // the DMI vendor, else "hypervisor" (the cpuinfo flag alone), else "none"; the container from
  // systemd-detect-virt --container when not "none".
  std::string virtualisation() const;
};

// Parses /proc/cpuinfo text into `m` (model, MHz, hypervisor flag).
void parse_cpuinfo(const std::string& text, Machine& m);
// "KVM" from kernel log text with a line "... Hypervisor detected: KVM"; "" when none.
std::string hypervisor_from_kernel_log(const std::string& text);

}  // namespace skbsim::sim::measure
