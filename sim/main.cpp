// skbsim: the command line. Everything lives in sim/cli.cpp; this only hands over argv.
#include "sim/cli.hpp"

int main(int argc, char** argv) { return skbsim::sim::cli_main(argc, argv); }
