// Unit tests of maps, the launch environment's cpu and host lists, and the
// migration plan (who keeps, re-pins, leaves or is spawned).
#include <doctest/doctest.h>

#include <stdexcept>

#include "migration_plan.hpp"
#include "placement.hpp"

using namespace aqs::runtime;

namespace {
// Processor p on cpu `cpu` of `host`, a rank of one processor.
slot at(int p, int cpu, const std::string& host) {
  slot s;
  s.proc = p;
  s.cpu = cpu;
  s.host = host;
  return s;
}
std::vector<slot> on(const std::string& host, std::initializer_list<int> procs) {
  std::vector<slot> out;
  for (int p : procs) out.push_back(at(p, p % 2, host));
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
  CHECK(s == std::vector<slot>{at(4, 1, "h1"), at(5, 0, "h2")});
  s = make_slots({4, 5, 6}, {}, {}, "me", 2);
  CHECK(s == std::vector<slot>{at(4, 0, "me"), at(5, 1, "me"), at(6, 0, "me")});
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
  std::vector<slot> cur = {at(0, 0, "a"), at(1, 1, "a"), at(8, 0, "b")};
  std::vector<slot> next = {at(1, 1, "a"), at(2, 0, "a"), at(9, 1, "c")};
  auto p = plan_migration(cur, next);
  CHECK(p.assigned == std::vector<int>{1, 0, -1});  // rank 0 re-pinned to processor 2; b has nothing left
  CHECK(p.spawn == std::vector<int>{2});             // c's processor needs a new rank
}

TEST_CASE("a map naming a processor twice or none is refused") {
  CHECK_THROWS_AS(plan_migration(on("a", {0}), {}), std::invalid_argument);
  CHECK_THROWS_AS(plan_migration(on("a", {0}), on("a", {1, 1})), std::invalid_argument);
}

// ---- ranks of several processors (-c C) ------------------------------------

namespace {
// The ranks of `map` on hosts of `per_host` processors each (host "h<k>" for
// processors k*per_host ..), cpu = processor % per_host, `c` per rank.
std::vector<slot> ranks_on(const std::string& map, int per_host, int c) {
  std::vector<int> cpus;
  std::vector<std::string> hosts;
  const auto procs = parse_map(map);
  for (int p : procs) {
    cpus.push_back(p % per_host);
    hosts.push_back("h" + std::to_string(p / per_host));
  }
  return group_ranks(make_slots(procs, cpus, hosts, "me", 2), c);
}
std::vector<std::vector<int>> procs_of_all(const std::vector<slot>& v) {
  std::vector<std::vector<int>> out;
  for (const auto& s : v) out.push_back(procs_of(s));
  return out;
}
std::string error_of(const std::string& map, int per_host, int c) {
  try {
    ranks_on(map, per_host, c);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("with C processors per rank, each rank takes C consecutive processors of one host, in map order") {
  // Two hosts of 4: 2 ranks on h0, 1 on h1.
  const auto r = ranks_on("11110110", 4, 2);
  CHECK(procs_of_all(r) == std::vector<std::vector<int>>{{0, 1}, {2, 3}, {5, 6}});
  CHECK(cpus_of(r[2]) == std::vector<int>{1, 2});
  CHECK(r[2].host == "h1");
  CHECK(r[2].proc == 5);  // a rank is known by its first processor
  CHECK(r[2].cpu == 1);
  // Its map is every processor of every rank.
  CHECK(format_map(r, 8) == "11110110");
  // One processor per rank is the map itself.
  const auto each = ranks_on("0110", 4, 1);
  CHECK(each == make_slots({1, 2}, {1, 2}, {"h0", "h0"}, "me", 2));
  CHECK(procs_of(each[0]) == std::vector<int>{1});
}

TEST_CASE("a host holding processors that are not a multiple of C is refused in one line") {
  CHECK(error_of("11101100", 4, 2) ==
        "the map has 3 processors on host h0, not a multiple of the job's 2 processors per rank");
  CHECK(error_of("111", 8, 2).find('\n') == std::string::npos);
  CHECK_FALSE(error_of("111", 8, 2).empty());
  CHECK(error_of("111111", 8, 3).empty());
  CHECK_THROWS_AS(group_ranks({}, 0), std::invalid_argument);
}

TEST_CASE("the job's processors per rank come from AQS_CPUS_PER_TASK, unset meaning 1") {
  CHECK(parse_cpus_per_task(nullptr) == 1);
  CHECK(parse_cpus_per_task("") == 1);
  CHECK(parse_cpus_per_task("4") == 4);
  CHECK_THROWS_AS(parse_cpus_per_task("0"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpus_per_task("2x"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpus_per_task("-2"), std::invalid_argument);
}

TEST_CASE("the migration plan works over ranks of C processors: keep, re-pin, spawn and drop whole ranks") {
  // 8 processors of h0, 4 ranks of 2, shrink to 2 ranks: the first two keep theirs.
  auto p = plan_migration(ranks_on("11111111", 8, 2), ranks_on("1111", 8, 2));
  CHECK(p.assigned == std::vector<int>{0, 1, -1, -1});
  CHECK(p.spawn.empty());
  CHECK_FALSE(p.changes_nothing);
  // Grow back: the two gained ranks are spawned (or called back), whole.
  p = plan_migration(ranks_on("1111", 8, 2), ranks_on("11111111", 8, 2));
  CHECK(p.assigned == std::vector<int>{0, 1});
  CHECK(p.spawn == std::vector<int>{2, 3});
  // A move within the host re-pins the rank to its new set of cpus.
  p = plan_migration(ranks_on("11", 8, 2), ranks_on("0011", 8, 2));
  CHECK(p.assigned == std::vector<int>{0});
  CHECK(p.spawn.empty());
  CHECK_FALSE(p.changes_nothing);
  // The same ranks change nothing; the same processors on other cpus is a
  // change (a re-pin).
  CHECK(plan_migration(ranks_on("1111", 8, 2), ranks_on("1111", 8, 2)).changes_nothing);
  std::vector<slot> wider = ranks_on("1111", 8, 2);
  wider[0].more_cpus = {7};
  CHECK_FALSE(plan_migration(ranks_on("1111", 8, 2), wider).changes_nothing);
  // A processor named by two ranks is refused.
  std::vector<slot> twice = ranks_on("1111", 8, 2);
  twice[1].more_procs = {1};
  CHECK_THROWS_AS(plan_migration(ranks_on("11", 8, 2), twice), std::invalid_argument);
}
