// text_util: small string helpers shared by the cmdline parsers (internal to aqs::cmdline).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace aqs::cmdline {

// The fields of s between each `sep`, empty ones included: "a,,b" is
// {"a", "", "b"} and "" is {""}, so callers see and reject empty fields.
// The views point into s.
inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

}  // namespace aqs::cmdline
