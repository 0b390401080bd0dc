#pragma once
// input_error.hpp — bad input to the command line: a file that does not parse, a value of the
// wrong type, an unknown key, an operation the chosen kernel does not have. One of the three
// kinds of error (style.md §5): thrown only in sim/, caught only by the command line, which
// prints what() as the one line on stderr and exits with code 2, having printed nothing else.
//
// what() is always one line, "<file>: <json pointer>: <what was expected>, <what was found>":
//
//   ops.json: /ops/3/size: expected an unsigned integer, got "12"
//
// The pointer is RFC 6901 (so "~" and "/" inside keys read "~0" and "~1"); the whole document,
// whose pointer is the empty string, shows as "/" so the line keeps its three fields. Readers
// that validate other files (scenarios, models) derive from it or throw it directly.

#include <stdexcept>
#include <string>
#include <utility>

namespace skbsim::sim {

class InputError : public std::runtime_error {
 public:
  // `file` as the user named it, `json_pointer` where in it (empty = the whole document),
  // `message` "expected ..., got ..." without a trailing newline.
  InputError(std::string file, std::string json_pointer, std::string message)
      : std::runtime_error(compose(file, json_pointer, message)),
        file_(std::move(file)),
        pointer_(std::move(json_pointer)),
        message_(std::move(message)) {}

  const std::string& file() const noexcept { return file_; }
  const std::string& pointer() const noexcept { return pointer_; }
  const std::string& message() const noexcept { return message_; }

 private:
  static std::string compose(const std::string& file, const std::string& pointer,
                             const std::string& message) {
    // A command-line flag ("--figure") has no document to point into: "--figure: expected ...".
    const bool flag = file.rfind("--", 0) == 0 && pointer.empty();
    std::string line = flag ? file + ": " + message
                            : file + ": " + (pointer.empty() ? std::string("/") : pointer) + ": " +
                                  message;
    for (char& c : line) {  // one line, whatever a message or a file name carried
      if (c == '\n' || c == '\r') {
        c = ' ';
      }
    }
    return line;
  }

  std::string file_;
  std::string pointer_;
  std::string message_;
};

}  // namespace skbsim::sim
