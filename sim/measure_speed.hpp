#pragma once
// measure_speed.hpp — how fast this machine runs right now: a fixed piece of work timed on each
// CPU before and after every `skbsim measure` run (docs/measure.md, "The speed probe").
//
// On a virtual machine the same configuration can cost twice the CPU per KB twenty minutes later
// without any steal time showing: the host runs the vCPU slower, or takes it away in slices the
// guest does not see. The probe gives each run a yardstick taken on the same CPUs within a second
// of it, so two campaigns can be told apart by speed rather than by guesswork.
//
// Four probes, each timed with CLOCK_MONOTONIC (wall time: a vCPU taken away shows as slow):
//   alu      a dependent multiply-add chain, pure core speed and preemption;
//   syscall  getppid() round trips, the user/kernel switch a virtual machine may make expensive
//            (on a PVM guest each one is a switch through the hypervisor);
//   wake     a one-byte pipe ping-pong between two CPUs: a sleeping task woken from another CPU,
//            try_to_wake_up(), the IPI, __schedule() — the path a paced stream pays per burst.
//            Context, never judged: on KVM it doubles while runs cost what they did.
//   lines    a chase through the cache lines of 256 KB, hot and right after a 1 ms sleep, longer
//            than KVM's halt polling: how cold the caches are when a halted vCPU runs again (the
//            host ran other work on its core, woke it on another core, or let the core sleep
//            deeply), as a paced stream meets them after each write. Context, never judged.
// The downside: it is a sample of about 0.1 s on each side of a run, not the run itself; a speed
// change in the middle of a run is not seen.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace skbsim::sim::measure {

struct CpuSpeed {
  double alu_ns = 0;      // ns per step of the multiply-add chain
  double syscall_ns = 0;  // ns per getppid() round trip
  // ns per cache line of the chase: hot (just run) and in the pass right after a 1 ms sleep; the
  // medians of kLineSamples of each. 0 when not probed.
  double hot_line_ns = 0;
  double after_sleep_line_ns = 0;
};

// The lines probe: the buffer it chases through, the sleep before each timed pass, the passes.
inline constexpr std::size_t kLineChaseBytes = std::size_t{256} * 1024;
inline constexpr int kLineSleepUs = 1000;
inline constexpr int kLineSamples = 9;  // odd: the median is one of them

struct SpeedProbe {
  std::map<std::uint32_t, CpuSpeed> cpus;
  std::optional<double> wake_round_trip_us;  // nullopt with fewer than two CPUs

  // Means over the CPUs (0 when none was probed).
  double alu_ns() const;
  double syscall_ns() const;
  double hot_line_ns() const;
  double after_sleep_line_ns() const;
};

// Runs the probes on each CPU of `cpus` (the calling thread is pinned to each in turn and its
// affinity restored after), the wake-up probe between the first two. A CPU the thread cannot be
// pinned to is left out. Takes about 40 ms per CPU plus 25 ms.
SpeedProbe probe_speed(const std::vector<std::uint32_t>& cpus);

// A run's probes: before it starts and after it ends.
struct RunSpeed {
  SpeedProbe before;
  SpeedProbe after;
  // The figures of the two sides together: means of alu_ns / syscall_ns / the lines probe's, and
  // of the wake-up.
  double alu_ns() const;
  double syscall_ns() const;
  double hot_line_ns() const;
  double after_sleep_line_ns() const;
  std::optional<double> wake_round_trip_us() const;
};

// The machine's best speed seen in this invocation: each figure's minimum over every probe (a
// side's mean over its CPUs). Starts empty; `skbsim measure` fills it with a few probes before
// the first run and with every run's probes after.
struct SpeedYardstick {
  std::optional<double> alu_ns;
  std::optional<double> syscall_ns;
  std::optional<double> wake_round_trip_us;
  void add(const SpeedProbe& p);
};

// How much slower than the yardstick a side of a run may be and still count as the machine's
// normal speed. Chosen from this project's PVM guest (docs/measure.md, "The speed probe"): in its
// normal mode the probes vary by about 10 % (alu); in its slow mode alu is 1.3–2.3× and getppid
// 1.35× the best. The wake-up round trip (4–7× there) is not judged: on the KVM guests it doubled
// from probe to probe while the runs cost what the others did, and its minimum is one lucky probe.
inline constexpr double kAluSlack = 1.20;
inline constexpr double kSyscallSlack = 1.20;

// "" when both sides of the run are within the slacks of `best`, else which figure was not, e.g.
// "alu 1.654 ns > 1.20 x 1.133 (after)". Figures `best` lacks are not checked; neither are the
// wake-up round trip and the lines probe, which are context.
std::string unsteady_reason(const RunSpeed& run, const SpeedYardstick& best);

}  // namespace skbsim::sim::measure
