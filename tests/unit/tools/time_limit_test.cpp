// Unit tests of Slurm time-limit parsing and duration display.
#include <doctest/doctest.h>

#include <string>

#include <cstdlib>
#include <ctime>

#include "cmdline/time_limit.hpp"
#include "core/begin_time.hpp"
#include "cmdline/usage_error.hpp"

using namespace aqs::cmdline;

TEST_CASE("every Slurm time format parses to seconds") {
  CHECK(parse_time_limit("60") == 3600);                  // minutes
  CHECK(parse_time_limit("5") == 300);
  CHECK(parse_time_limit("1:30") == 90);                  // minutes:seconds
  CHECK(parse_time_limit("90:00") == 5400);
  CHECK(parse_time_limit("03:00:00") == 3 * 3600);        // hours:minutes:seconds
  CHECK(parse_time_limit("48:00:00") == 48 * 3600);
  CHECK(parse_time_limit("4-12") == (4 * 24 + 12) * 3600);  // days-hours
  CHECK(parse_time_limit("1-0:30") == 24 * 3600 + 30 * 60); // days-hours:minutes
  CHECK(parse_time_limit("2-02:30:00") == (2 * 24 + 2) * 3600 + 30 * 60);  // days-hours:minutes:seconds
  CHECK(parse_time_limit("0-0:0:1") == 1);
}

TEST_CASE("UNLIMITED, INFINITE and zero mean no limit") {
  CHECK(parse_time_limit("UNLIMITED") == 0);
  CHECK(parse_time_limit("infinite") == 0);
  CHECK(parse_time_limit("Unlimited") == 0);
  CHECK(parse_time_limit("0") == 0);
}

TEST_CASE("malformed time limits are one-line errors that quote the input") {
  for (const char* bad : {"", "abc", "-5", "5-", "1:2:3:4", "1-2:3:4:5", "1:60", "1:00:60", "1:60:00",
                          "1-24", "1-2-3", "1.5", " 5", "5 ", "+5", ":5", "5:", "1--2", "1234567890",
                          "999999999-0"}) {
    CAPTURE(bad);
    try {
      parse_time_limit(bad);
      FAIL("accepted");
    } catch (const usage_error& e) {
      const std::string what = e.what();
      CHECK(what.find("invalid time limit '" + std::string(bad) + "'") == 0);
      CHECK(what.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("durations display as Slurm's squeue shows them") {
  CHECK(format_duration(0) == "UNLIMITED");
  CHECK(format_duration(59) == "00:00:59");
  CHECK(format_duration(3600 + 61) == "01:01:01");
  CHECK(format_duration(86400 * 2 + 3600 * 2 + 60 * 30) == "2-02:30:00");
  CHECK(parse_time_limit(format_duration(98765)) == 98765);
}

TEST_CASE("--begin: Slurm's forms against a given now, in local time; others are one line") {
  setenv("TZ", "UTC", 1);
  tzset();
  const std::int64_t now = 1'764'300'000;  // 2025-11-28T03:20:00Z
  const std::int64_t midnight = 1'764'288'000;
  using aqs::core::parse_begin_time;
  CHECK(parse_begin_time("now", now) == now);
  CHECK(parse_begin_time("now+60", now) == now + 60);
  CHECK(parse_begin_time("now+2hours", now) == now + 7200);
  CHECK(parse_begin_time("now+1day", now) == now + 86400);
  CHECK(parse_begin_time("16:00", now) == midnight + 16 * 3600);
  CHECK(parse_begin_time("02:00", now) == midnight + 86400 + 2 * 3600);  // passed today: tomorrow
  CHECK(parse_begin_time("4:00 pm", now) == midnight + 16 * 3600);
  CHECK(parse_begin_time("tomorrow", now) == midnight + 86400);
  CHECK(parse_begin_time("midnight", now) == midnight + 86400);
  CHECK(parse_begin_time("noon", now) == midnight + 12 * 3600);
  CHECK(parse_begin_time("2025-12-01", now) == midnight + 3 * 86400);
  CHECK(parse_begin_time("2025-12-01T08:30", now) == midnight + 3 * 86400 + 8 * 3600 + 1800);
  CHECK(parse_begin_time("12/01", now) == midnight + 3 * 86400);
  CHECK(parse_begin_time("12/01/25", now) == midnight + 3 * 86400);
  for (const char* bad : {"", "later", "now-5", "now+", "now+5fortnights", "25:00", "2025-13-01", "2025-12-01x",
                          "12/40"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_begin_time(bad, now), aqs::core::usage_error);
  }
}
