#pragma once
// calibrate.hpp — fitting a cost preset's named parameters to measured references.
//
// The residuals are the relative errors (predicted - measured) / measured of every CPU figure the
// scenarios' reference blocks hold (local and remote utilisation and service demand, and the local
// host's µs/KB in each kernel-profile group of reference.profile_groups); throughput
// is an input of those scenarios (their stated bottleneck), not a residual. The fit is bounded
// least squares: Levenberg-Marquardt on the logarithm of each parameter (so it stays positive)
// with a finite-difference Jacobian, clamped to the physical bounds CostPreset::bounds() gives.
// Deterministic: the same inputs give the same preset, which is what lets CI re-run the fit.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cost_preset.hpp"
#include "sim/scenario.hpp"

namespace skbsim::sim {

// A kernel-profile group's µs/KB as a fitted figure: "profile:ip" (reference.profile_groups).
inline constexpr std::string_view kProfileFigurePrefix = "profile:";

struct Residual {
  std::string scenario;
  std::string figure;  // "cpu_util_pct", ...
  double measured = 0;
  double predicted = 0;
  double error_pct() const { return 100.0 * (predicted - measured) / measured; }
};

struct FitResult {
  CostPreset preset;
  std::vector<std::string> free;
  std::vector<Residual> residuals;
  double rms_pct = 0;
  int iterations = 0;
};

// Every figure of every scenario, predicted with `preset` in place of each scenario's own.
std::vector<Residual> evaluate(const std::vector<Scenario>& scenarios, const CostPreset& preset);
// Fits the `free` parameters of `start` to the scenarios' references.
FitResult fit(const std::vector<Scenario>& scenarios, const CostPreset& start,
              const std::vector<std::string>& free);

struct LeaveOneOut {
  std::string scenario;
  std::vector<Residual> predicted;  // the held-out scenario's figures, from a fit without it
};
std::vector<LeaveOneOut> leave_one_out(const std::vector<Scenario>& scenarios,
                                       const CostPreset& start,
                                       const std::vector<std::string>& free);

// The "fit" record written into a fitted preset: the command, the free parameters with their
// values, the residuals.
nlohmann::ordered_json fit_record(const FitResult& f, const std::string& command);

}  // namespace skbsim::sim
