#pragma once
// cli.hpp — the `skbsim` command line: subcommands, their flags, exit codes
// (0 ok, 1 the model hit a kernel BUG condition, 2 bad input).

namespace skbsim::sim {

int cli_main(int argc, char** argv);

}  // namespace skbsim::sim
