// Unit tests of the SWF reader: real files' quirks, malformed lines, gzip and plain files.
#include <doctest/doctest.h>
#include <zlib.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>

#include "sim/swf.hpp"

using aqs::sim::parse_swf;
using aqs::sim::read_swf;

namespace {

const char* k_sample =
    "; Version: 2.2\n"
    ";   MaxProcs: 100\n"
    "\n"
    "    1        0 964980  97225   56     -1    -1   56 210000    -1  1   1   1  -1 -1 -1 -1 -1\n"
    "2\t327952\t291900\t9382\t80\t-1\t-1\t80\t14400\t-1\t1\t2\t2\t-1\t-1\t-1\t-1\t-1\r\n"
    "   \t  \n"
    "3 10 -1 -1 4 -1 -1 4 100 -1 0 7 1 -1 -1 -1 -1 -1\n";

}  // namespace

TEST_CASE("an SWF file with header, tabs, runs of spaces, CRLF and blank lines is read") {
  auto t = parse_swf(k_sample);
  REQUIRE(t.max_procs.has_value());
  CHECK(*t.max_procs == 100);
  CHECK(t.malformed == 0);
  REQUIRE(t.jobs.size() == 3);
  CHECK(t.jobs[0].line == 4);
  CHECK(t.jobs[0].run == 97225);
  CHECK(t.jobs[0].req_procs == 56);
  CHECK(t.jobs[0].req_time == 210000);
  CHECK(t.jobs[1].submit == 327952);
  CHECK(t.jobs[1].user == 2);
  CHECK(t.jobs[2].run == -1);  // -1 is kept; the filter decides
}

TEST_CASE("malformed lines are counted and reported with their line numbers, never fatal") {
  std::string text = std::string(k_sample) +
                     "4 20 -1 5 2 -1 -1 2 100\n"                                      // line 8: too few
                     "5 20 -1 5 2 -1 -1 two 100 -1 1 1 1 -1 -1 -1 -1 -1\n"            // line 9: not a number
                     "6 20 -1 5 2 -1 -1 2 100 -1 1 1 1 -1 -1 -1 -1 -1 99\n"           // line 10: too many
                     "7 -5 -1 5 2 -1 -1 2 100 -1 1 1 1 -1 -1 -1 -1 -1\n"              // line 11: negative submit
                     "9 20 -1 5 1e30 -1 -1 2 100 -1 1 1 1 -1 -1 -1 -1 -1\n"           // line 12: out of range
                     "8 30 -1 5 2 -1 -1 2 100 -1 1 1 1 -1 -1 -1 -1 -1";               // no final newline
  auto t = parse_swf(text);
  CHECK(t.jobs.size() == 4);
  CHECK(t.malformed == 5);
  REQUIRE(t.errors.size() == 5);
  CHECK(t.errors[0].line == 8);
  CHECK(t.errors[0].reason == "9 fields, expected 18");
  CHECK(t.errors[1].line == 9);
  CHECK(t.errors[1].reason == "field 8 is not a number: 'two'");
  CHECK(t.errors[2].line == 10);
  CHECK(t.errors[3].line == 11);
  CHECK(t.errors[4].line == 12);
  CHECK(t.errors[4].reason == "field 5 is out of range: '1e30'");
  auto few = parse_swf(text, 1);
  CHECK(few.malformed == 5);
  CHECK(few.errors.size() == 1);
}

TEST_CASE("random garbage never crashes the reader (seeded)") {
  std::mt19937 rng(7);
  const std::string alphabet = "0123456789 -\t;.eE+xinfa\n\r\v";
  for (int round = 0; round < 2000; ++round) {
    std::string s(std::uniform_int_distribution<int>(0, 400)(rng), ' ');
    for (char& c : s) c = alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(rng)];
    auto t = parse_swf(s);
    CHECK(t.jobs.size() + t.malformed <= static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')) + 1);
  }
}

TEST_CASE("gzip-compressed and plain files read the same, a missing file is an error naming it") {
  auto dir = std::filesystem::temp_directory_path() / ("aqs_swf_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto plain = dir / "t.swf", gz = dir / "t.swf.gz";
  { std::ofstream(plain) << k_sample; }
  gzFile f = gzopen(gz.c_str(), "wb");
  REQUIRE(f != nullptr);
  gzputs(f, k_sample);
  gzclose(f);
  auto a = read_swf(plain.string()), b = read_swf(gz.string());
  CHECK(a.jobs.size() == 3);
  CHECK(b.jobs.size() == 3);
  CHECK(b.max_procs == a.max_procs);
  CHECK(b.jobs[1].run == a.jobs[1].run);
  std::filesystem::remove_all(dir);
  CHECK_THROWS_WITH_AS(read_swf((dir / "none.swf").string()),
                       doctest::Contains("cannot open"), std::runtime_error);
}
