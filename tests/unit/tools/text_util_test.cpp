// Unit tests of the string helpers the cmdline parsers share.
#include <doctest/doctest.h>

#include <string_view>
#include <vector>

#include "cmdline/text_util.hpp"

using aqs::cmdline::split;
using fields = std::vector<std::string_view>;

TEST_CASE("split keeps empty fields so the parsers can reject them") {
  CHECK(split("afterok:1:2", ':') == fields{"afterok", "1", "2"});
  CHECK(split("1,,2", ',') == fields{"1", "", "2"});
  CHECK(split("1,", ',') == fields{"1", ""});
  CHECK(split(",", ',') == fields{"", ""});
  CHECK(split("", ',') == fields{""});
  CHECK(split("no separator", ',') == fields{"no separator"});
}
