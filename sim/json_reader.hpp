#pragma once
// json_reader.hpp — a read-only view of one JSON node that knows its file and JSON pointer, so
// every complaint about a scenario or a preset is one InputError line naming where it is:
//   scenarios/b.json: /devices/2/mtu: expected an integer in [68, 65535], got "1500"

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/input_error.hpp"

namespace skbsim::sim {

// One RFC 6901 reference token: "~" -> "~0", "/" -> "~1".
std::string json_pointer_token(std::string_view key);

// Parses `path` (InputError with line:column on a syntax error, or when it cannot be read).
nlohmann::json load_json_file(const std::string& path, const std::string& shown_as);

class JsonReader {
 public:
  JsonReader(const nlohmann::json& node, std::string file, std::string pointer = {})
      : node_(&node), file_(std::move(file)), pointer_(std::move(pointer)) {}

  const nlohmann::json& node() const noexcept { return *node_; }
  const std::string& file() const noexcept { return file_; }
  const std::string& pointer() const noexcept { return pointer_; }

  bool has(std::string_view key) const;
  // The member `key` (InputError "expected key" when missing or when this is not an object).
  JsonReader child(std::string_view key) const;
  std::optional<JsonReader> optional_child(std::string_view key) const;
  JsonReader at(std::size_t i) const;
  std::vector<JsonReader> array() const;  // this node as an array

  std::string string() const;
  bool boolean() const;
  double number_in(double lo, double hi) const;
  std::uint64_t uint_in(std::uint64_t lo, std::uint64_t hi) const;
  std::string enum_of(std::initializer_list<std::string_view> allowed) const;

  // Members with defaults.
  std::string string_or(std::string_view key, std::string fallback) const;
  bool bool_or(std::string_view key, bool fallback) const;
  double number_or(std::string_view key, double lo, double hi, double fallback) const;
  std::uint64_t uint_or(std::string_view key, std::uint64_t lo, std::uint64_t hi,
                        std::uint64_t fallback) const;

  // Every member must be one of `known` (typos are errors, not silently ignored).
  void reject_unknown_keys(std::initializer_list<std::string_view> known) const;
  [[noreturn]] void fail(const std::string& message) const;

 private:
  std::string found() const;  // how the node reads in "got ..."
  const nlohmann::json* node_;
  std::string file_;
  std::string pointer_;
};

}  // namespace skbsim::sim
