#include "sim/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/kernel_groups.hpp"
#include "sim/measure_report.hpp"
#include "sim/report.hpp"
#include "sim/run.hpp"

namespace skbsim::sim {
namespace {

void collect(const Scenario& sc, const RunResult& r, std::vector<Residual>& out) {
  const Reference& ref = *sc.reference;
  // The hosts validate takes the figures from: the reference's, else the first flow's ends.
  const HostResult* local = local_host(sc, r);
  const HostResult* remote = remote_host(sc, r);
  for (const ReferenceFigure& f : ref.figures()) {
    if (!is_fitted_figure(f)) {
      continue;
    }
    if (const auto p = predicted_figure(r, local, remote, f.key)) {
      out.push_back({sc.name, f.key, f.value, *p});
    }
  }
  // Counts per wire segment (a reference with counts alone names no host: the first flow's
  // sender's). A count validate compares absolutely (under one per hundred segments) has no
  // relative error worth fitting.
  if (ref.per_segment && local != nullptr) {
    for (const auto& [key, measured] : ref.per_segment->counters) {
      const auto p = predicted_counter(r, *local, key);
      if (p && measure::count_relative(key, measured)) {
        out.push_back({sc.name, std::string(kCountFigurePrefix) + key, measured, *p});
      }
    }
  }
  // A kernel profile's groups, µs/KB on the local host. A group too small for a relative error
  // (validate compares it absolutely) is left out.
  if (ref.profile_groups && local != nullptr) {
    const std::map<std::string, double> model = group_us_per_kb(*local);
    for (const auto& [group, measured] : ref.profile_groups->us_per_kb) {
      if (measured >= kProfileGroupRelativeFloorUsPerKb) {
        const auto it = model.find(group);
        out.push_back({sc.name, std::string(kProfileFigurePrefix) + group, measured,
                       it == model.end() ? 0.0 : it->second});
      }
    }
  }
}

std::vector<double> residual_vector(const std::vector<Residual>& rs) {
  std::vector<double> v;
  for (const Residual& r : rs) {
    v.push_back((r.predicted - r.measured) / r.measured);
  }
  return v;
}

// `v` to `digits` significant digits (0 stays 0).
double significant(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) {
    return v;
  }
  const double scale = std::pow(10.0, digits - 1 - std::floor(std::log10(std::abs(v))));
  return std::round(v * scale) / scale;
}

double sum_sq(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) {
    s += x * x;
  }
  return s;
}

// Solves (A) x = b for a small dense symmetric positive system (Gaussian elimination with
// partial pivoting).
std::vector<double> solve(std::vector<std::vector<double>> a, std::vector<double> b) {
  const std::size_t n = b.size();
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t p = c;
    for (std::size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[p][c])) {
        p = r;
      }
    }
    std::swap(a[c], a[p]);
    std::swap(b[c], b[p]);
    if (std::abs(a[c][c]) < 1e-300) {
      continue;
    }
    for (std::size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (std::size_t k = c; k < n; ++k) {
        a[r][k] -= f * a[c][k];
      }
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(n, 0.0);
  for (std::size_t i = n; i-- > 0;) {
    double s = b[i];
    for (std::size_t k = i + 1; k < n; ++k) {
      s -= a[i][k] * x[k];
    }
    x[i] = std::abs(a[i][i]) < 1e-300 ? 0.0 : s / a[i][i];
  }
  return x;
}

}  // namespace

bool is_fitted_figure(const ReferenceFigure& f) {
  return f.key != "throughput_mbps" && f.has_relative_error();
}

std::vector<Residual> evaluate(const std::vector<Scenario>& scenarios, const CostPreset& preset) {
  std::vector<Residual> out;
  const CostModel model = preset.model();
  for (const Scenario& sc : scenarios) {
    if (!sc.reference) {
      continue;
    }
    ScenarioSpec spec = sc.spec;
    spec.cost = model;
    collect(sc, run_scenario(spec), out);
  }
  return out;
}

FitResult fit(const std::vector<Scenario>& scenarios, const CostPreset& start,
              const std::vector<std::string>& free,
              const std::map<std::string, double>& priors, const std::vector<double>& starts) {
  FitResult f{start, free, {}, 0, 0, priors, {}};
  const std::size_t n = free.size();
  std::vector<double> x0(n);  // log of each parameter's starting value
  std::vector<double> lo(n);
  std::vector<double> hi(n);
  for (std::size_t i = 0; i < n; ++i) {
    const ParamBounds b = start.bounds(free[i]);
    lo[i] = std::log(std::max(b.lo, 1e-9));
    hi[i] = std::log(b.hi);
    x0[i] = std::clamp(std::log(std::max(start.get(free[i]), 1e-9)), lo[i], hi[i]);
  }
  auto apply = [&](CostPreset& p, const std::vector<double>& v) {
    for (std::size_t i = 0; i < n; ++i) {
      p.set(free[i], std::exp(v[i]));
    }
  };
  std::vector<double> prior_sd(n, 0.0);  // 0: no prior
  for (std::size_t i = 0; i < n; ++i) {
    if (const auto it = priors.find(free[i]); it != priors.end()) {
      prior_sd[i] = std::log(it->second);
    }
  }
  auto residuals_at = [&](const std::vector<double>& v) {
    CostPreset p = start;
    apply(p, v);
    std::vector<double> r = residual_vector(evaluate(scenarios, p));
    for (std::size_t i = 0; i < n; ++i) {
      if (prior_sd[i] > 0) {
        r.push_back((v[i] - x0[i]) / prior_sd[i]);
      }
    }
    return r;
  };
  // One Levenberg-Marquardt descent from `at`, which it leaves at the minimum it reaches; the
  // cost there, and the iterations it took.
  auto descend = [&](std::vector<double>& at, int& iterations) {
    std::vector<double> r = residuals_at(at);
    double cost = sum_sq(r);
    double lambda = 1e-3;
    for (int it = 0; it < 60 && n > 0; ++it) {
      iterations = it + 1;
      // Jacobian by forward differences in log space. The step is 1% of the parameter: the model
      // is a discrete simulation, so a CPU-bound run's figures move in small steps (which segments
      // fall inside the window), and a much smaller step measures that grain, not the slope.
      std::vector<std::vector<double>> jac(r.size(), std::vector<double>(n));
      for (std::size_t j = 0; j < n; ++j) {
        std::vector<double> xj = at;
        const double h = 1e-2;
        xj[j] += h;
        const std::vector<double> rj = residuals_at(xj);
        for (std::size_t i = 0; i < r.size(); ++i) {
          jac[i][j] = (rj[i] - r[i]) / h;
        }
      }
      std::vector<std::vector<double>> jtj(n, std::vector<double>(n, 0.0));
      std::vector<double> jtr(n, 0.0);
      for (std::size_t i = 0; i < r.size(); ++i) {
        for (std::size_t a = 0; a < n; ++a) {
          jtr[a] -= jac[i][a] * r[i];
          for (std::size_t b = 0; b < n; ++b) {
            jtj[a][b] += jac[i][a] * jac[i][b];
          }
        }
      }
      bool improved = false;
      for (int tries = 0; tries < 12 && !improved; ++tries) {
        auto m = jtj;
        for (std::size_t a = 0; a < n; ++a) {
          m[a][a] += lambda * (jtj[a][a] + 1e-12);
        }
        const std::vector<double> step = solve(m, jtr);
        std::vector<double> xn = at;
        for (std::size_t a = 0; a < n; ++a) {
          xn[a] = std::clamp(at[a] + step[a], lo[a], hi[a]);
        }
        const std::vector<double> rn = residuals_at(xn);
        const double cn = sum_sq(rn);
        if (cn < cost) {
          const double gain = cost - cn;
          at = xn;
          r = rn;
          cost = cn;
          lambda = std::max(lambda / 5, 1e-9);
          improved = true;
          if (gain < 1e-4 * cost) {
            it = 1000;  // converged
          }
        } else {
          lambda *= 10;
        }
      }
      if (!improved) {
        break;
      }
    }
    return cost;
  };
  // Several starts, spread in log space, and the lowest minimum: parameters that trade off
  // against each other (call_scale against a group's scale) leave the cost with more than one
  // minimum, and a descent from one start can end in a worse one or at a bound. The starts are
  // the preset's values and every free parameter halved, then doubled (within its bounds:
  // kFitStarts, unless the caller names others); the first of equal minima wins, so the fit
  // stays deterministic, and a descent does not depend on the others.
  double best_cost = std::numeric_limits<double>::infinity();
  std::vector<double> best = x0;
  for (const double factor : starts) {
    std::vector<double> xs = x0;
    for (std::size_t i = 0; i < n; ++i) {
      xs[i] = std::clamp(x0[i] + std::log(factor), lo[i], hi[i]);
    }
    int iterations = 0;
    const double c = descend(xs, iterations);
    f.iterations += iterations;
    Descent d{factor, {}, c};
    for (std::size_t i = 0; i < n; ++i) {
      d.params[free[i]] = std::exp(xs[i]);
    }
    f.descents.push_back(std::move(d));
    if (c < best_cost) {
      best_cost = c;
      best = xs;
      f.kept = f.descents.size() - 1;
    }
    if (n == 0) {
      break;
    }
  }
  apply(f.preset, best);
  f.residuals = evaluate(scenarios, f.preset);
  double s = 0;
  for (const Residual& res : f.residuals) {
    s += res.error_pct() * res.error_pct();
  }
  f.rms_pct = f.residuals.empty() ? 0 : std::sqrt(s / static_cast<double>(f.residuals.size()));
  return f;
}

