#include "sim/json_reader.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace skbsim::sim {
namespace {

std::string format_number(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

std::string json_pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

nlohmann::json load_json_file(const std::string& path, const std::string& shown_as) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(shown_as, "", "expected a readable JSON file, got no such file");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    std::size_t line = 1;
    std::size_t col = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw InputError(shown_as, "",
                     "expected valid JSON, got a syntax error at line " + std::to_string(line) +
                         ", column " + std::to_string(col));
  }
}

std::string JsonReader::found() const {
  const nlohmann::json& n = *node_;
  if (n.is_string()) {
    return n.dump();
  }
  if (n.is_object()) {
    return "an object";
  }
  if (n.is_array()) {
    return "an array";
  }
  if (n.is_null()) {
    return "null";
  }
  return n.dump();
}

void JsonReader::fail(const std::string& message) const {
  throw InputError(file_, pointer_, message);
}

bool JsonReader::has(std::string_view key) const {
  return node_->is_object() && node_->contains(std::string(key));
}

JsonReader JsonReader::child(std::string_view key) const {
  if (!node_->is_object()) {
    fail("expected an object, got " + found());
  }
  auto it = node_->find(std::string(key));
  if (it == node_->end()) {
    throw InputError(file_, pointer_ + "/" + json_pointer_token(key),
                     "expected key \"" + std::string(key) + "\", got nothing");
  }
  return JsonReader(*it, file_, pointer_ + "/" + json_pointer_token(key));
}

std::optional<JsonReader> JsonReader::optional_child(std::string_view key) const {
  if (!has(key)) {
    if (!node_->is_object()) {
      fail("expected an object, got " + found());
    }
    return std::nullopt;
  }
  return child(key);
}

JsonReader JsonReader::at(std::size_t i) const {
  return JsonReader((*node_)[i], file_, pointer_ + "/" + std::to_string(i));
}

std::vector<JsonReader> JsonReader::array() const {
  if (!node_->is_array()) {
    fail("expected an array, got " + found());
  }
  std::vector<JsonReader> out;
  for (std::size_t i = 0; i < node_->size(); ++i) {
    out.push_back(at(i));
  }
  return out;
}

std::string JsonReader::string() const {
  if (!node_->is_string()) {
    fail("expected a string, got " + found());
  }
  return node_->get<std::string>();
}

bool JsonReader::boolean() const {
  if (!node_->is_boolean()) {
    fail("expected true or false, got " + found());
  }
  return node_->get<bool>();
}

double JsonReader::number_in(double lo, double hi) const {
  if (!node_->is_number()) {
    fail("expected a number in [" + format_number(lo) + ", " + format_number(hi) + "], got " +
         found());
  }
  const double v = node_->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    fail("expected a number in [" + format_number(lo) + ", " + format_number(hi) + "], got " +
         found());
  }
  return v;
}

std::uint64_t JsonReader::uint_in(std::uint64_t lo, std::uint64_t hi) const {
  const std::string want =
      "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got ";
  if (!node_->is_number_integer()) {
    fail(want + found());
  }
  if (node_->is_number_unsigned()) {
    const auto v = node_->get<std::uint64_t>();
    if (v < lo || v > hi) {
      fail(want + found());
    }
    return v;
  }
  const auto v = node_->get<std::int64_t>();
  if (v < 0 || static_cast<std::uint64_t>(v) < lo || static_cast<std::uint64_t>(v) > hi) {
    fail(want + found());
  }
  return static_cast<std::uint64_t>(v);
}

std::string JsonReader::enum_of(std::initializer_list<std::string_view> allowed) const {
  std::string list;
  for (auto a : allowed) {
    list += list.empty() ? "" : ", ";
    list += "\"" + std::string(a) + "\"";
  }
  if (!node_->is_string()) {
    fail("expected one of " + list + ", got " + found());
  }
  const std::string v = node_->get<std::string>();
  for (auto a : allowed) {
    if (v == a) {
      return v;
    }
  }
  fail("expected one of " + list + ", got " + found());
}

std::string JsonReader::string_or(std::string_view key, std::string fallback) const {
  auto c = optional_child(key);
  return c ? c->string() : std::move(fallback);
}

bool JsonReader::bool_or(std::string_view key, bool fallback) const {
  auto c = optional_child(key);
  return c ? c->boolean() : fallback;
}

double JsonReader::number_or(std::string_view key, double lo, double hi, double fallback) const {
  auto c = optional_child(key);
  return c ? c->number_in(lo, hi) : fallback;
}

std::uint64_t JsonReader::uint_or(std::string_view key, std::uint64_t lo, std::uint64_t hi,
                                  std::uint64_t fallback) const {
  auto c = optional_child(key);
  return c ? c->uint_in(lo, hi) : fallback;
}

void JsonReader::reject_unknown_keys(std::initializer_list<std::string_view> known) const {
  if (!node_->is_object()) {
    fail("expected an object, got " + found());
  }
  for (auto it = node_->begin(); it != node_->end(); ++it) {
    bool ok = false;
    for (auto k : known) {
      ok = ok || it.key() == k;
    }
    if (!ok) {
      std::string list;
      for (auto k : known) {
        list += list.empty() ? "" : ", ";
        list += std::string(k);
      }
      throw InputError(file_, pointer_ + "/" + json_pointer_token(it.key()),
                       "expected one of the keys " + list + ", got unknown key \"" + it.key() +
                           "\"");
    }
  }
}

}  // namespace skbsim::sim
