// auth: HMAC-SHA256 handshake helpers over OpenSSL.
#include "protocol/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <stdexcept>
#include <vector>

namespace aqs::protocol {

std::string to_hex(const unsigned char* p, std::size_t n) {
  constexpr std::string_view digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (bytes > 0 && RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1) {
    throw std::runtime_error("random_hex: the OpenSSL random generator failed");
  }
  return to_hex(buf.data(), buf.size());
}

std::string make_nonce() { return random_hex(k_nonce_bytes); }

std::string compute_auth(std::string_view key, std::string_view nonce) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  // An empty key is legal HMAC; OpenSSL wants a non-null pointer for it.
  static const unsigned char empty = 0;
  const void* key_ptr = key.empty() ? static_cast<const void*>(&empty) : key.data();
  if (HMAC(EVP_sha256(), key_ptr, static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(nonce.data()), nonce.size(), md.data(),
           &len) == nullptr) {
    throw std::runtime_error("compute_auth: HMAC-SHA256 failed");
  }
  return to_hex(md.data(), len);
}

bool verify_auth(std::string_view key, std::string_view nonce, std::string_view auth) noexcept {
  try {
    const std::string expected = compute_auth(key, nonce);
    if (auth.size() != expected.size()) return false;
    return CRYPTO_memcmp(expected.data(), auth.data(), expected.size()) == 0;
  } catch (...) {
    return false;
  }
}

}  // namespace aqs::protocol
