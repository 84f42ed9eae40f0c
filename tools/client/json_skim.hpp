// json_skim: finding the members of a JSON object and the elements of an
// array as spans of the text, without parsing the values: a long job listing
// is passed on as aqsd wrote it (parsing 28 MB with nlohmann takes seconds).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aqs::client {

// A span of a text: [offset, offset + size).
struct text_span {
  std::size_t offset = 0;
  std::size_t size = 0;
  std::string_view in(std::string_view text) const noexcept { return text.substr(offset, size); }
};

// The members of the JSON object `text` (whitespace around it allowed): each
// key (unescaped only if it holds no escapes; keys here are plain names) and
// its value's span within `text`. Values are checked for balance (strings
// closed, brackets matched), not otherwise validated. Throws
// std::invalid_argument naming the offset when `text` is not an object.
std::vector<std::pair<std::string, text_span>> object_members(std::string_view text);
// The elements of the JSON array at `span` of `text`, as spans of `text`.
// Throws std::invalid_argument when it is not an array.
std::vector<text_span> array_elements(std::string_view text, text_span span);

}  // namespace aqs::client
