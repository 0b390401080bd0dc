#pragma once
// measure_profile.hpp — where the kernel's time goes during a traced run: a statistical profile
// from a bpftrace `profile:hz:997` probe (a perf cpu-clock timer on every CPU; no PMU needed, so
// it works on the virtual machines whose kprobes and function tracer do not), grouped by
// function name into the parts of the path the model costs (docs/measure.md, "The kernel
// profile").
//
// Each sample is one of: idle (the idle loop, its halt), tracing (bpftrace's own programs,
// helpers, maps, tracepoint glue and stack walks, or any sample taken in bpftrace's own process),
// user space, or busy kernel work in a group. Busy = samples − idle − tracing, user space
// included: the same time the service demand counts, so a group's share times the service
// demand is its µs/KB.
//
// The caveat: the sampling timer is an interrupt, and an interrupt cannot land where interrupts
// are disabled. A sample due there is taken when they are re-enabled, at the irq-enable point
// (`pvm_irq_enable` on a PVM guest, `_raw_spin_unlock_irqrestore`, ...). Those samples belong to
// whatever ran with interrupts off; they are reported as their own group, "irqs_off_deferred",
// with the callers of the enable point, never folded into a function they did not run in.
// Enable points inlined into another function (`local_irq_enable()` in finish_task_switch) cannot
// be told apart, so the group is a lower bound.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skbsim::sim::measure {

// Samples per second per CPU. A prime near 1000: ~1 ms granularity, no lock-step with HZ (100,
// 250, 1000) or other periodic timers, and cheap: each sample is a timer interrupt and a short
// BPF program, ~0.1–0.3 % of a CPU even on a VM where every interrupt is an exit.
inline constexpr int kProfileHz = 997;
// Kernel stack frames kept per sample for the caller chains: the sampled function, a paravirt
// thunk when there is one, and two callers (enough to name who re-enabled interrupts).
inline constexpr int kProfileChainFrames = 4;

// What bpftrace counted (parse_bpftrace_output fills it).
struct ProfileSamples {
  std::map<std::uint32_t, std::map<std::string, std::uint64_t>> kernel;  // cpu -> function -> n
  std::map<std::uint32_t, std::uint64_t> user;    // cpu -> samples in user space
  std::map<std::uint32_t, std::uint64_t> tracer;  // cpu -> samples in bpftrace's own process
  // Kernel stacks, functions innermost first (offsets dropped) -> samples. Stacks the stack map
  // could not store are missing, so the chains may add up to fewer than the kernel samples.
  std::map<std::vector<std::string>, std::uint64_t> chains;
  std::map<std::string, std::uint64_t> processes;  // comm -> samples (not bpftrace's own)
  std::uint64_t first_ns = 0;  // the first and the last sample's time (bpftrace nsecs)
  std::uint64_t last_ns = 0;
  bool empty() const { return kernel.empty() && user.empty() && tracer.empty(); }
};

// How a rule matches a function name.
enum class NameMatch : std::uint8_t { kPrefix, kSubstring, kSuffix };

struct ProfileRule {
  std::string_view group;
  NameMatch match;
  std::string_view pattern;
};

// The groups, in the order the summaries print them; "idle" and "tracing" are not busy work,
// "user" is user space (by address, no rule), "other" what no rule matched.
struct ProfileGroup {
  std::string_view name;   // JSON key
  std::string_view label;  // summary text
};
std::span<const ProfileGroup> profile_groups();
// The rules, first match wins (docs/measure.md prints them as a table).
std::span<const ProfileRule> profile_rules();
// The group of a kernel function: the first rule that matches, else "other". "[unknown]" (an
// address kallsyms does not name) is "other".
std::string_view profile_group(std::string_view function);

