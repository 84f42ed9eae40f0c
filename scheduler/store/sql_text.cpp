// sql_text: validation and escaping of values sent to PostgreSQL.
#include "store/sql_text.hpp"

#include <cstdint>

#include "core/json_string.hpp"
#include "core/utf8.hpp"
#include "store/store_errors.hpp"

namespace aqs::store {

void check_text(std::string_view field, std::string_view value) {
  if (value.find('\0') != std::string_view::npos) {
    throw invalid_job(std::string(field) + " contains a NUL byte, which PostgreSQL text cannot store");
  }
  if (!core::is_valid_utf8(value)) throw invalid_job(std::string(field) + " is not valid UTF-8");
}

void append_json_string(std::string& out, std::string_view value) { core::append_json_string(out, value); }

std::string text_array_literal(const std::vector<std::string>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i != 0) out.push_back(',');
    out.push_back('"');
    for (const char c : values[i]) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

std::vector<std::string> parse_array(std::string_view text) {
  auto bad = [&](const char* why) {
    return store_error(std::string("malformed array from the database (") + why + "): " +
                       std::string(text.substr(0, 80)));
  };
  std::size_t i = 0;
  if (!text.empty() && text[0] == '[') {
    i = text.find('=');
    if (i == std::string_view::npos) throw bad("bounds without '='");
    ++i;
  }
  if (i >= text.size() || text[i] != '{') throw bad("no '{'");
  ++i;
  std::vector<std::string> out;
  if (i < text.size() && text[i] == '}') {
    if (i + 1 != text.size()) throw bad("text after '}'");
    return out;
  }
  for (;;) {
    if (i >= text.size()) throw bad("unterminated");
    std::string element;
    if (text[i] == '"') {
      ++i;
      for (;;) {
        if (i >= text.size()) throw bad("unterminated quoted element");
        const char c = text[i++];
        if (c == '"') break;
        if (c == '\\') {
          if (i >= text.size()) throw bad("backslash at the end");
          element.push_back(text[i++]);
        } else {
          element.push_back(c);
        }
      }
    } else {
      if (text[i] == '{') throw bad("nested array");
      const std::size_t start = i;
      while (i < text.size() && text[i] != ',' && text[i] != '}') {
        if (text[i] == '"' || text[i] == '{') throw bad("quote or brace inside an unquoted element");
        if (text[i] == '\\') ++i;  // PostgreSQL never writes this unquoted, but it would escape
        ++i;
      }
      if (i > text.size()) throw bad("backslash at the end");
      std::string_view raw = text.substr(start, i - start);
      if (raw.size() == 4 && (raw[0] | 0x20) == 'n' && (raw[1] | 0x20) == 'u' && (raw[2] | 0x20) == 'l' &&
          (raw[3] | 0x20) == 'l') {
        throw bad("NULL element");
      }
      for (std::size_t k = 0; k < raw.size(); ++k) {
        if (raw[k] == '\\') ++k;
        if (k < raw.size()) element.push_back(raw[k]);
      }
    }
    out.push_back(std::move(element));
    if (i >= text.size()) throw bad("unterminated");
    if (text[i] == ',') {
      ++i;
      continue;
    }
    if (text[i] == '}') {
      if (i + 1 != text.size()) throw bad("text after '}'");
      return out;
    }
    throw bad("expected ',' or '}'");
  }
}

std::int64_t parse_utc_timestamp(std::string_view t) {
  auto bad = [&] { return store_error("unexpected timestamp from the database: " + std::string(t.substr(0, 40))); };
  auto digits = [&](std::size_t pos, std::size_t n) {
    if (pos + n > t.size()) throw bad();
    std::int64_t v = 0;
    for (std::size_t i = pos; i < pos + n; ++i) {
      if (t[i] < '0' || t[i] > '9') throw bad();
      v = v * 10 + (t[i] - '0');
    }
    return v;
  };
  // YYYY-MM-DD HH:MM:SS
  if (t.size() < 22 || t[4] != '-' || t[7] != '-' || t[10] != ' ' || t[13] != ':' || t[16] != ':') throw bad();
  const std::int64_t y = digits(0, 4), mo = digits(5, 2), d = digits(8, 2);
  const std::int64_t h = digits(11, 2), mi = digits(14, 2), sec = digits(17, 2);
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) throw bad();
  std::size_t pos = 19;
  std::int64_t micros = 0;
  if (t[pos] == '.') {
    ++pos;
    std::size_t n = 0;
    while (pos + n < t.size() && t[pos + n] >= '0' && t[pos + n] <= '9') ++n;
    if (n == 0 || n > 6) throw bad();
    micros = digits(pos, n);
    for (std::size_t k = n; k < 6; ++k) micros *= 10;
    pos += n;
  }
  if (t.substr(pos) != "+00") throw bad();
  // Days from civil (Howard Hinnant's algorithm), proleptic Gregorian.
  const std::int64_t yy = mo <= 2 ? y - 1 : y;
  const std::int64_t era = (yy >= 0 ? yy : yy - 399) / 400;
  const std::int64_t yoe = yy - era * 400;
  const std::int64_t doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const std::int64_t days = era * 146097 + doe - 719468;
  return ((days * 24 + h) * 60 + mi) * 60'000'000 + sec * 1'000'000 + micros;
}

}  // namespace aqs::store
