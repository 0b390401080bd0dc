// measure_speed.cpp — the speed probe: fixed work timed on each CPU.

#include "sim/measure_speed.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace skbsim::sim::measure {
namespace {

constexpr long kAluSteps = 5'000'000;  // ~10 ms at 2 ns a step
constexpr int kSyscalls = 10'000;      // ~10 ms at 1 µs (a PVM guest), ~1 ms on bare metal
constexpr int kWakeRoundTrips = 500;   // ~12 ms at 25 µs

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

bool pin_to(std::uint32_t cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

double alu_probe_ns() {
  std::uint64_t x = 1;
  const auto t0 = Clock::now();
  for (long i = 0; i < kAluSteps; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;  // Knuth's MMIX LCG
    asm volatile("" : "+r"(x));  // one step after another, never folded or vectorised
  }
  return ns_since(t0) / kAluSteps;
}

double syscall_probe_ns() {
  const auto t0 = Clock::now();
  for (int i = 0; i < kSyscalls; ++i) {
    syscall(SYS_getppid);  // the raw call: glibc could cache getpid-like answers
  }
  return ns_since(t0) / kSyscalls;
}

// A byte to the partner pinned on `b` and a byte back, kWakeRoundTrips times, from `a`.
std::optional<double> wake_probe_us(std::uint32_t a, std::uint32_t b) {
  std::array<int, 2> there{-1, -1};
  std::array<int, 2> back{-1, -1};
  if (pipe(there.data()) != 0) {
    return std::nullopt;
  }
  if (pipe(back.data()) != 0) {
    close(there[0]);
    close(there[1]);
    return std::nullopt;
  }
  bool ok = pin_to(a);
  std::thread partner([&] {
    pin_to(b);
    char c = 0;
    for (int i = 0; i < kWakeRoundTrips; ++i) {
      if (read(there[0], &c, 1) != 1 || write(back[1], &c, 1) != 1) {
        break;
      }
    }
  });
  char c = 'x';
  const auto t0 = Clock::now();
  for (int i = 0; ok && i < kWakeRoundTrips; ++i) {
    ok = write(there[1], &c, 1) == 1 && read(back[0], &c, 1) == 1;
  }
  const double ns = ns_since(t0);
  close(there[1]);  // a partner still reading sees EOF
  partner.join();
  for (const int fd : {there[0], back[0], back[1]}) {
    close(fd);
  }
  return ok ? std::optional<double>(ns / kWakeRoundTrips / 1000.0) : std::nullopt;
}

// A cyclic chase through every cache line of a kLineChaseBytes buffer in a shuffled order. Each
// load's address is the value the last one read, so neither a stride prefetcher nor out-of-order
// execution hides where a line comes from (an adjacent-line prefetch may still bring a neighbour):
// a pass takes what the lines' places in the cache cost.
class LineChase {
 public:
  LineChase() : words_(kLineChaseBytes / sizeof(std::uint64_t)) {
    std::vector<std::size_t> order(lines());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::shuffle(order.begin() + 1, order.end(), std::mt19937_64{42});  // one cycle from line 0
    for (std::size_t i = 0; i < order.size(); ++i) {
      words_[order[i] * kWordsPerLine] = order[(i + 1) % order.size()] * kWordsPerLine;
    }
  }

  // ns per line of one pass through the whole cycle.
  double pass_ns() const {
    std::uint64_t at = 0;
    asm volatile("" : : "r"(words_.data()) : "memory");  // the buffer escapes: no load moves up
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < lines(); ++i) {
      at = words_[at];
    }
    asm volatile("" : "+r"(at));  // the chase's end is used: the loads stay
    return ns_since(t0) / static_cast<double>(lines());
  }

 private:
  static constexpr std::size_t kLineBytes = 64;  // x86-64 and most arm64 cores
  static constexpr std::size_t kWordsPerLine = kLineBytes / sizeof(std::uint64_t);
  std::size_t lines() const { return words_.size() / kWordsPerLine; }

  std::vector<std::uint64_t> words_;
};

static_assert(kLineSamples % 2 == 1);

double median_of(std::array<double, kLineSamples> v) {
  std::nth_element(v.begin(), v.begin() + kLineSamples / 2, v.end());
  return v[kLineSamples / 2];
}

// The lines probe on the calling thread's CPU: kLineSamples times a hot pass, a sleep of
// kLineSleepUs and a pass right after it.
void line_probe(const LineChase& chase, CpuSpeed& s) {
  std::array<double, kLineSamples> hot{};
  std::array<double, kLineSamples> after_sleep{};
  chase.pass_ns();  // brings the buffer into this CPU's caches
  for (int i = 0; i < kLineSamples; ++i) {
    hot[i] = chase.pass_ns();
    std::this_thread::sleep_for(std::chrono::microseconds(kLineSleepUs));
    after_sleep[i] = chase.pass_ns();
  }
  s.hot_line_ns = median_of(hot);
  s.after_sleep_line_ns = median_of(after_sleep);
}

template <typename Get>
double mean_over(const std::map<std::uint32_t, CpuSpeed>& cpus, Get get) {
  double sum = 0;
  for (const auto& [cpu, s] : cpus) {
    sum += get(s);
  }
  return cpus.empty() ? 0.0 : sum / static_cast<double>(cpus.size());
}

}  // namespace

