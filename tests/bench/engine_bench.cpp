// engine_bench — the whole simulator on the 2007 container scenario: simulated packet-hops (one
// skb through one device transmit) per second of wall time, and simulated seconds per second.
#include <benchmark/benchmark.h>

#include "sim/examples.hpp"

namespace {

using namespace skbsim::sim;

void BM_Thread2007(benchmark::State& state) {
  const auto cost = uniform_cost(2.8, 300, 1.2, 2.5, 1.0);
  ScenarioSpec spec = thread2007(static_cast<Thread2007>(state.range(0)), cost);
  spec.warmup_s = 0.01;
  spec.duration_s = 0.2;
  std::uint64_t hops = 0;
  std::uint64_t events = 0;
  for (auto _ : state) {
    const RunResult r = run_scenario(spec);
    hops += r.hops;
    events += r.events;
    benchmark::DoNotOptimize(r.throughput_mbps);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(hops));
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["hops_per_run"] =
      benchmark::Counter(static_cast<double>(hops), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_Thread2007)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace
