#pragma once
// commands.hpp — the scenario commands of the `skbsim` command line (cli.cpp dispatches to them):
// run, validate, calibrate, and the what-if commands sweep and diff (sweep.cpp, diff.cpp). Each
// takes the arguments after its name and returns the exit code.

#include <string>
#include <vector>

namespace skbsim::sim {

int run_run(const std::vector<std::string>& args);
int run_validate(const std::vector<std::string>& args);
int run_calibrate(const std::vector<std::string>& args);
int run_plot(const std::vector<std::string>& args);      // sim/plot.cpp
int run_baseline(const std::vector<std::string>& args);  // sim/baseline.cpp
int run_measure(const std::vector<std::string>& args);   // sim/measure.cpp
int run_sweep(const std::vector<std::string>& args);  // sweep.cpp
int run_diff(const std::vector<std::string>& args);   // diff.cpp

// Scenario files under `paths` (files as given; directories searched recursively, skipping the
// shared pieces, presets, ops examples and measurement files: shared/, models/, ops/, studies/,
// measurements/), sorted.
std::vector<std::string> scenario_files(const std::vector<std::string>& paths);

}  // namespace skbsim::sim