double SpeedProbe::alu_ns() const {
  return mean_over(cpus, [](const CpuSpeed& s) { return s.alu_ns; });
}

double SpeedProbe::syscall_ns() const {
  return mean_over(cpus, [](const CpuSpeed& s) { return s.syscall_ns; });
}

double SpeedProbe::hot_line_ns() const {
  return mean_over(cpus, [](const CpuSpeed& s) { return s.hot_line_ns; });
}

double SpeedProbe::after_sleep_line_ns() const {
  return mean_over(cpus, [](const CpuSpeed& s) { return s.after_sleep_line_ns; });
}

SpeedProbe probe_speed(const std::vector<std::uint32_t>& cpus) {
  cpu_set_t original;
  const bool restore = pthread_getaffinity_np(pthread_self(), sizeof original, &original) == 0;
  SpeedProbe p;
  const LineChase chase;
  std::vector<std::uint32_t> pinned;
  for (const std::uint32_t cpu : cpus) {
    if (!pin_to(cpu)) {
      continue;
    }
    pinned.push_back(cpu);
    CpuSpeed& s = p.cpus[cpu];
    s.alu_ns = alu_probe_ns();
    s.syscall_ns = syscall_probe_ns();
    line_probe(chase, s);
  }
  if (pinned.size() >= 2) {
    p.wake_round_trip_us = wake_probe_us(pinned[0], pinned[1]);
  }
  if (restore) {
    pthread_setaffinity_np(pthread_self(), sizeof original, &original);
  }
  return p;
}

double RunSpeed::alu_ns() const {
  return (before.alu_ns() + after.alu_ns()) / 2;
}

double RunSpeed::syscall_ns() const {
  return (before.syscall_ns() + after.syscall_ns()) / 2;
}

namespace {

// The mean of the sides that have the figure (0 when neither has).
double mean_of_probed(double before, double after) {
  if (before > 0 && after > 0) {
    return (before + after) / 2;
  }
  return std::max(before, after);
}

}  // namespace

double RunSpeed::hot_line_ns() const {
  return mean_of_probed(before.hot_line_ns(), after.hot_line_ns());
}

double RunSpeed::after_sleep_line_ns() const {
  return mean_of_probed(before.after_sleep_line_ns(), after.after_sleep_line_ns());
}

std::optional<double> RunSpeed::wake_round_trip_us() const {
  if (!before.wake_round_trip_us || !after.wake_round_trip_us) {
    return std::nullopt;
  }
  return (*before.wake_round_trip_us + *after.wake_round_trip_us) / 2;
}

namespace {

void keep_min(std::optional<double>& best, double v) {
  if (v > 0 && (!best || v < *best)) {
    best = v;
  }
}

// Appends to `why` when `v` is beyond `slack` × `best`.
void check_side(std::ostringstream& why, const char* name, const char* unit, double v,
                const std::optional<double>& best, double slack, const char* side) {
  if (!best || v <= slack * *best) {
    return;
  }
  if (why.tellp() > 0) {
    why << "; ";
  }
  why << name << " " << v << " " << unit << " > " << slack << " x " << *best << " (" << side << ")";
}

}  // namespace

void SpeedYardstick::add(const SpeedProbe& p) {
  if (p.cpus.empty()) {
    return;
  }
  keep_min(alu_ns, p.alu_ns());
  keep_min(syscall_ns, p.syscall_ns());
  if (p.wake_round_trip_us) {
    keep_min(wake_round_trip_us, *p.wake_round_trip_us);
  }
}

std::string unsteady_reason(const RunSpeed& run, const SpeedYardstick& best) {
  std::ostringstream why;
  why.precision(4);
  for (const auto& [side, p] : {std::pair<const char*, const SpeedProbe*>{"before", &run.before},
                                {"after", &run.after}}) {
    if (p->cpus.empty()) {
      continue;
    }
    check_side(why, "alu", "ns", p->alu_ns(), best.alu_ns, kAluSlack, side);
    check_side(why, "syscall", "ns", p->syscall_ns(), best.syscall_ns, kSyscallSlack, side);
  }
  return why.str();
}

}  // namespace skbsim::sim::measure
