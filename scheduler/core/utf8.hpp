// utf8: the one check of well-formed UTF-8, shared by the protocol (frames)
// and the store (text the database must accept).
#pragma once

#include <cstddef>
#include <string_view>

namespace aqs::core {

// Length of the well-formed UTF-8 sequence starting at text[i] (1 for
// ASCII), or 0 when the byte there does not start one: a continuation byte,
// an overlong form, a surrogate, a code point above U+10FFFF or a truncated
// sequence (RFC 3629; Unicode's table 3-7). `i` must be below text.size().
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) noexcept;

// Offset of the first byte that is not part of a well-formed sequence, or
// npos when all of `text` is UTF-8.
std::size_t find_invalid_utf8(std::string_view text) noexcept;

inline bool is_valid_utf8(std::string_view text) noexcept { return find_invalid_utf8(text) == std::string_view::npos; }

}  // namespace aqs::core
