// cli.cpp — the `skbsim` command line: global options, then a dispatch over subcommands.
//
//   skbsim [--help] [--version] COMMAND [ARGS...]
//
// Options before COMMAND are skbsim's own; everything after it belongs to the command, which
// parses it with its own Boost.Program_options description. Adding a command is one function
// `int run_<name>(const Args&)` and one row in kCommands. Exit codes: 0 success, 1 the model hit a
// kernel BUG condition (the command still printed its report), 2 bad input or bad usage (nothing
// on stdout; one line on stderr for bad input, the usage for bad flags).

#include "sim/cli.hpp"

#include <algorithm>
#include <array>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <boost/program_options.hpp>

#include "sim/commands.hpp"
#include "sim/input_error.hpp"
#include "sim/ops_runner.hpp"

namespace skbsim::sim {
namespace {

namespace po = boost::program_options;

constexpr std::string_view kVersion = "0.1.0";  // project(skbsim VERSION ...) in CMakeLists.txt
constexpr int kExitUsage = 2;

using Args = std::vector<std::string>;

// ---- skbsim ops -------------------------------------------------------------------------------

constexpr std::string_view kOpsAbout =
    "Runs the sk_buff operations listed in FILE.json on the model of the kernel the file names,\n"
    "and prints as JSON on stdout, for each operation, its result, the work it recorded (bytes\n"
    "copied and checksummed, allocations, per kernel symbol) and the state of every named skb,\n"
    "page and socket afterwards; then every skb, data buffer and page still allocated "
    "(\"leaks\").\n"
    "\n"
    "FILE.json: {\"kernel\": \"2.6.20\" | \"6.x\", \"description\": \"...\", \"ops\": [OP, ...]}\n"
    "  e.g. {\"op\": \"alloc_skb\", \"as\": \"o\", \"size\": 1500},\n"
    "       {\"op\": \"skb_clone\", \"skb\": \"o\", \"as\": \"c\"},\n"
    "       {\"op\": \"skb_cow\", \"skb\": \"c\", \"headroom\": 16}\n"
    "\n"
    "Exit codes: 0 the run completed (leaks are findings, not errors); 1 an operation hit a\n"
    "condition the kernel BUGs on, a use after free, a double free or a broken model invariant\n"
    "(the report ends with that step and its \"error\"); 2 bad input: one line on stderr,\n"
    "FILE: /json/pointer: what was expected, what was found; nothing on stdout.\n";

int run_ops(const Args& args) {
  po::options_description visible("Options");
  visible.add_options()("help,h", "print this help and every operation with its arguments");
  po::options_description hidden;
  hidden.add_options()("file", po::value<std::string>(), "the ops file");
  po::options_description all;
  all.add(visible).add(hidden);
  po::positional_options_description positional;
  positional.add("file", 1);
  const auto usage = [&visible](std::ostream& os) {
    os << "Usage: skbsim ops [--help] FILE.json\n\n" << kOpsAbout << '\n' << visible;
  };

  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "skbsim ops: " << e.what() << "\n\n";
    usage(std::cerr);
    return kExitUsage;
  }
  if (vm.count("help") != 0) {
    usage(std::cout);
    std::cout << '\n' << ops_reference();
    return 0;
  }
  if (vm.count("file") == 0) {
    std::cerr << "skbsim ops: expected FILE.json\n\n";
    usage(std::cerr);
    return kExitUsage;
  }
  const auto& file = vm["file"].as<std::string>();
  OpsResult result;
  try {
    result = run_ops_script(load_ops_script(file));
  } catch (const InputError& e) {
    std::cerr << e.what() << '\n';
    return kExitUsage;
  }
  std::cout << result.json << std::flush;
  if (result.exit_code != 0) {
    std::cerr << result.error << '\n';
  }
  return result.exit_code;
}

// ---- dispatch ---------------------------------------------------------------------------------

struct Command {
  std::string_view name;
  std::string_view summary;  // one line for `skbsim --help`
  int (*run)(const Args& args);
};

constexpr std::array<Command, 9> kCommands = {{
    {"run", "run a scenario: netperf-style figures, reference, profile, trace", &run_run},
    {"validate", "run every scenario with a reference: measured, predicted, error", &run_validate},
    {"calibrate", "fit a cost preset's parameters to measured references", &run_calibrate},
    {"sweep", "run a scenario over a grid of input values in parallel: one table", &run_sweep},
    {"diff", "two scenarios or results: what changed, symbol by symbol, and why", &run_diff},
    {"ops", "run a list of skb operations, print the state after each as JSON", &run_ops},
    {"plot", "draw results, baselines and sweeps with gnuplot (SVG, PNG)", &run_plot},
    {"baseline", "check or update the committed predictions in results/", &run_baseline},
    {"measure", "measure this machine's kernel over veth (root): references to fit", &run_measure},
}};

po::options_description global_options() {
  po::options_description d("Options");
  d.add_options()("help,h", "print this help and exit")("version", "print the version and exit");
  return d;
}

void print_usage(std::ostream& os) {
  os << "Usage: skbsim [--help] [--version] COMMAND [ARGS...]\n\n"
        "Models the Linux sk_buff lifecycle (allocation, clones, copies, copy-on-write, frees)\n"
        "and the bytes each kernel function copies and checksums, on kernels 2.6.20 and 6.x.\n\n"
        "Commands:\n";
  for (const Command& c : kCommands) {
    std::string line = "  " + std::string(c.name);
    line.resize(std::max<std::size_t>(line.size() + 2, 14), ' ');
    os << line << c.summary << '\n';
  }
  os << '\n'
     << global_options()
     << "\nRun 'skbsim COMMAND --help' for a command's arguments.\n"
        "Exit codes: 0 success, 1 the model hit a kernel BUG condition, 2 bad input or usage.\n";
}

}  // namespace

int cli_main(int argc, char** argv) {
  const Args all(argv + 1, argv + argc);
  // skbsim's own options come before the command: the first word not starting with '-'.
  std::size_t i = 0;
  while (i < all.size() && all[i].size() > 1 && all[i][0] == '-') {
    ++i;
  }
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(Args(all.begin(), all.begin() + static_cast<long>(i)))
                  .options(global_options())
                  .run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "skbsim: " << e.what() << "\n\n";
    print_usage(std::cerr);
    return kExitUsage;
  }
  if (vm.count("help") != 0) {
    print_usage(std::cout);
    return 0;
  }
  if (vm.count("version") != 0) {
    std::cout << "skbsim " << kVersion << '\n';
    return 0;
  }
  if (i == all.size()) {
    std::cerr << "skbsim: expected a command\n\n";
    print_usage(std::cerr);
    return kExitUsage;
  }
  for (const Command& c : kCommands) {
    if (c.name == all[i]) {
      return c.run(Args(all.begin() + static_cast<long>(i) + 1, all.end()));
    }
  }
  std::cerr << "skbsim: unknown command '" << all[i] << "'\n\n";
  print_usage(std::cerr);
  return kExitUsage;
}

}  // namespace skbsim::sim