std::vector<LeaveOneOut> leave_one_out(const std::vector<Scenario>& scenarios,
                                       const CostPreset& start,
                                       const std::vector<std::string>& free,
                                       const std::map<std::string, double>& priors,
                                       const std::vector<double>& starts) {
  std::vector<LeaveOneOut> out;
  for (std::size_t i = 0; i < scenarios.size(); ++i) {
    if (!scenarios[i].reference) {
      continue;
    }
    std::vector<Scenario> rest;
    for (std::size_t k = 0; k < scenarios.size(); ++k) {
      if (k != i) {
        rest.push_back(scenarios[k]);
      }
    }
    const FitResult f = fit(rest, start, free, priors, starts);
    out.push_back({scenarios[i].name, evaluate({scenarios[i]}, f.preset)});
  }
  return out;
}

nlohmann::ordered_json fit_record(const FitResult& f, const std::string& command) {
  nlohmann::ordered_json j;
  j["command"] = command;
  j["method"] =
      "bounded least squares (Levenberg-Marquardt on log parameters) of the relative CPU errors";
  if (!f.priors.empty()) {
    nlohmann::ordered_json widths = nlohmann::ordered_json::object();
    for (const auto& [param, width] : f.priors) {
      widths[param] = width;
    }
    j["priors"] = {{"width_factors", widths},
                   {"about", "a log-normal prior on each named parameter, centred on the starting "
                             "preset's value, the factor times or 1/factor of it at one standard "
                             "deviation (calibrate --prior PARAM=FACTOR)"}};
  }
  nlohmann::ordered_json params = nlohmann::ordered_json::object();
  for (const std::string& p : f.free) {
    params[p] = f.preset.get(p);
  }
  j["free"] = params;
  // Each start's minimum: how far apart the minima are says how firmly the figures fix the
  // parameters. The cost to six significant digits: a close fit's minima differ in the seventh
  // decimal. Which one was kept is recorded too, since rounded costs may tie where the
  // unrounded ones did not (the replay in CI redoes that descent).
  nlohmann::ordered_json descents = nlohmann::ordered_json::array();
  for (const Descent& d : f.descents) {
    nlohmann::ordered_json at = nlohmann::ordered_json::object();
    for (const std::string& p : f.free) {
      at[p] = std::round(d.params.at(p) * 1e6) / 1e6;
    }
    descents.push_back(
        {{"start", d.start_factor}, {"cost", significant(d.cost, 6)}, {"free", at}});
  }
  j["descents"] = descents;
  j["kept_descent"] = f.kept;
  j["iterations"] = f.iterations;
  j["rms_error_pct"] = std::round(f.rms_pct * 1000) / 1000;
  nlohmann::ordered_json res = nlohmann::ordered_json::array();
  for (const Residual& r : f.residuals) {
    res.push_back({{"scenario", r.scenario},
                   {"figure", r.figure},
                   {"measured", r.measured},
                   {"predicted", std::round(r.predicted * 10000) / 10000},
                   {"error_pct", std::round(r.error_pct() * 1000) / 1000}});
  }
  j["residuals"] = res;
  return j;
}

}  // namespace skbsim::sim
