// Unit tests of the text checks and encoders the job store sends values through.
#include <doctest/doctest.h>

#include <string>

#include "core/utf8.hpp"
#include "store/sql_text.hpp"
#include "store/store_errors.hpp"

using namespace aqs::store;
using namespace std::string_literals;

TEST_CASE("valid UTF-8 is accepted: ASCII, accents, CJK, emoji and right-to-left text") {
  CHECK(aqs::core::is_valid_utf8(""));
  CHECK(aqs::core::is_valid_utf8("plain ascii ;'\"\\"));
  CHECK(aqs::core::is_valid_utf8("Gr\xC3\xBC\xC3\x9F" "e"));
  CHECK(aqs::core::is_valid_utf8("\xE6\x97\xA5\xE6\x9C\xAC"));
  CHECK(aqs::core::is_valid_utf8("\xF0\x9F\x9A\x80"));                        // rocket emoji
  CHECK(aqs::core::is_valid_utf8("\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7"));  // Arabic
  CHECK(aqs::core::is_valid_utf8("\xF4\x8F\xBF\xBF"));                        // U+10FFFF
}

TEST_CASE("malformed UTF-8 is refused: stray continuation, truncation, overlong, surrogate, beyond U+10FFFF") {
  CHECK_FALSE(aqs::core::is_valid_utf8("\x80"));
  CHECK_FALSE(aqs::core::is_valid_utf8("abc\xC3"));
  CHECK_FALSE(aqs::core::is_valid_utf8("\xE6\x97"));
  CHECK_FALSE(aqs::core::is_valid_utf8("\xC0\xAF"));          // overlong '/'
  CHECK_FALSE(aqs::core::is_valid_utf8("\xE0\x80\xAF"));      // overlong
  CHECK_FALSE(aqs::core::is_valid_utf8("\xED\xA0\x80"));      // U+D800
  CHECK_FALSE(aqs::core::is_valid_utf8("\xF4\x90\x80\x80"));  // U+110000
  CHECK_FALSE(aqs::core::is_valid_utf8("\xFF"));
  CHECK_FALSE(aqs::core::is_valid_utf8("\xC3\x28"));
}

TEST_CASE("check_text names the field and refuses NUL bytes and bad UTF-8") {
  CHECK_NOTHROW(check_text("script", "echo 'hi'; rm -rf \\ \xF0\x9F\x98\x80"));
  CHECK_THROWS_WITH_AS(check_text("script", "a\0b"s), doctest::Contains("script contains a NUL byte"), invalid_job);
  CHECK_THROWS_WITH_AS(check_text("name", "\xFF"), doctest::Contains("name is not valid UTF-8"), invalid_job);
}

TEST_CASE("JSON strings escape quotes, backslashes and every control character, and keep UTF-8 as is") {
  auto json = [](std::string_view v) {
    std::string out;
    append_json_string(out, v);
    return out;
  };
  CHECK(json("") == "\"\"");
  CHECK(json("a\"b") == "\"a\\\"b\"");
  CHECK(json("a\\b") == "\"a\\\\b\"");
  CHECK(json("l1\nl2\tx\r") == "\"l1\\nl2\\tx\\r\"");
  CHECK(json("\x01\x1f") == "\"\\u0001\\u001f\"");
  CHECK(json("\x7f") == "\"\x7f\"");
  CHECK(json("\xF0\x9F\x9A\x80 /") == "\"\xF0\x9F\x9A\x80 /\"");
  CHECK(json("</script>") == "\"</script>\"");
}

TEST_CASE("text[] literals quote every element so commas, braces, quotes and NULL stay data") {
  CHECK(text_array_literal({}) == "{}");
  CHECK(text_array_literal({""}) == "{\"\"}");
  CHECK(text_array_literal({"NULL", "null"}) == "{\"NULL\",\"null\"}");
  CHECK(text_array_literal({"a,b", "{x}", " sp "}) == "{\"a,b\",\"{x}\",\" sp \"}");
  CHECK(text_array_literal({"say \"hi\"", "back\\slash"}) == "{\"say \\\"hi\\\"\",\"back\\\\slash\"}");
}

TEST_CASE("PostgreSQL array output parses back: quoted, unquoted, escaped, empty, and bounds") {
  using v = std::vector<std::string>;
  CHECK(parse_array("{}") == v{});
  CHECK(parse_array("{a,b}") == v{"a", "b"});
  CHECK(parse_array("{\"\"}") == v{""});
  CHECK(parse_array("{\"a,b\",\"{x}\",\" sp \"}") == v{"a,b", "{x}", " sp "});
  CHECK(parse_array("{\"say \\\"hi\\\"\",\"back\\\\slash\",\"ends\\\\\"}") == v{"say \"hi\"", "back\\slash", "ends\\"});
  CHECK(parse_array("{\"NULL\",\"null\"}") == v{"NULL", "null"});
  CHECK(parse_array("{1,22,-3}") == v{"1", "22", "-3"});
  CHECK(parse_array("[0:1]={x,y}") == v{"x", "y"});
  CHECK(parse_array("{\xF0\x9F\x9A\x80,\"\xD9\x85 \xD8\xB1\"}") == v{"\xF0\x9F\x9A\x80", "\xD9\x85 \xD8\xB1"});
}

TEST_CASE("malformed array output, NULL elements and nested arrays are errors, not guesses") {
  for (const char* bad : {"", "a", "{", "{a", "{a,", "{\"a}", "{a}x", "{NULL}", "{a,null}", "{{a}}", "{\"a\"b}",
                          "{\"a\\"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_array(bad), store_error);
  }
}

TEST_CASE("every text[] literal we write parses back to the same strings") {
  const std::vector<std::string> values = {"", " ", "\"", "\\", "\\\"", "a,b", "{}", "NULL", "x y", "\t\n",
                                           "\xF0\x9F\x98\x80", "'; DROP TABLE jobs; --"};
  CHECK(parse_array(text_array_literal(values)) == values);
}

TEST_CASE("UTC timestamps as PostgreSQL prints them become exact microseconds since the epoch") {
  CHECK(parse_utc_timestamp("1970-01-01 00:00:00+00") == 0);
  CHECK(parse_utc_timestamp("2000-01-01 00:00:00+00") == 946'684'800'000'000);
  CHECK(parse_utc_timestamp("2026-11-21 21:34:02.123456+00") == 1'795'296'842'123'456);
  CHECK(parse_utc_timestamp("2024-02-29 12:00:00+00") == 1'709'208'000'000'000);
  CHECK(parse_utc_timestamp("1999-12-31 23:59:59.5+00") == 946'684'799'500'000);
  CHECK(parse_utc_timestamp("1969-12-31 23:59:59+00") == -1'000'000);
}

TEST_CASE("timestamps in another zone, style or shape are errors") {
  for (const char* bad : {"", "2026-11-21", "2026-11-21 21:34:02", "2026-11-21 21:34:02+01", "2026-11-21T21:34:02+00",
                          "2026-11-21 21:34:02.+00", "2026-11-21 21:34:02.1234567+00", "2026-13-01 00:00:00+00",
                          "21/11/2026 21:34:02+00", "2026-11-21 21:34:02 BC+00"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_utc_timestamp(bad), store_error);
  }
}
