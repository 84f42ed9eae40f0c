// json_limits: parsing untrusted JSON text with bounds on nesting and size.
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/utf8.hpp"

namespace aqs::protocol {

// No message nests deeper than this (the deepest, launch.job.environment, is 3).
inline constexpr int k_max_json_depth = 16;
// Total JSON values (scalars, arrays, objects) in one frame. A frame of 16 MiB
// of "[[],[],...]" would otherwise become millions of heap objects.
inline constexpr std::size_t k_max_json_values = std::size_t{1} << 18;

// Parses `text` as one JSON value. Throws protocol_error(bad_request) for
// a leading byte-order mark (which nlohmann would silently skip), for text
// that is not UTF-8 anywhere (naming the first bad byte and its offset), for
// invalid JSON with the parser's position, and when the nesting or value
// count exceeds the limits above; nothing else escapes for bad input. Every
// message is valid UTF-8, so it can be quoted in an error reply. Memory is
// bounded by a small multiple of text.size() plus k_max_json_values small
// objects.
nlohmann::json parse_json_bounded(std::string_view text);

// Offset of the first byte of `text` that is not well-formed UTF-8, or npos
// (the one check, in core/utf8.hpp).
using core::find_invalid_utf8;

// `text` made safe to quote in a reply: each byte that is not well-formed
// UTF-8 becomes the four characters "\xNN", and the result is cut to at most
// `max_bytes` between two characters, never inside one. Valid UTF-8 (control
// characters included) within max_bytes comes back unchanged.
std::string utf8_safe(std::string_view text, std::size_t max_bytes);

// Serialises compactly. Throws protocol_error(bad_request) if a string is not
// valid UTF-8 (the receiver would reject it anyway).
std::string dump_json(const nlohmann::json& j);

}  // namespace aqs::protocol
