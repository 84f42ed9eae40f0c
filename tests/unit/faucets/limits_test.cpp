// Unit tests of faucetsd's connection accounting, body budget, descriptor
// fitting and final states (faucets/server/conn_limits, faucets_store).
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "core/job_state.hpp"
#include "server/conn_limits.hpp"
#include "server/faucets_store.hpp"

using namespace aqs::faucets;

TEST_CASE("a connection over its address's cap or the port's total is refused, naming which") {
  auto counts = std::make_shared<conn_counts>();
  std::optional<conn_slot> a1, a2;
  CHECK_FALSE(admit(*counts, "10.0.0.1", 3, 2, "users' port"));
  a1.emplace(counts, "10.0.0.1");
  a2.emplace(counts, "10.0.0.1");
  const auto per = admit(*counts, "10.0.0.1", 3, 2, "users' port");
  REQUIRE(per);
  CHECK(per->find("too many connections from 10.0.0.1 on the users' port (at most 2)") != std::string::npos);
  conn_slot b(counts, "10.0.0.2");
  const auto total = admit(*counts, "10.0.0.3", 3, 2, "users' port");
  REQUIRE(total);
  CHECK(total->find("(at most 3)") != std::string::npos);
  a1.reset();
  CHECK_FALSE(admit(*counts, "10.0.0.1", 3, 2, "users' port"));
  CHECK(counts->total == 2);
}

TEST_CASE("a connection that proves its user leaves its address's count, within the user's cap") {
  auto counts = std::make_shared<conn_counts>();
  conn_slot a(counts, "10.0.0.1"), b(counts, "10.0.0.1"), c(counts, "10.0.0.1");
  CHECK(a.rekey("user alice", 2));
  CHECK(b.rekey("user alice", 2));
  CHECK_FALSE(c.rekey("user alice", 2));
  CHECK(c.key() == "10.0.0.1");
  CHECK(counts->of("10.0.0.1") == 1);
  CHECK(counts->of("user alice") == 2);
  CHECK(a.rekey("user alice", 2));  // already there: no change
  CHECK(counts->total == 3);
}

TEST_CASE("slots give back their count when they go, moved or not") {
  auto counts = std::make_shared<conn_counts>();
  {
    conn_slot a(counts, "x");
    conn_slot moved(std::move(a));
    CHECK(counts->total == 1);
  }
  CHECK(counts->total == 0);
  CHECK(counts->per_key.empty());
}

TEST_CASE("the body budget lends bytes up to its cap and takes them back") {
  auto b = std::make_shared<body_budget>();
  b->cap = 100;
  auto r1 = body_reservation::take(b, 60);
  REQUIRE(r1);
  CHECK_FALSE(body_reservation::take(b, 50));
  r1.reset();
  CHECK(b->in_use == 0);
  CHECK(body_reservation::take(b, 100));
}

TEST_CASE("connection caps are lowered to fit the descriptors faucetsd may open") {
  server_limits l;
  CHECK_FALSE(l.fit_descriptors(100000));
  const auto note = l.fit_descriptors(1024);
  REQUIRE(note);
  CHECK(l.http_max_connections + l.cluster_max_connections + l.socket_max_connections <= 1024 - 64);
  CHECK(l.http_max_per_address <= l.http_max_connections);
}

TEST_CASE("out of descriptors is an accept error to back off from") {
  CHECK(out_of_resources(boost::system::error_code(EMFILE, boost::system::system_category())));
  CHECK(out_of_resources(boost::system::error_code(ENFILE, boost::system::system_category())));
  CHECK_FALSE(out_of_resources(boost::system::error_code(ECONNABORTED, boost::system::system_category())));
}

TEST_CASE("faucetsd ends a job in every final state of the core, and in no other") {
  // Iterates the core's one list: a state added there is covered here.
  std::string array = "{";
  for (const auto s : aqs::core::k_all_job_states) {
    const std::string name(aqs::core::to_string(s));
    CAPTURE(name);
    CHECK(is_final_state(name) == aqs::core::is_final(s));
    if (aqs::core::is_final(s)) array += (array.size() > 1 ? "," : "") + name;
  }
  CHECK(final_states_array() == array + "}");
  CHECK(is_final_state("OUT_OF_MEMORY"));
  CHECK_FALSE(is_final_state("UNKNOWN"));
}
