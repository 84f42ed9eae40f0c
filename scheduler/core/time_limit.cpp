// time_limit: Slurm time-limit formats.
#include "core/time_limit.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "core/text_util.hpp"
#include "core/usage_error.hpp"

namespace aqs::core {

namespace {

[[noreturn]] void bad(std::string_view text, std::string_view why) {
  std::string shown(text.substr(0, 64));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  throw usage_error("invalid time limit '" + shown + "': " + std::string(why) +
                    " (use minutes, minutes:seconds, hours:minutes:seconds, days-hours, "
                    "days-hours:minutes, days-hours:minutes:seconds or UNLIMITED)");
}

// A non-empty run of at most 9 decimal digits.
std::int64_t field(std::string_view text, std::string_view f) {
  if (f.empty()) bad(text, "empty field");
  if (f.size() > 9) bad(text, "number too large");
  std::int64_t v = 0;
  for (const char c : f) {
    if (c < '0' || c > '9') bad(text, "not a number");
    v = v * 10 + (c - '0');
  }
  return v;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::int64_t parse_time_limit(std::string_view text) {
  if (iequals(text, "UNLIMITED") || iequals(text, "INFINITE")) return 0;
  if (text.empty()) bad(text, "empty");
  std::int64_t days = 0;
  std::string_view rest = text;
  const bool has_days = text.find('-') != std::string_view::npos;
  if (has_days) {
    const auto dash = text.find('-');
    days = field(text, text.substr(0, dash));
    rest = text.substr(dash + 1);
  }
  const auto parts = split(rest, ':');
  std::int64_t hours = 0, minutes = 0, seconds = 0;
  auto below = [&](std::int64_t v, std::int64_t limit, std::string_view what) {
    if (v >= limit) bad(text, std::string(what) + " must be below " + std::to_string(limit));
    return v;
  };
  if (has_days) {
    // D-H, D-H:M, D-H:M:S
    if (parts.size() > 3) bad(text, "too many fields");
    hours = below(field(text, parts[0]), 24, "hours");
    if (parts.size() > 1) minutes = below(field(text, parts[1]), 60, "minutes");
    if (parts.size() > 2) seconds = below(field(text, parts[2]), 60, "seconds");
  } else if (parts.size() == 1) {
    minutes = field(text, parts[0]);
  } else if (parts.size() == 2) {
    minutes = field(text, parts[0]);
    seconds = below(field(text, parts[1]), 60, "seconds");
  } else if (parts.size() == 3) {
    hours = field(text, parts[0]);
    minutes = below(field(text, parts[1]), 60, "minutes");
    seconds = below(field(text, parts[2]), 60, "seconds");
  } else {
    bad(text, "too many fields");
  }
  // Each field has at most 9 digits, so this cannot overflow int64.
  const std::int64_t total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds;
  if (total > k_max_walltime_s) bad(text, "longer than 10 years");
  return total;
}

std::string format_duration(std::int64_t seconds) {
  if (seconds <= 0) return "UNLIMITED";
  const std::int64_t d = seconds / 86400;
  const std::int64_t h = seconds / 3600 % 24;
  const std::int64_t m = seconds / 60 % 60;
  const std::int64_t s = seconds % 60;
  auto two = [](std::int64_t v) { return (v < 10 ? "0" : "") + std::to_string(v); };
  std::string out;
  if (d > 0) out = std::to_string(d) + "-";
  return out + two(h) + ":" + two(m) + ":" + two(s);
}

}  // namespace aqs::core
