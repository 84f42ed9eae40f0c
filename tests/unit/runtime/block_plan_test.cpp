// Unit tests of the redistribution planner: blocks tile the array, and the
// plan moves exactly the ranges that change owner.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>

#include "block_plan.hpp"

using namespace aqs::runtime;

TEST_CASE("blocks tile the array in order and differ in size by at most one") {
  for (std::uint64_t n : {0ull, 1ull, 2ull, 7ull, 8ull, 9ull, 1000003ull, (1ull << 40) + 5}) {
    for (std::uint64_t p = 1; p <= 9; ++p) {
      std::uint64_t next = 0, lo = ~0ull, hi = 0;
      for (std::uint64_t i = 0; i < p; ++i) {
        index_range r = block_of(n, p, i);
        CHECK(r.begin == next);
        next = r.end;
        lo = std::min(lo, r.size());
        hi = std::max(hi, r.size());
      }
      CHECK(next == n);
      CHECK(hi - lo <= 1);
    }
  }
}

TEST_CASE("the Faucets shrink from 8 to 4 ranks keeps each survivor's overlap in place") {
  // 16 elements: old blocks of 2 on ranks 0..7, new blocks of 4 on ranks 0..3.
  auto plan = plan_redistribution(16, {0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3});
  std::vector<transfer> expected = {
      {1, 0, {2, 4}}, {2, 1, {4, 6}}, {3, 1, {6, 8}}, {4, 2, {8, 10}},
      {5, 2, {10, 12}}, {6, 3, {12, 14}}, {7, 3, {14, 16}},
  };
  CHECK(plan == expected);
}

TEST_CASE("an unchanged owner list moves nothing") {
  CHECK(plan_redistribution(1000, {3, 1, 2}, {3, 1, 2}).empty());
}

TEST_CASE("bad owner lists are rejected with a clear message") {
  CHECK_THROWS_WITH_AS(plan_redistribution(10, {0, 1, 1}, {0}),
                       "redistribution: process 1 appears twice among the old owners", std::invalid_argument);
  CHECK_THROWS_AS(plan_redistribution(10, {}, {0}), std::invalid_argument);
  CHECK(plan_redistribution(0, {}, {}).empty());
}

TEST_CASE("random plans deliver every element of every new block exactly once, moving only what changes owner") {
  std::mt19937_64 rng(20261121);
  for (int round = 0; round < 3000; ++round) {
    const std::uint64_t n = (round % 5 == 0) ? rng() % 4 : rng() % 5000;
    auto pick = [&] {
      std::vector<int> all(12);
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      all.resize(1 + rng() % 8);
      return all;
    };
    const std::vector<int> old_owners = pick(), new_owners = pick();
    const auto plan = plan_redistribution(n, old_owners, new_owners);

    std::vector<int> old_owner_of(n), new_owner_of(n), covered(n, 0);
    for (std::size_t i = 0; i < old_owners.size(); ++i) {
      auto r = block_of(n, old_owners.size(), i);
      for (auto g = r.begin; g < r.end; ++g) old_owner_of[g] = old_owners[i];
    }
    for (std::size_t j = 0; j < new_owners.size(); ++j) {
      auto r = block_of(n, new_owners.size(), j);
      for (auto g = r.begin; g < r.end; ++g) new_owner_of[g] = new_owners[j];
    }
    std::uint64_t moved = 0;
    for (const transfer& t : plan) {
      REQUIRE(t.from != t.to);
      REQUIRE_FALSE(t.range.empty());
      for (auto g = t.range.begin; g < t.range.end; ++g) {
        REQUIRE(old_owner_of[g] == t.from);
        REQUIRE(new_owner_of[g] == t.to);
        ++covered[g];
      }
      moved += t.range.size();
    }
    std::uint64_t must_move = 0;
    for (std::uint64_t g = 0; g < n; ++g) {
      const bool changes = old_owner_of[g] != new_owner_of[g];
      must_move += changes ? 1 : 0;
      REQUIRE(covered[g] == (changes ? 1 : 0));
    }
    CHECK(moved == must_move);
    // At most one transfer per (from, to) pair: blocks are contiguous.
    for (std::size_t k = 1; k < plan.size(); ++k) {
      REQUIRE_FALSE((plan[k].from == plan[k - 1].from && plan[k].to == plan[k - 1].to));
    }
  }
}
