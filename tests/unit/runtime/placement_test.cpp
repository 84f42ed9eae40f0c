// Unit tests of maps, the launch environment's cpu and host lists, and the
// migration plan (who keeps, re-pins, leaves or is spawned).
#include <doctest/doctest.h>

#include <stdexcept>

#include "migration_plan.hpp"
#include "placement.hpp"

using namespace aqs::runtime;

namespace {
std::vector<slot> on(const std::string& host, std::initializer_list<int> procs) {
  std::vector<slot> out;
  for (int p : procs) out.push_back(slot{p, p % 2, host});
  return out;
}
}  // namespace

TEST_CASE("a map string lists its processors, and bad maps are refused") {
  CHECK(parse_map("00011100") == std::vector<int>{3, 4, 5});
  CHECK(parse_map("1") == std::vector<int>{0});
  CHECK_THROWS_AS(parse_map("0000"), std::invalid_argument);
  CHECK_THROWS_AS(parse_map(""), std::invalid_argument);
  CHECK_THROWS_AS(parse_map("01x1"), std::invalid_argument);
  CHECK(format_map(on("a", {3, 4, 5}), 8) == "00011100");
  CHECK(format_map(on("a", {3}), 2) == "0001");
}

TEST_CASE("cpu lists and host runs from the launch environment") {
  CHECK(parse_cpu_list("3,0,1") == std::vector<int>{3, 0, 1});
  CHECK_THROWS_AS(parse_cpu_list("3,,1"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpu_list("3,"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpu_list("-1"), std::invalid_argument);
  CHECK(parse_host_runs("a*2,b*1,c") == std::vector<std::string>{"a", "a", "b", "c"});
  CHECK_THROWS_AS(parse_host_runs("a*0"), std::invalid_argument);
  CHECK_THROWS_AS(parse_host_runs("*2"), std::invalid_argument);
  CHECK_THROWS_AS(parse_host_runs("a*x"), std::invalid_argument);
}

TEST_CASE("slots take the given cpus and hosts, or guess round-robin on this host") {
  auto s = make_slots({4, 5}, {1, 0}, {"h1", "h2"}, "me", 2);
  CHECK(s == std::vector<slot>{{4, 1, "h1"}, {5, 0, "h2"}});
  s = make_slots({4, 5, 6}, {}, {}, "me", 2);
  CHECK(s == std::vector<slot>{{4, 0, "me"}, {5, 1, "me"}, {6, 0, "me"}});
  CHECK_THROWS_AS(make_slots({4, 5}, {1}, {}, "me", 2), std::invalid_argument);
  CHECK_THROWS_AS(make_slots({4, 5}, {}, {"h"}, "me", 2), std::invalid_argument);
}

TEST_CASE("the same map changes nothing") {
  const auto cur = on("a", {0, 1, 2, 3});
  auto p = plan_migration(cur, cur);
  CHECK(p.changes_nothing);
  CHECK(p.assigned == std::vector<int>{0, 1, 2, 3});
  CHECK(p.spawn.empty());
}

TEST_CASE("a shrink keeps the ranks on remaining processors and drops the others") {
  auto p = plan_migration(on("a", {0, 1, 2, 3, 4, 5, 6, 7}), on("b", {0, 1, 2, 3}));
  // Host b differs: nobody may re-pin across hosts, only keep.
  CHECK(p.assigned == std::vector<int>{0, 1, 2, 3, -1, -1, -1, -1});
  CHECK(p.spawn.empty());
  CHECK_FALSE(p.changes_nothing);
}

TEST_CASE("an expansion spawns on exactly the gained processors") {
  auto p = plan_migration(on("a", {2, 3}), on("a", {0, 1, 2, 3, 4, 5}));
  CHECK(p.assigned == std::vector<int>{2, 3});
  CHECK(p.spawn == std::vector<int>{0, 1, 4, 5});
}

TEST_CASE("a rank that lost its processor moves to a gained one on its own host") {
  std::vector<slot> cur = {{0, 0, "a"}, {1, 1, "a"}, {8, 0, "b"}};
  std::vector<slot> next = {{1, 1, "a"}, {2, 0, "a"}, {9, 1, "c"}};
  auto p = plan_migration(cur, next);
  CHECK(p.assigned == std::vector<int>{1, 0, -1});  // rank 0 re-pinned to processor 2; b has nothing left
  CHECK(p.spawn == std::vector<int>{2});             // c's processor needs a new rank
}

TEST_CASE("a map naming a processor twice or none is refused") {
  CHECK_THROWS_AS(plan_migration(on("a", {0}), {}), std::invalid_argument);
  CHECK_THROWS_AS(plan_migration(on("a", {0}), on("a", {1, 1})), std::invalid_argument);
}
