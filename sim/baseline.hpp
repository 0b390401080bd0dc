#pragma once
// baseline.hpp — regression baselines (`skbsim baseline --check | --update`): the committed
// predictions of every scenario under results/, and the check that the model still makes them.
//
//   scenarios/thread2007/container.json --run--> results/thread2007/container.json  (compared)
//   every scenario                       ------> results/plots/breakdown.svg, ...  (drawn)
//                                        ------> results/runtime.json              (not compared)
//
// A baseline file is compact and diff-friendly: throughput, per host the CPU utilisation, service
// demand, CPU by symbol group and the main per-segment counters, drops, hazards, and the measured
// figures next to the predicted ones; not the profile. The model is deterministic integer time,
// so the same sources give the same figures in every build type; the check still allows a small
// relative tolerance (0.5 % by default) so that a change in the last rounded digit is not a
// failure. The simulator's own speed (hops per second of wall time) varies from run to run and
// machine to machine: it goes into runtime.json, which the check never reads.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/run.hpp"
#include "sim/scenario.hpp"

namespace skbsim::sim {

inline constexpr double kBaselineTolerancePct = 0.5;

// The baseline document of one run. `scenario_file` is the scenario's path relative to the
// scenario directory it was found in (e.g. "thread2007/container.json"), which is also where the
// document goes under results/.
nlohmann::ordered_json baseline_json(const Scenario& sc, const RunResult& r,
                                     const std::string& scenario_file);

// One figure that differs between a committed baseline and a fresh one.
struct Moved {
  std::string scenario;
  std::string figure;    // JSON pointer without the leading '/', e.g. "hosts/A/cpu_util_pct"
  std::string baseline;  // as committed ("-" when absent)
  std::string now;       // as computed ("-" when absent)
  std::string change;    // "+1.29%", or "" when not a number
};

// Every figure of `now` and `base` that moved: numbers by more than `tolerance_pct` percent of
// the committed value (any change from zero), everything else (strings, lists) when not equal.
// Also returns, in `compared`, how many figures were looked at.
std::vector<Moved> compare_baseline(const std::string& scenario, const nlohmann::json& base,
                                    const nlohmann::ordered_json& now, double tolerance_pct,
                                    std::size_t& compared);

}  // namespace skbsim::sim
