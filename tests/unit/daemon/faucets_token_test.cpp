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

// ---- the market (issue 35): the price a cluster asks, the processor-seconds a job held

TEST_CASE("a cluster's price is its rate scaled by its load: busy plus queued over usable") {
  using aqs::daemon::faucets_price;
  CHECK(faucets_price(2.0, 8, 8, 0) == 2.0);    // idle
  CHECK(faucets_price(2.0, 8, 4, 0) == 3.0);    // half busy
  CHECK(faucets_price(2.0, 8, 0, 8) == 6.0);    // full, and as much again queued
  CHECK(faucets_price(0.0, 8, 0, 8) == 0.0);    // a free cluster stays free
  CHECK(faucets_price(1.5, 0, 0, 0) == 3.0);    // no usable processor: twice the rate
  CHECK(faucets_price(1.0, 8, 10, -3) == 1.0);  // nonsense counts never lower it below the rate
}

TEST_CASE("a job's processor-seconds are the integral of its processor count over its changes") {
  aqs::daemon::held_meter m;
  CHECK_FALSE(m.started());
  CHECK(m.total(100) == 0);
  m.change(1000, 8);  // starts on 8
  CHECK(m.started());
  m.change(1010, 4);  // shrinks after 10 s
  m.change(1015, 6);  // grows after 5 s
  CHECK(m.total(1020) == doctest::Approx(8 * 10 + 4 * 5 + 6 * 5));
  m.change(1020, 0);  // ends
  CHECK(m.total(1020) == doctest::Approx(130));
  CHECK(m.total(5000) == doctest::Approx(130));  // nothing held after the end
  // A change reported out of order never counts time backwards.
  m.change(1019, 3);
  CHECK(m.total(1030) == doctest::Approx(130 + 3 * 10));
}
