// probe_packet: encoding and checking the agents' UDP probes (HMAC-SHA256
// with the cluster key, through auth.hpp).
#include "protocol/probe_packet.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <openssl/rand.h>

#include "protocol/auth.hpp"

namespace aqs::protocol {

namespace {

constexpr std::size_t k_signed_size = 32;  // bytes the MAC covers
constexpr std::size_t k_mac_size = 32;
constexpr std::array<unsigned char, 4> k_magic = {'A', 'Q', 'S', 'P'};

std::string_view signed_part(const unsigned char* p) {
  return {reinterpret_cast<const char*>(p), k_signed_size};
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

probe_packet make_probe_request(std::int64_t now_us) {
  probe_packet p;
  p.kind = probe_kind::request;
  p.time_us = now_us;
  if (RAND_bytes(p.nonce.data(), static_cast<int>(p.nonce.size())) != 1) {
    throw std::runtime_error("make_probe_request: the OpenSSL random generator failed");
  }
  return p;
}

probe_packet reply_to(const probe_packet& request) {
  probe_packet r = request;
  r.kind = probe_kind::reply;
  return r;
}

std::array<unsigned char, k_probe_size> encode_probe(std::string_view key, const probe_packet& p) {
  std::array<unsigned char, k_probe_size> out{};
  std::copy(k_magic.begin(), k_magic.end(), out.begin());
  out[4] = k_probe_version;
  out[5] = static_cast<unsigned char>(p.kind);
  std::copy(p.nonce.begin(), p.nonce.end(), out.begin() + 8);
  const auto t = static_cast<std::uint64_t>(p.time_us);
  for (int i = 0; i < 8; ++i) out[24 + static_cast<std::size_t>(i)] = static_cast<unsigned char>(t >> (56 - 8 * i));
  // auth.hpp's HMAC, as hex: the one place AQS computes it.
  const std::string mac = compute_auth(key, signed_part(out.data()));
  for (std::size_t i = 0; i < k_mac_size; ++i) {
    out[k_signed_size + i] = static_cast<unsigned char>(hex_digit(mac[2 * i]) * 16 + hex_digit(mac[2 * i + 1]));
  }
  return out;
}

std::optional<probe_packet> verify_probe(std::string_view key, std::span<const unsigned char> d) noexcept {
  if (d.size() != k_probe_size) return std::nullopt;
  if (!std::equal(k_magic.begin(), k_magic.end(), d.begin())) return std::nullopt;
  if (d[4] != k_probe_version || d[6] != 0 || d[7] != 0) return std::nullopt;
  if (d[5] != static_cast<unsigned char>(probe_kind::request) && d[5] != static_cast<unsigned char>(probe_kind::reply)) {
    return std::nullopt;
  }
  try {
    if (!verify_auth(key, signed_part(d.data()), to_hex(d.data() + k_signed_size, k_mac_size))) return std::nullopt;
  } catch (...) {  // to_hex's allocation
    return std::nullopt;
  }
  probe_packet p;
  p.kind = static_cast<probe_kind>(d[5]);
  std::copy(d.begin() + 8, d.begin() + 24, p.nonce.begin());
  std::uint64_t t = 0;
  for (std::size_t i = 24; i < 32; ++i) t = (t << 8) | d[i];
  p.time_us = static_cast<std::int64_t>(t);
  return p;
}

bool probe_fresh(std::int64_t time_us, std::int64_t now_us) noexcept {
  // The distance in unsigned arithmetic: exact for any two stamps, no overflow.
  const auto a = static_cast<std::uint64_t>(time_us);
  const auto b = static_cast<std::uint64_t>(now_us);
  const std::uint64_t distance = time_us > now_us ? a - b : b - a;
  return distance <= static_cast<std::uint64_t>(k_probe_max_skew_us);
}

bool probe_replay_guard::first_use(const probe_packet& request, std::int64_t now_us) {
  if (!probe_fresh(request.time_us, now_us)) return false;
  while (!order_.empty() && (!probe_fresh(order_.front().first, now_us) || order_.size() >= max_)) {
    seen_.erase(order_.front().second);
    order_.pop_front();
  }
  if (!seen_.insert(request.nonce).second) return false;
  order_.emplace_back(request.time_us, request.nonce);
  return true;
}

}  // namespace aqs::protocol
