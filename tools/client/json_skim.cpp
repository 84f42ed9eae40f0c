// json_skim: one pass over the text, strings and brackets only.
#include "client/json_skim.hpp"

#include <cstring>
#include <stdexcept>

namespace aqs::client {

namespace {

[[noreturn]] void bad(std::size_t at, const char* what) {
  throw std::invalid_argument("malformed JSON at byte " + std::to_string(at) + ": " + what);
}

void skip_space(std::string_view t, std::size_t& i) {
  while (i < t.size() && (t[i] == ' ' || t[i] == '\n' || t[i] == '\r' || t[i] == '\t')) ++i;
}

// i at the opening quote; leaves i after the closing one.
void skip_string(std::string_view t, std::size_t& i) {
  ++i;
  while (true) {
    const void* q = i < t.size() ? std::memchr(t.data() + i, '"', t.size() - i) : nullptr;
    if (q == nullptr) bad(t.size(), "unterminated string");
    const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(q) - t.data());
    std::size_t backslashes = 0;
    while (at - backslashes > i && t[at - backslashes - 1] == '\\') ++backslashes;
    i = at + 1;
    if (backslashes % 2 == 0) return;
  }
}

// i at the first character of a value; leaves i just after it.
void skip_value(std::string_view t, std::size_t& i) {
  if (i >= t.size()) bad(i, "a value is missing");
  const char c = t[i];
  if (c == '"') return skip_string(t, i);
  if (c == '{' || c == '[') {
    std::string open(1, c);  // short: no allocation for the usual depths
    ++i;
    while (!open.empty()) {
      if (i >= t.size()) bad(i, "unclosed object or array");
      const char d = t[i];
      if (d == '"') {
        skip_string(t, i);
        continue;
      }
      if (d == '{' || d == '[') {
        open.push_back(d);
      } else if (d == '}' || d == ']') {
        if ((d == '}') != (open.back() == '{')) bad(i, "mismatched bracket");
        open.pop_back();
      }
      ++i;
    }
    return;
  }
  const std::size_t start = i;
  while (i < t.size() && std::strchr(",}] \n\r\t", t[i]) == nullptr) ++i;
  if (i == start) bad(i, "a value is missing");
}

}  // namespace

std::vector<std::pair<std::string, text_span>> object_members(std::string_view text) {
  std::vector<std::pair<std::string, text_span>> out;
  std::size_t i = 0;
  skip_space(text, i);
  if (i >= text.size() || text[i] != '{') bad(i, "not an object");
  ++i;
  skip_space(text, i);
  if (i < text.size() && text[i] == '}') {
    ++i;
  } else {
    while (true) {
      skip_space(text, i);
      if (i >= text.size() || text[i] != '"') bad(i, "a member name is missing");
      const std::size_t k = i;
      skip_string(text, i);
      std::string key(text.substr(k + 1, i - k - 2));
      skip_space(text, i);
      if (i >= text.size() || text[i] != ':') bad(i, "':' is missing");
      ++i;
      skip_space(text, i);
      const std::size_t v = i;
      skip_value(text, i);
      out.emplace_back(std::move(key), text_span{v, i - v});
      skip_space(text, i);
      if (i < text.size() && text[i] == ',') {
        ++i;
        continue;
      }
      if (i < text.size() && text[i] == '}') {
        ++i;
        break;
      }
      bad(i, "',' or '}' is missing");
    }
  }
  skip_space(text, i);
  if (i != text.size()) bad(i, "text after the object");
  return out;
}

std::vector<text_span> array_elements(std::string_view text, text_span span) {
  std::vector<text_span> out;
  const std::size_t end = span.offset + span.size;
  if (span.size < 2 || end > text.size() || text[span.offset] != '[' || text[end - 1] != ']') {
    bad(span.offset, "not an array");
  }
  const std::string_view t = text.substr(0, end - 1);  // up to the closing bracket
  std::size_t i = span.offset + 1;
  skip_space(t, i);
  if (i == t.size()) return out;
  while (true) {
    skip_space(t, i);
    const std::size_t v = i;
    skip_value(t, i);
    out.push_back({v, i - v});
    skip_space(t, i);
    if (i == t.size()) break;
    if (t[i] != ',') bad(i, "',' is missing");
    ++i;
  }
  return out;
}

}  // namespace aqs::client
