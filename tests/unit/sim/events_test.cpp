// Unit tests of the events-file parser: good lines, comments, and each kind of bad line with its number.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "sim/events.hpp"

using namespace aqs::sim;

TEST_CASE("an events file with comments, blank lines, tabs and CRLF ends is read in file order") {
  auto f = parse_events(
      "# suspend job 7 for a while\n"
      "\n"
      "100 7 suspend\r\n"
      "  250.5\t7\tresume   # back\n"
      "   # only a comment\n"
      "0 12 range 2 16\n"
      "90 3 range 4 4");
  CHECK(f.malformed == 0);
  REQUIRE(f.events.size() == 4);
  CHECK(f.events[0].time == 100);
  CHECK(f.events[0].job == 7);
  CHECK(f.events[0].what == trace_event::kind::suspend);
  CHECK(f.events[0].line == 3);
  CHECK(f.events[1].time == 250.5);
  CHECK(f.events[1].what == trace_event::kind::resume);
  CHECK(f.events[1].line == 4);
  CHECK(f.events[2].what == trace_event::kind::range);
  CHECK(f.events[2].min_pe == 2);
  CHECK(f.events[2].max_pe == 16);
  CHECK(f.events[2].line == 6);
  CHECK(to_string(f.events[2].what) == "range");
  CHECK(f.events[3].min_pe == 4);
  CHECK(f.events[3].max_pe == 4);
  CHECK(f.events[3].line == 7);
}

TEST_CASE("bad event lines are reported with their line number and why, and good ones are kept") {
  auto f = parse_events(
      "10 1 suspend\n"      // 1 good
      "10 1 pause\n"        // 2 unknown event
      "ten 1 suspend\n"     // 3 bad time
      "-5 1 suspend\n"      // 4 negative time
      "10 x1 resume\n"      // 5 bad job
      "10 -1 resume\n"      // 6 negative job
      "10 1\n"              // 7 too few fields
      "10 1 suspend now\n"  // 8 too many
      "10 1 range 4\n"      // 9 range without MAX
      "10 1 range 8 4\n"    // 10 MIN > MAX
      "10 1 range 0 4\n"    // 11 MIN 0
      "10 1 range 2 x\n"    // 12 MAX not a number
      "inf 1 suspend\n"     // 13 not finite
      "20 1 resume\n");     // 14 good
  CHECK(f.events.size() == 2);
  CHECK(f.malformed == 12);
  REQUIRE(f.errors.size() == 12);
  for (std::size_t k = 0; k < f.errors.size(); ++k) CHECK(f.errors[k].line == k + 2);
  CHECK(f.errors[0].reason.find("unknown event 'pause' (known: suspend, resume, range)") != std::string::npos);
  CHECK(f.errors[1].reason.find("TIME 'ten'") != std::string::npos);
  CHECK(f.errors[3].reason.find("JOB 'x1'") != std::string::npos);
  CHECK(f.errors[5].reason.find("2 fields") != std::string::npos);
  CHECK(f.errors[6].reason.find("suspend takes TIME JOB suspend, got 4 fields") != std::string::npos);
  CHECK(f.errors[7].reason.find("range takes TIME JOB range MIN MAX") != std::string::npos);
  CHECK(f.errors[8].reason.find("1 <= MIN <= MAX") != std::string::npos);
  CHECK(parse_events("1 1 pause\n2 2 pause\n3 3 pause\n", 2).errors.size() == 2);
  CHECK(parse_events("1 1 pause\n2 2 pause\n3 3 pause\n", 2).malformed == 3);
}

TEST_CASE("an empty events file has no events, and a missing one is an error naming it") {
  CHECK(parse_events("").events.empty());
  CHECK(parse_events("\n# nothing\n").malformed == 0);
  CHECK_THROWS_WITH_AS(read_events("/nonexistent/events.txt"), doctest::Contains("cannot open /nonexistent/events.txt"),
                       std::runtime_error);
}
