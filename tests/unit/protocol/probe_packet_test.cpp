// Unit tests of the latency probe datagrams: layout, signature, freshness and replays.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/probe_packet.hpp"

using namespace aqs::protocol;

namespace {

constexpr std::int64_t k_now = 1763900000000000;  // 2025-11-23, in microseconds

probe_packet sample() {
  probe_packet p;
  p.kind = probe_kind::request;
  for (std::size_t i = 0; i < p.nonce.size(); ++i) p.nonce[i] = static_cast<unsigned char>(i);
  p.time_us = k_now;
  return p;
}

std::string hex(std::span<const unsigned char> b) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (const unsigned char c : b) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

}  // namespace

TEST_CASE("a probe has the documented 64 bytes, signed with HMAC-SHA256 of the cluster key") {
  const auto bytes = encode_probe("Jefe", sample());
  // Computed apart from AQS (Python's hmac) over the first 32 bytes.
  CHECK(hex(std::span(bytes).first(32)) == "4151535001010000000102030405060708090a0b0c0d0e0f00064441f8eb5800");
  CHECK(hex(std::span(bytes).subspan(32)) == "1a9e010249f1ac5d284b4cee7491f8807e0f5deab649388755e72f275fa20a05");
}

TEST_CASE("a probe signed with the key reads back as sent, request and reply alike") {
  const auto req = sample();
  const auto bytes = encode_probe("cluster-key", req);
  const auto back = verify_probe("cluster-key", bytes);
  REQUIRE(back);
  CHECK(*back == req);
  const auto rep = verify_probe("cluster-key", encode_probe("cluster-key", reply_to(req)));
  REQUIRE(rep);
  CHECK(rep->kind == probe_kind::reply);
  CHECK(rep->nonce == req.nonce);
  CHECK(rep->time_us == req.time_us);
}

TEST_CASE("a probe with a forged or damaged signature, or under another key, is refused") {
  const auto good = encode_probe("cluster-key", sample());
  CHECK_FALSE(verify_probe("another-key", good));
  CHECK_FALSE(verify_probe("", good));
  for (std::size_t i = 0; i < good.size(); ++i) {
    CAPTURE(i);
    auto bad = good;
    bad[i] ^= 0x01;  // any bit of any byte: header, nonce, time or MAC
    CHECK_FALSE(verify_probe("cluster-key", bad));
  }
  // A reply made from a request by flipping its kind without the key.
  auto flipped = good;
  flipped[5] = static_cast<unsigned char>(probe_kind::reply);
  CHECK_FALSE(verify_probe("cluster-key", flipped));
}

TEST_CASE("a datagram of any other length, magic, version or kind is refused") {
  const auto good = encode_probe("k", sample());
  const std::vector<unsigned char> empty;
  CHECK_FALSE(verify_probe("k", empty));
  CHECK_FALSE(verify_probe("k", std::span(good).first(63)));
  std::vector<unsigned char> longer(good.begin(), good.end());
  longer.push_back(0);
  CHECK_FALSE(verify_probe("k", longer));
  std::vector<unsigned char> zeros(k_probe_size, 0);
  CHECK_FALSE(verify_probe("k", zeros));
  auto kind3 = sample();
  kind3.kind = static_cast<probe_kind>(3);
  CHECK_FALSE(verify_probe("k", encode_probe("k", kind3)));  // signed, but no such kind
}

TEST_CASE("a request is fresh within two minutes either side, whatever the stamps") {
  CHECK(probe_fresh(k_now, k_now));
  CHECK(probe_fresh(k_now - k_probe_max_skew_us, k_now));
  CHECK(probe_fresh(k_now + k_probe_max_skew_us, k_now));
  CHECK_FALSE(probe_fresh(k_now - k_probe_max_skew_us - 1, k_now));
  CHECK_FALSE(probe_fresh(k_now + k_probe_max_skew_us + 1, k_now));
  CHECK_FALSE(probe_fresh(INT64_MIN, INT64_MAX));
  CHECK_FALSE(probe_fresh(INT64_MAX, INT64_MIN));
  CHECK_FALSE(probe_fresh(-1, k_now));
  // Negative stamps survive the wire unchanged.
  auto p = sample();
  p.time_us = -5;
  CHECK(verify_probe("k", encode_probe("k", p))->time_us == -5);
}

TEST_CASE("the replay guard answers each fresh request once, and none that is stale") {
  probe_replay_guard guard;
  const auto p = sample();
  CHECK(guard.first_use(p, k_now));
  CHECK_FALSE(guard.first_use(p, k_now + 1));  // replayed
  auto old = make_probe_request(k_now - k_probe_max_skew_us - 1);
  CHECK_FALSE(guard.first_use(old, k_now));  // stale, even though new
  auto other = make_probe_request(k_now);
  CHECK(other.nonce != p.nonce);
  CHECK(guard.first_use(other, k_now));
  // Once stale, a nonce is forgotten: its request is refused as stale anyway.
  const std::int64_t later = k_now + k_probe_max_skew_us + 1;
  CHECK(guard.first_use(make_probe_request(later), later));
  CHECK(guard.size() == 1);
  CHECK_FALSE(guard.first_use(p, later));
}

TEST_CASE("the replay guard's memory is bounded") {
  probe_replay_guard guard(8);
  for (int i = 0; i < 100; ++i) CHECK(guard.first_use(make_probe_request(k_now), k_now));
  CHECK(guard.size() <= 8);
}
