#pragma once
// plot.hpp — pictures of what skbsim writes, drawn by gnuplot (`skbsim plot`, `validate --plot`,
// `baseline --update`). Three kinds, each a gnuplot script, the data it reads and the pictures:
//
//   results, baselines --> breakdown.{gp,dat}              stacked bars: each scenario's host
//                                                         CPU by symbol group (copy, checksum,
//                                                         skb, protocol, device, memory, other)
//                      --> predicted-vs-measured.{gp,dat}  one panel per measured figure: the
//                                                         measured value, its tolerance band,
//                                                         and the prediction
//   sweep <stem>.json  --> <stem>-cpu.gp, <stem>-service-demand.gp, <stem>.dat
//                                                         the first axis on x, one line per
//                                                         combination of the other axes
//
// X.gp draws X.svg and X.png (the formats asked for) in its own directory, so `gnuplot X.gp` there
// draws them again by hand. Reading and checking the inputs, and composing the scripts and data,
// is pure (plot_files); only draw() runs gnuplot. Bad input is an InputError before anything is
// written. The downside of gnuplot: pictures need the program (Debian gnuplot-nox) at run time.

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/output_dir.hpp"

namespace skbsim::sim {

// One input: a result JSON (`skbsim run --format json`, docs/results.md), a baseline file
// (results/, `skbsim baseline`) or a sweep.json (`skbsim sweep`), told apart by their keys.
struct PlotInput {
  std::string file;  // as the user named it, for error lines
  nlohmann::json doc;
};

struct PlotOptions {
  std::vector<std::string> formats = {"svg", "png"};
  std::string host;       // the host to draw; empty: each result's local host (see plot.cpp)
  bool breakdown = true;  // the kinds to draw, when their inputs are there
  bool predicted = true;
  bool sweeps = true;
};

// Reads a plot input (InputError when it is not JSON or cannot be read).
PlotInput load_plot_input(const std::string& path);

// The gnuplot scripts and data files for `inputs`, by file name. Throws InputError, naming the
// file and JSON pointer, for an input that is none of the three kinds or lacks what a plot needs,
// and when nothing at all can be drawn.
OutputFiles plot_files(const std::vector<PlotInput>& inputs, const PlotOptions& o);

// Runs gnuplot on every `*.gp` of `files` inside `dir` (where they are written) and checks each
// drew its pictures. Throws InputError when gnuplot is missing or fails.
void draw(const std::filesystem::path& dir, const OutputFiles& files,
          const std::vector<std::string>& formats);

// plot_files(), then written into `out` completely or not at all, drawn there by gnuplot.
// Returns the names of the pictures.
std::vector<std::string> write_plots(const std::filesystem::path& out,
                                     const std::vector<PlotInput>& inputs, const PlotOptions& o);

}  // namespace skbsim::sim
