#include "sim/cli.hpp"

#include <iostream>

namespace skbsim::sim {

int cli_main(int /*argc*/, char** /*argv*/) {
  std::cerr << "skbsim: not yet\n";
  return 2;
}

}  // namespace skbsim::sim
