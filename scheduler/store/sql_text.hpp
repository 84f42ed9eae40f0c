// sql_text: checking and encoding text values on their way to PostgreSQL
// (JSON strings and text[] literals), pure functions testable without a DB.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace aqs::store {

// Throws invalid_job naming `field` if `value` holds a NUL byte (PostgreSQL
// text cannot store it) or is not valid UTF-8 (the database would refuse the
// whole transaction, and with it a whole batch of other users' jobs).
void check_text(std::string_view field, std::string_view value);

// Appends `value` as a JSON string literal: quotes, backslashes and control
// characters escaped, other bytes (UTF-8) copied. `value` must have passed
// check_text.
void append_json_string(std::string& out, std::string_view value);

// A PostgreSQL array literal of text, every element double-quoted with '"'
// and '\' backslash-escaped, so that commas, braces, spaces and the word NULL
// stay data: {"a,b","{x}","NULL"}. Elements must have passed check_text.
std::string text_array_literal(const std::vector<std::string>& values);

// Parses PostgreSQL's text output of a one-dimensional array (what a text[]
// or bigint[] column reads as): {a,"b,c","d\"e"}, an optional bounds prefix
// "[0:1]=" skipped. Throws store_error on malformed input, a NULL element or
// a nested array. (libpqxx 6.4's array_parser asserts on some valid inputs.)
std::vector<std::string> parse_array(std::string_view text);

// Microseconds since the Unix epoch of a timestamptz as PostgreSQL prints it
// with TimeZone UTC and DateStyle ISO: "2026-11-21 21:34:02.123456+00"
// (fraction optional, 1-6 digits). The store sets both on every connection:
// parsing text is faster than asking the server to compute epoch numerics.
// Throws store_error on anything else.
std::int64_t parse_utc_timestamp(std::string_view text);

}  // namespace aqs::store
