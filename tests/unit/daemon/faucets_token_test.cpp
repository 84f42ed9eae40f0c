// The submit tokens the Faucets uplink gives forwarded jobs: written and read
// back, as stored (scoped by the owner's uid), and what is not one.
#include <doctest/doctest.h>

#include <string>

#include "daemon/faucets_uplink.hpp"

using aqs::daemon::faucets_token;
using aqs::daemon::parse_faucets_token;

TEST_CASE("a forward's token names the server's job and the forward") {
  const std::string t = faucets_token("medium", 64, 2);
  CHECK(t == "faucets:medium:64.2");
  const auto m = parse_faucets_token(t);
  REQUIRE(m.has_value());
  CHECK(m->fid == 64);
  CHECK(m->attempt == 2);
  // As the store keeps it, scoped by the owner's uid.
  const auto stored = parse_faucets_token("u1001:" + t);
  REQUIRE(stored.has_value());
  CHECK(stored->fid == 64);
  CHECK(stored->attempt == 2);
}

TEST_CASE("tokens from before attempts were counted read as attempt 0") {
  CHECK(faucets_token("a", 7, 0) == "faucets:a:7");
  const auto m = parse_faucets_token("faucets:a:7");
  REQUIRE(m.has_value());
  CHECK(m->fid == 7);
  CHECK(m->attempt == 0);
}

TEST_CASE("what is not a token the uplink wrote is not read as one") {
  for (const char* bad : {"", "abc", "fsub-3f2a", "faucets:a:", "faucets:a:x", "faucets:a:0", "faucets:a:7.",
                          "faucets:a:7.x", "faucets:a:7#3", "faucets:a:-7", "faucets:a:1234567890123456"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_faucets_token(bad).has_value());
  }
}
