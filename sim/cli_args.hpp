#pragma once
// cli_args.hpp — the one way a `skbsim` subcommand reads its arguments (Boost.Program_options):
// on a bad flag it prints "<who>: <what went wrong>", the usage line and the options to stderr
// and returns false, so every command fails the same way (exit 2, nothing on stdout).

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <boost/program_options.hpp>

namespace skbsim::sim {

inline bool parse_args(const std::vector<std::string>& args,
                       const boost::program_options::options_description& visible,
                       const boost::program_options::options_description& all,
                       const boost::program_options::positional_options_description& pos,
                       boost::program_options::variables_map& vm, const std::string& usage_line,
                       std::string_view who = "skbsim") {
  namespace po = boost::program_options;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << who << ": " << e.what() << "\n\nUsage: " << usage_line << "\n\n" << visible;
    return false;
  }
  return true;
}

// A whole argument word as a finite number (strtod's syntax: "2", "0.5", "1e3"), or nullopt when
// anything is left over or it overflows.
inline std::optional<double> parse_double(std::string_view s) {
  if (s.empty()) {
    return std::nullopt;
  }
  const std::string str(s);
  char* end = nullptr;
  const double v = std::strtod(str.c_str(), &end);
  if (end != str.c_str() + str.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

// A whole argument word as an unsigned 64-bit integer (decimal digits only: no sign, no
// fraction), or nullopt when anything is left over or it is out of range.
inline std::optional<std::uint64_t> parse_uint64(std::string_view s) {
  if (s.empty()) {
    return std::nullopt;
  }
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return std::nullopt;
  }
  return v;
}

}  // namespace skbsim::sim
