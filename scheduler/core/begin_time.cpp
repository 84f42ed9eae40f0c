// begin_time (begin_time.hpp): Slurm's --begin forms.
#include "core/begin_time.hpp"

#include <cctype>
#include <cstdio>
#include <ctime>
#include <string>

#include "core/usage_error.hpp"

namespace aqs::core {

namespace {

[[noreturn]] void refuse(std::string_view text) {
  throw usage_error("invalid --begin time '" + std::string(text) +
                    "' (now+N[seconds|minutes|hours|days|weeks], HH:MM[:SS], midnight, noon, today, tomorrow, "
                    "YYYY-MM-DD[THH:MM[:SS]] or MM/DD[/YY])");
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::int64_t at(std::tm tm) {
  tm.tm_isdst = -1;
  return static_cast<std::int64_t>(std::mktime(&tm));
}

}  // namespace

std::int64_t parse_begin_time(std::string_view text, std::int64_t now) {
  const std::string t = lower(text);
  if (t.empty() || t.size() > 64) refuse(text);
  const std::time_t n = static_cast<std::time_t>(now);
  std::tm today{};
  ::localtime_r(&n, &today);
  std::tm midnight = today;
  midnight.tm_hour = midnight.tm_min = midnight.tm_sec = 0;
  const auto clock_time = [&](int h, int m, int s) {
    std::tm x = midnight;
    x.tm_hour = h;
    x.tm_min = m;
    x.tm_sec = s;
    std::int64_t v = at(x);
    if (v <= now) {  // passed today: tomorrow, as Slurm does
      x.tm_mday += 1;
      v = at(x);
    }
    return v;
  };
  if (t.rfind("now", 0) == 0) {
    if (t.size() == 3) return now;
    if (t[3] != '+') refuse(text);
    std::size_t i = 4;
    std::int64_t count = 0;
    if (i >= t.size() || !std::isdigit(static_cast<unsigned char>(t[i]))) refuse(text);
    for (; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); ++i) {
      count = count * 10 + (t[i] - '0');
      if (count > 100'000'000) refuse(text);
    }
    const std::string unit = t.substr(i);
    std::int64_t mult = 0;
    if (unit.empty() || unit == "s" || unit == "sec" || unit == "secs" || unit == "second" || unit == "seconds") {
      mult = 1;
    } else if (unit == "m" || unit == "min" || unit == "mins" || unit == "minute" || unit == "minutes") {
      mult = 60;
    } else if (unit == "h" || unit == "hour" || unit == "hours") {
      mult = 3600;
    } else if (unit == "d" || unit == "day" || unit == "days") {
      mult = 86400;
    } else if (unit == "w" || unit == "week" || unit == "weeks") {
      mult = 7 * 86400;
    } else {
      refuse(text);
    }
    return now + count * mult;
  }
  if (t == "today" || t == "midnight") {
    if (t == "today") return now;
    std::tm x = midnight;
    x.tm_mday += 1;
    return at(x);
  }
  if (t == "tomorrow") {
    std::tm x = midnight;
    x.tm_mday += 1;
    return at(x);
  }
  if (t == "noon") return clock_time(12, 0, 0);
  if (t == "fika") return clock_time(15, 0, 0);
  if (t == "teatime") return clock_time(16, 0, 0);
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char tail[8] = {0};
  int used = 0;
  // HH:MM[:SS] [am|pm]
  if (std::sscanf(t.c_str(), "%2d:%2d:%2d%n", &h, &mi, &s, &used) == 3 ||
      std::sscanf(t.c_str(), "%2d:%2d%n", &h, &mi, &used) == 2) {
    std::string rest = t.substr(static_cast<std::size_t>(used));
    while (!rest.empty() && rest.front() == ' ') rest.erase(rest.begin());
    if (rest == "pm" && h < 12) h += 12;
    if (rest == "am" && h == 12) h = 0;
    if (!rest.empty() && rest != "am" && rest != "pm") refuse(text);
    if (h > 23 || mi > 59 || s > 59) refuse(text);
    if (t.find('-') == std::string::npos && t.find('/') == std::string::npos) return clock_time(h, mi, s);
  }
  h = mi = s = 0;
  bool parsed = false;
  if (std::sscanf(t.c_str(), "%4d-%2d-%2dt%2d:%2d:%2d%1s", &y, &mo, &d, &h, &mi, &s, tail) == 6 ||
      std::sscanf(t.c_str(), "%4d-%2d-%2dt%2d:%2d%1s", &y, &mo, &d, &h, &mi, tail) == 5 ||
      std::sscanf(t.c_str(), "%4d-%2d-%2d%1s", &y, &mo, &d, tail) == 3) {
    parsed = tail[0] == 0;
  } else if (std::sscanf(t.c_str(), "%2d/%2d/%2d%1s", &mo, &d, &y, tail) == 3) {
    parsed = tail[0] == 0;
    y += 2000;
  } else if (std::sscanf(t.c_str(), "%2d/%2d%1s", &mo, &d, tail) == 2) {
    parsed = tail[0] == 0;
    y = today.tm_year + 1900;
  }
  if (!parsed || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 59 || y < 1970 || y > 2999) {
    refuse(text);
  }
  std::tm x{};
  x.tm_year = y - 1900;
  x.tm_mon = mo - 1;
  x.tm_mday = d;
  x.tm_hour = h;
  x.tm_min = mi;
  x.tm_sec = s;
  return at(x);
}

}  // namespace aqs::core
