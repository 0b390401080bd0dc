#pragma once
// sweep.hpp — `skbsim sweep`: one scenario run over a grid of input values, in parallel, into one
// results table (docs/whatif.md).
//
//   SCENARIO.json --load_scenario--> merged document (the "extends" chain applied)
//        |  for each grid point: set every axis path to its value, then the pseudo-paths
//        v
//   point documents --scenario_from_json--> Scenarios (all validated before anything runs)
//        |  N worker threads, one run_scenario each (independent, deterministic)
//        v
//   rows in grid order --> sweep.json + sweep.csv, written atomically
//
// An axis is one `--set PATH=VALUES` (or one entry of a study's "set"). PATH is an RFC 6901
// pointer into the merged document; a token holding `*` matches every member (or array element)
// it fits, e.g. /devices/*/mtu; several pointers joined by commas move together (a linked axis:
// each value is an array with one value per pointer). `/x-containers` is a pseudo-path: the number
// of copies of the first flow's container (its namespace, device pair, host route and flow).
// The grid is the cartesian product of the axes, the first axis varying slowest.
//
// Invariant: the table is a function of the inputs only; the number of worker threads never
// changes a byte of it. The downside of validating every point first is memory: every point's
// Scenario is held until the end (a few kilobytes each).

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario.hpp"

namespace skbsim::sim {

// The pseudo-path that replicates the first flow's container N times.
inline constexpr std::string_view kContainersPath = "/x-containers";

// One axis: the paths it sets (several for a linked axis) and its values in order, one entry per
// value with one JSON value per path.
struct SweepAxis {
  std::vector<std::string> paths;
  std::vector<std::vector<nlohmann::ordered_json>> points;
};

// Parses a value list: items separated by commas outside brackets, braces and quotes; each item a
// range (A..B*F geometric, A..B+S or A..B arithmetic, both ends included when reached), a JSON
// value, or else a bare string (2.6.20, 6.x). Throws InputError(`file`, `pointer`, ...) for an
// empty item, malformed JSON or a bad range.
std::vector<nlohmann::ordered_json> parse_sweep_values(std::string_view text,
                                                       const std::string& file,
                                                       const std::string& pointer);

// Parses one "--set PATH[,PATH...]=VALUES" (errors name `file`, e.g. "--set").
SweepAxis parse_sweep_set(std::string_view arg, const std::string& file);

// The same from a study's "set" entry: `paths` as its key, `values` an array of values or a string
// in the --set value syntax; errors point at `pointer` in `file`.
SweepAxis sweep_axis_from_json(const std::string& paths, const nlohmann::ordered_json& values,
                               const std::string& file, const std::string& pointer);

// The grid: for each point, the index of its value on every axis; the first axis varies slowest.
std::vector<std::vector<std::size_t>> sweep_grid(const std::vector<SweepAxis>& axes);

struct SweepPlan {
  std::string scenario;  // the path as given (for a study: resolved against the study's directory)
  std::vector<SweepAxis> axes;
};

// One point of the grid, validated: its inputs (path -> value, in axis order) and its Scenario
// (whose `document` is the point's merged document, containers replicated).
struct SweepPoint {
  nlohmann::ordered_json inputs;
  Scenario scenario;
};

// Applies the values at `index` (one per axis) to `base` (load_scenario of plan.scenario): the
// pointer paths in axis order, then /x-containers. Throws InputError naming the point.
SweepPoint sweep_point(const Scenario& base, const SweepPlan& plan,
                       const std::vector<std::size_t>& index);

// A ready-made study (scenarios/studies/*.json): a sweep plan plus what its plot shows.
struct Study {
  std::string file;
  std::string description;
  SweepPlan plan;
  std::string x;     // the axis path on the x axis
  std::string y;     // "cpu_util_pct" or "service_demand_us_per_kb"
  std::string host;  // whose CPU
};

// Reads and checks a study file (InputError naming the JSON pointer on any mistake).
Study load_study(const std::string& path);

// A run of the sweep failed (the model hit a kernel BUG condition): the point and the reason.
class SweepRunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SweepTable {
  std::string json;  // sweep.json
  std::string csv;   // sweep.csv
  std::size_t points = 0;
};

// Validates every point, then runs them on `jobs` threads. Throws InputError for a bad point
// (before anything runs) and SweepRunError for the first failed run in grid order.
// `progress`: a line on stderr as points finish.
SweepTable run_sweep_plan(const SweepPlan& plan, unsigned jobs, bool progress);

}  // namespace skbsim::sim
