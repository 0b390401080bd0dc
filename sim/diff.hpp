#pragma once
// diff.hpp — `skbsim diff A B`: what changed between two scenarios (run here) or two results
// files (`skbsim run --format json`), and where it comes from (docs/whatif.md).
//
// Per host, the change in CPU utilisation is split into parts that add up to it exactly:
//
//   CPU_X = k_X * C_X          C_X = cycles per data segment (the sum over symbols, c_X,s),
//                              k_X = CPU points per cycle/segment = CPU_X / C_X (the segment rate,
//                                    the clock and the CPUs counted, measured-window effects)
//   CPU_B - CPU_A = sum_s (c_B,s - c_A,s) * k_B   +   C_A * (k_B - k_A)
//                   \___ per symbol, at B's rate ___/   \__ segment rate: A's work at B's rate __/
//
// so each symbol's CPU points are its change in cycles per segment priced at B's segment rate, and
// one more part says what the change of rate alone did. Each symbol that moved gets a "why" made
// from the data: its calls and bytes per segment on both sides, the calls of the kernel functions
// known to call it (a table of call sites from the kernel source, not of scenarios), and for a
// free, the allocations it mirrors.
//
// The downside of working from results files: cycles per symbol are whole cycles over the window
// and counters are rounded as docs/results.md says, so a part is exact to about 1e-4 cycles/seg.

#include <iosfwd>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace skbsim::sim {

// One side of a diff.
struct DiffInput {
  std::string file;               // as the user gave it
  nlohmann::ordered_json result;  // a results document (docs/results.md)
  // For a scenario: its merged document ("extends" applied, "preset" as resolved).
  std::optional<nlohmann::ordered_json> scenario;
};

// Reads `path`: a results file (it has "segments" and "hosts" with a "profile") as it is, anything
// else as a scenario, which is validated and run. Throws InputError for bad input, SkbBug when
// the run hits a kernel BUG condition.
DiffInput load_diff_input(const std::string& path);

// The diff as JSON (docs/whatif.md): inputs that differ (two scenarios), throughput, and per host
// (all hosts of both, or only `host` when not empty) CPU, service demand, cycles per segment and
// its parts, by symbol group and by symbol, each symbol with its "why". Throws InputError when
// `host` is not a host of both.
nlohmann::ordered_json diff_json(const DiffInput& a, const DiffInput& b, const std::string& host);

// The same as text.
void print_diff_text(std::ostream& out, const nlohmann::ordered_json& diff);

}  // namespace skbsim::sim
