// json_limits: parsing untrusted JSON text with bounds on nesting and size.
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

namespace aqs::protocol {

// No message nests deeper than this (the deepest, launch.job.environment, is 3).
inline constexpr int k_max_json_depth = 16;
// Total JSON values (scalars, arrays, objects) in one frame. A frame of 16 MiB
// of "[[],[],...]" would otherwise become millions of heap objects.
inline constexpr std::size_t k_max_json_values = std::size_t{1} << 18;

// Parses `text` as one JSON value. Throws protocol_error(bad_request) for
// invalid JSON (including invalid UTF-8 in strings) with the parser's position,
// and also bad_request when the nesting or value count exceeds the
// limits above; nothing else escapes for bad input. Memory is bounded by a
// small multiple of text.size() plus k_max_json_values small objects.
nlohmann::json parse_json_bounded(std::string_view text);

// Serialises compactly. Throws protocol_error(bad_request) if a string is not
// valid UTF-8 (the receiver would reject it anyway).
std::string dump_json(const nlohmann::json& j);

}  // namespace aqs::protocol
