// Unit tests of the HMAC-SHA256 handshake helpers and base64.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "protocol/auth.hpp"
#include "protocol/base64.hpp"

using namespace aqs::protocol;

TEST_CASE("compute_auth is HMAC-SHA256 as in RFC 4231 test case 2") {
  // RFC 4231 4.3: key "Jefe", data "what do ya want for nothing?".
  CHECK(compute_auth("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST_CASE("verify_auth accepts the right HMAC and rejects any other") {
  const std::string nonce = make_nonce();
  const std::string good = compute_auth("cluster-key", nonce);
  CHECK(verify_auth("cluster-key", nonce, good));
  CHECK_FALSE(verify_auth("other-key", nonce, good));
  CHECK_FALSE(verify_auth("cluster-key", make_nonce(), good));
  std::string flipped = good;
  flipped[10] = flipped[10] == '0' ? '1' : '0';
  CHECK_FALSE(verify_auth("cluster-key", nonce, flipped));
  CHECK_FALSE(verify_auth("cluster-key", nonce, good.substr(1)));
  CHECK_FALSE(verify_auth("cluster-key", nonce, ""));
}

TEST_CASE("nonces are 64 hex digits and do not repeat") {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string n = make_nonce();
    CHECK(n.size() == 64);
    CHECK(n.find_first_not_of("0123456789abcdef") == std::string::npos);
    seen.insert(n);
  }
  CHECK(seen.size() == 100);
}

TEST_CASE("base64 matches RFC 4648 and round-trips every byte value") {
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foo") == "Zm9v");
  CHECK(base64_encode("foobar") == "Zm9vYmFy");
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (std::size_t n = 0; n <= all.size(); n += 37) {
    CHECK(base64_decode(base64_encode(all.substr(0, n))) == all.substr(0, n));
  }
}

TEST_CASE("base64 decoding refuses non-canonical input") {
  CHECK_FALSE(base64_decode("Zg=").has_value());    // length
  CHECK_FALSE(base64_decode("Zg==Zg==").has_value());  // padding in the middle
  CHECK_FALSE(base64_decode("Z===").has_value());   // too much padding
  CHECK_FALSE(base64_decode("Zh==").has_value());   // non-zero trailing bits
  CHECK_FALSE(base64_decode("Zm9v!A==").has_value());  // alphabet
  CHECK(base64_decode("Zm9v") == "foo");
}