// A ProfileSamples summed up. Shares are of `busy` (0 when there is none).
//
// A CPU takes kProfileHz samples per second of the window only if its timer interrupt arrives
// when due. Two things make it fall short, and `expected_samples` shows by how much: the kernel
// skips a sample that arrives while another BPF program runs on the CPU (bpf_overflow_handler
// and bpf_prog_active), so the tracepoint programs' own time is mostly missing rather than
// counted as tracing; and a virtual CPU whose timer the hypervisor delivers late (on the
// development VM an idle vCPU 1 takes almost none) is sampled less than its time.
struct ProfileSummary {
  struct Cpu {
    std::uint64_t samples = 0;
    std::uint64_t idle = 0;
    std::uint64_t tracing = 0;  // tracing functions and bpftrace's own process
    std::uint64_t user = 0;
    std::uint64_t busy = 0;
    std::map<std::string, std::uint64_t> groups;  // busy samples by group
    double share(std::uint64_t n) const {
      return busy > 0 ? static_cast<double>(n) / static_cast<double>(busy) : 0.0;
    }
  };
  double window_s = 0;  // first to last sample, any CPU
  double expected_samples_per_cpu() const { return window_s * kProfileHz; }
  std::uint64_t samples = 0;
  std::uint64_t idle = 0;
  std::uint64_t tracing = 0;
  std::uint64_t tracer_process = 0;  // the part of `tracing` taken in bpftrace's own process
  std::uint64_t user = 0;
  std::uint64_t busy = 0;  // samples − idle − tracing (user space included)
  // Samples counted by process but in neither the function map nor the user-space count (a
  // map that filled up): should be 0.
  std::uint64_t unrecorded = 0;
  std::map<std::string, std::uint64_t> groups;  // busy samples by group, "user" included
  // Most first (ties by name).
  std::vector<std::pair<std::string, std::uint64_t>> functions;          // busy kernel ones
  std::vector<std::pair<std::string, std::uint64_t>> idle_functions;     // what counted as idle
  std::vector<std::pair<std::string, std::uint64_t>> tracing_functions;  // ... as tracing
  std::vector<std::pair<std::string, std::uint64_t>> chains;  // busy chains, "f <- caller <- ..."
  std::uint64_t chain_samples = 0;                            // all chains, any class
  // Of the irqs_off_deferred samples: which enable point, and its first caller that is not an
  // enable point or a paravirt thunk (where the interrupts were probably turned off).
  std::vector<std::pair<std::string, std::uint64_t>> deferred_at;
  std::vector<std::pair<std::string, std::uint64_t>> deferred_callers;
  // By the interrupted task's name (comm), most first: idle samples are the idle task's
  // ("swapper/N"), softirq work is whichever task it interrupted or "ksoftirqd/N".
  std::vector<std::pair<std::string, std::uint64_t>> processes;
  std::map<std::uint32_t, Cpu> cpus;
  std::uint64_t group(std::string_view name) const;
  double share(std::uint64_t n) const {
    return busy > 0 ? static_cast<double>(n) / static_cast<double>(busy) : 0.0;
  }
};
// `online_cpus` are listed in `cpus` even when they took no sample.
ProfileSummary summarize_profile(const ProfileSamples& s,
                                 const std::vector<std::uint32_t>& online_cpus = {});

// Every busy group's share of the busy samples.
std::map<std::string, double> group_shares(const std::map<std::string, std::uint64_t>& groups,
                                           std::uint64_t busy);
// The group shares with each CPU's samples weighted by that CPU's busy time (`busy_us`, from
// /proc/stat) instead of by how many samples it took: what the shares would be had every CPU been
// sampled at the same rate. CPUs without busy samples or without a time are left out; empty when
// none is left.
std::map<std::string, double> cpu_weighted_group_shares(
    const ProfileSummary& p, const std::map<std::uint32_t, double>& busy_us);

// "irqs-off 28.0% copy 18.3% csum 0.0% ...": the busy groups' shares, in profile_groups() order.
std::string profile_group_line(const std::map<std::string, double>& shares);

}  // namespace skbsim::sim::measure
