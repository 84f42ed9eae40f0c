// text_util: the commands' names for core's string helpers (core/text_util.hpp).
#pragma once

#include <string>
#include <string_view>

#include "core/text_util.hpp"

namespace aqs::cmdline {
using core::ascii_lower;
using core::ascii_upper;
using core::split;

// User text inside a one-line error message: at most 80 bytes ("..." marks
// a cut), control characters as '?'.
inline std::string shown(std::string_view s) {
  std::string out(s.substr(0, 80));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  if (s.size() > 80) out += "...";
  return out;
}
}  // namespace aqs::cmdline
