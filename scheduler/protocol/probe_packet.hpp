// probe_packet: the UDP datagrams agents time each other with, authenticated
// with the cluster key so that a probe socket answers nobody else.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <span>
#include <string_view>

namespace aqs::protocol {

// Layout (64 bytes, integers big-endian), see docs/protocol.md:
//   0  "AQSP"   4  version (1)   5  kind (1 request, 2 reply)   6  two zero bytes
//   8  nonce (16 random bytes)   24 time_us (signed 64-bit, the requester's
//   CLOCK_REALTIME in microseconds)   32 HMAC-SHA256(cluster key, bytes 0..31)
inline constexpr std::size_t k_probe_size = 64;
inline constexpr std::size_t k_probe_nonce_size = 16;
inline constexpr std::uint8_t k_probe_version = 1;
// A request older (or newer) than this by the responder's clock is refused:
// clocks of a cluster's nodes must agree within it (NTP does far better).
inline constexpr std::int64_t k_probe_max_skew_us = 120'000'000;

enum class probe_kind : std::uint8_t { request = 1, reply = 2 };

using probe_nonce = std::array<unsigned char, k_probe_nonce_size>;

struct probe_packet {
  probe_kind kind = probe_kind::request;
  probe_nonce nonce{};
  std::int64_t time_us = 0;
  friend bool operator==(const probe_packet&, const probe_packet&) = default;
};

// A request with a fresh random nonce, stamped `now_us`. Throws
// std::runtime_error if the CSPRNG fails.
probe_packet make_probe_request(std::int64_t now_us);
// The reply to `request`: the same nonce and time, kind reply.
probe_packet reply_to(const probe_packet& request);

// The datagram of `p`, signed with `key`. Throws std::runtime_error if
// HMAC fails (never for valid input).
std::array<unsigned char, k_probe_size> encode_probe(std::string_view key, const probe_packet& p);

// The packet in `datagram`, or nullopt when it is not exactly one intact
// packet signed with `key`: wrong size, magic, version, kind or reserved
// bytes, or a MAC that does not match (compared in constant time). Never
// throws.
std::optional<probe_packet> verify_probe(std::string_view key, std::span<const unsigned char> datagram) noexcept;

// Whether a request stamped `time_us` is within k_probe_max_skew_us of `now_us`.
bool probe_fresh(std::int64_t time_us, std::int64_t now_us) noexcept;

// The responder's memory of the requests it answered while they were fresh:
// a request captured and sent again is answered once only, so the socket
// cannot be made to send a stream of replies to a forged source address.
class probe_replay_guard {
public:
  explicit probe_replay_guard(std::size_t max_entries = 65536) : max_(max_entries) {}
  // True the first time a fresh request's nonce is seen; false for a stale
  // request or a nonce already seen. Forgets nonces once they are stale
  // (their requests would be refused anyway), and the oldest beyond
  // max_entries.
  bool first_use(const probe_packet& request, std::int64_t now_us);
  std::size_t size() const noexcept { return seen_.size(); }

private:
  std::size_t max_;
  std::deque<std::pair<std::int64_t, probe_nonce>> order_;  // arrival order
  std::set<probe_nonce> seen_;
};

}  // namespace aqs::protocol
