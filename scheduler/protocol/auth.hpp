// auth: the TCP handshake's HMAC-SHA256 over a server nonce with the cluster key.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace aqs::protocol {

// Bytes of randomness in a challenge nonce (sent as 64 lowercase hex digits).
inline constexpr std::size_t k_nonce_bytes = 32;

// AQS's one generator of secrets and identifiers: `bytes` fresh bytes from
// the OpenSSL CSPRNG as lowercase hex (challenge nonces, job tokens, the
// cluster key, submit tokens). Throws std::runtime_error if the CSPRNG fails
// (never silently weak).
// Lower-case hex of `n` bytes.
std::string to_hex(const unsigned char* p, std::size_t n);
std::string random_hex(std::size_t bytes);

// A challenge nonce: random_hex(k_nonce_bytes).
std::string make_nonce();

// HMAC-SHA256(key, nonce) as 64 lowercase hex digits: the `auth` field of
// hello. `nonce` is the hex text exactly as received in the challenge.
std::string compute_auth(std::string_view key, std::string_view nonce);

// True when `auth` equals compute_auth(key, nonce); the comparison takes the
// same time wherever the first difference is (CRYPTO_memcmp). Any other
// length or non-hex input is simply false.
bool verify_auth(std::string_view key, std::string_view nonce, std::string_view auth) noexcept;

}  // namespace aqs::protocol
