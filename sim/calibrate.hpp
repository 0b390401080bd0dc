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

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cost_preset.hpp"
#include "sim/scenario.hpp"

namespace skbsim::sim {

// A kernel-profile group's µs/KB as a fitted figure: "profile:ip" (reference.profile_groups).
inline constexpr std::string_view kProfileFigurePrefix = "profile:";
// A count per wire segment as a fitted figure: "count:tcp_acks_sent"
// (reference.per_segment.counters, one of measure::kValidatedCounters).
inline constexpr std::string_view kCountFigurePrefix = "count:";

struct Residual {
  std::string scenario;
  std::string figure;  // "cpu_util_pct", ...
  double measured = 0;
  double predicted = 0;
  double error_pct() const { return 100.0 * (predicted - measured) / measured; }
};

// One descent of the fit: where it started (the preset's values times `start_factor`) and the
// minimum it reached.
struct Descent {
  double start_factor = 1;
  std::map<std::string, double> params;
  double cost = 0;  // the sum of squared residuals, priors included
};

struct FitResult {
  CostPreset preset;
  std::vector<std::string> free;
  std::vector<Residual> residuals;
  double rms_pct = 0;
  int iterations = 0;
  std::map<std::string, double> priors;  // as given to fit()
  std::vector<Descent> descents;           // every start's minimum; the fit is the lowest
  std::size_t kept = 0;                    // which of them: the first of the lowest
};

// Whether the fit uses a reference figure: a CPU figure, not the throughput (what the load was,
// not what it cost), and not one measured at 0 (a CPU that did nothing: no relative error).
bool is_fitted_figure(const ReferenceFigure& f);

// Every figure of every scenario, predicted with `preset` in place of each scenario's own.
std::vector<Residual> evaluate(const std::vector<Scenario>& scenarios, const CostPreset& preset);
// Fits the `free` parameters of `start` to the scenarios' references. A free parameter named in
// `priors` (parameter -> width factor > 1) also has a log-normal prior centred on its starting
// value, the factor times the value or 1/factor of it at one standard deviation: a residual
// (ln p - ln p0) / ln factor joins the figures' relative errors (a maximum a posteriori fit). It
// conditions a parameter the figures do not pin down alone (a group's scale, which trades off
// against call_scale), where without it the fit may end in any of several minima of nearly equal
// error, or at a bound. The fit's rms error is over the figures alone.
// The descents start from the preset's values times each of `starts` (every free parameter
// alike, within its bounds); the lowest minimum wins, the first of equal ones.
inline const std::vector<double> kFitStarts = {1.0, 0.5, 2.0};
FitResult fit(const std::vector<Scenario>& scenarios, const CostPreset& start,
              const std::vector<std::string>& free,
              const std::map<std::string, double>& priors = {},
              const std::vector<double>& starts = kFitStarts);

struct LeaveOneOut {
  std::string scenario;
  std::vector<Residual> predicted;  // the held-out scenario's figures, from a fit without it
};
std::vector<LeaveOneOut> leave_one_out(const std::vector<Scenario>& scenarios,
                                       const CostPreset& start,
                                       const std::vector<std::string>& free,
                                       const std::map<std::string, double>& priors = {},
                                       const std::vector<double>& starts = kFitStarts);

// The "fit" record written into a fitted preset: the command, the free parameters with their
// values, the residuals.
nlohmann::ordered_json fit_record(const FitResult& f, const std::string& command);

}  // namespace skbsim::sim
