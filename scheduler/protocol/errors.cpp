// errors: wire spellings of the protocol error codes.
#include "protocol/errors.hpp"

#include "core/enum_names.hpp"

namespace aqs::protocol {

namespace {
constexpr core::enum_table<error_code, 9> k_names = {{
    {error_code::bad_request, "bad_request"},
    {error_code::unknown_type, "unknown_type"},
    {error_code::unsupported_version, "unsupported_version"},
    {error_code::unauthorized, "unauthorized"},
    {error_code::not_found, "not_found"},
    {error_code::permission_denied, "permission_denied"},
    {error_code::invalid_state, "invalid_state"},
    {error_code::too_large, "too_large"},
    {error_code::internal, "internal"},
}};
}  // namespace

std::string_view to_string(error_code c) noexcept { return core::name_in(k_names, c, "internal"); }

std::optional<error_code> parse_error_code(std::string_view text) noexcept { return core::value_in(k_names, text); }

}  // namespace aqs::protocol
