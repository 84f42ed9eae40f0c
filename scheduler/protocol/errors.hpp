// errors: the protocol's machine-readable error codes and the exception that carries one.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace aqs::protocol {

// The `code` of an `error` reply. The text forms ("bad_request", ...) are
// the wire spelling; new codes may be added, so clients must treat an
// unknown code like `internal`.
enum class error_code : unsigned char {
  bad_request,          // malformed frame or JSON, missing/mistyped/out-of-range field
  unknown_type,         // "type" names no message this version knows
  unsupported_version,  // hello.protocol is not k_protocol_version
  unauthorized,         // missing or wrong HMAC, or a message the role may not send
  not_found,            // no such job or node
  permission_denied,    // e.g. cancelling another user's job without being root
  invalid_state,        // the request does not fit the job's state
  too_large,            // a frame longer than the maximum, or a field over its bound
  internal,             // the server failed; the request may be retried
};

std::string_view to_string(error_code c) noexcept;
// Inverse of to_string; nullopt for an unknown spelling.
std::optional<error_code> parse_error_code(std::string_view text) noexcept;

// Thrown by the decoder, the parser and the encoder for bad input, never
// anything else for bad input. `request_id()` is the "id" of the offending
// request when it could be read, so the server can still correlate its
// error reply. what() is one line, naming the field at fault.
class protocol_error : public std::runtime_error {
public:
  protocol_error(error_code code, const std::string& message,
                 std::optional<std::int64_t> request_id = std::nullopt)
      : std::runtime_error(message), code_(code), request_id_(request_id) {}

  error_code code() const noexcept { return code_; }
  std::optional<std::int64_t> request_id() const noexcept { return request_id_; }
  void set_request_id(std::optional<std::int64_t> id) noexcept { request_id_ = id; }

private:
  error_code code_;
  std::optional<std::int64_t> request_id_;
};

}  // namespace aqs::protocol
