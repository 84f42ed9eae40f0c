// usage_error: a mistake in what the user typed or wrote in a script, reported as one line.
#pragma once

#include <stdexcept>
#include <string>

namespace aqs::core {

// what() is one line without the program name, e.g.
// "invalid time limit '1:2:3:4' for --time: expected minutes, ..."; the
// command prints "fsub: " + what() on stderr and exits non-zero.
class usage_error : public std::runtime_error {
public:
  explicit usage_error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace aqs::core
