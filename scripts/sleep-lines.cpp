// sleep-lines.cpp — how cold a CPU's caches are after a sleep of a given length: the lines probe
// of `skbsim measure` (docs/measure.md, "Work after a sleep") with the sleep and the buffer as
// arguments, for choosing them. Not part of the build:
//
//   g++ -O2 -std=c++20 -o /tmp/sleep-lines scripts/sleep-lines.cpp
//   /tmp/sleep-lines CPU KB SLEEP_US   (e.g. 1 256 1000)
//
// Pinned to CPU, it chases through the cache lines of a KB-kilobyte buffer in a shuffled cycle
// (each load's address is the last load's value), 31 times a pass right after another and a pass
// right after a sleep of SLEEP_US, and prints both medians in ns per line and their ratio.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include <sched.h>

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kWordsPerLine = 64 / sizeof(std::uint64_t);
constexpr int kSamples = 31;

double pass_ns(const std::vector<std::uint64_t>& words, std::size_t lines) {
  std::uint64_t at = 0;
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < lines; ++i) {
    at = words[at];
  }
  asm volatile("" : "+r"(at));
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() /
         static_cast<double>(lines);
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: sleep-lines CPU KB SLEEP_US\n");
    return 2;
  }
  const int cpu = std::atoi(argv[1]);
  const std::size_t kb = std::strtoul(argv[2], nullptr, 10);
  const long sleep_us = std::atol(argv[3]);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (kb == 0 || sleep_us < 0 || sched_setaffinity(0, sizeof set, &set) != 0) {
    std::fprintf(stderr, "sleep-lines: bad CPU, KB or SLEEP_US\n");
    return 2;
  }
  std::vector<std::uint64_t> words(kb * 1024 / sizeof(std::uint64_t));
  const std::size_t lines = words.size() / kWordsPerLine;
  std::vector<std::size_t> order(lines);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin() + 1, order.end(), std::mt19937_64{42});
  for (std::size_t i = 0; i < lines; ++i) {
    words[order[i] * kWordsPerLine] = order[(i + 1) % lines] * kWordsPerLine;
  }
  std::vector<double> hot;
  std::vector<double> after;
  pass_ns(words, lines);
  for (int i = 0; i < kSamples; ++i) {
    hot.push_back(pass_ns(words, lines));
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    after.push_back(pass_ns(words, lines));
  }
  const double h = median(hot);
  const double a = median(after);
  std::printf("cpu %d, %zu KB, sleep %ld us: hot %.2f ns a line, after the sleep %.2f (x%.2f)\n",
              cpu, kb, sleep_us, h, a, a / h);
  return 0;
}
