// base64: the standard alphabet with padding (RFC 4648), for output chunks of arbitrary bytes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace aqs::protocol {

std::string base64_encode(std::string_view bytes);
// nullopt for anything that is not canonical padded base64 (wrong length,
// characters outside the alphabet, bad padding, non-zero trailing bits).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace aqs::protocol
