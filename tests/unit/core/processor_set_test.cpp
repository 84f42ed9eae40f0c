// Unit tests of processor_set: text forms, set algebra, word boundaries.
#include <doctest/doctest.h>

#include <random>
#include <set>
#include <stdexcept>

#include "core/processor_set.hpp"

using aqs::core::processor_set;

TEST_CASE("the Faucets text form 00011100 is processors 3, 4 and 5") {
  auto s = processor_set::from_string("00011100");
  CHECK(s.size() == 8);
  CHECK(s.count() == 3);
  CHECK(s.members() == std::vector<std::size_t>{3, 4, 5});
  CHECK(s.to_string() == "00011100");
  CHECK(s.to_ranges() == "3-5");
}

TEST_CASE("a text form with a character other than 0 or 1 is rejected with its position") {
  CHECK_THROWS_WITH_AS(processor_set::from_string("0102"), "processor map: character 3 is not 0 or 1",
                       std::invalid_argument);
  CHECK_THROWS_AS(processor_set::from_string("01 1"), std::invalid_argument);
}

TEST_CASE("the range form round-trips and rejects bad input") {
  auto s = processor_set::from_ranges(200, "0-3,7,63-65,199");
  CHECK(s.count() == 4 + 1 + 3 + 1);
  CHECK(s.to_ranges() == "0-3,7,63-65,199");
  CHECK(processor_set::from_ranges(10, "").none());
  CHECK_THROWS_AS(processor_set::from_ranges(10, "5-3"), std::invalid_argument);
  CHECK_THROWS_AS(processor_set::from_ranges(10, "10"), std::invalid_argument);
  CHECK_THROWS_AS(processor_set::from_ranges(10, "1,,2"), std::invalid_argument);
  CHECK_THROWS_AS(processor_set::from_ranges(10, "a-b"), std::invalid_argument);
  CHECK_THROWS_AS(processor_set::from_ranges(10, "1-"), std::invalid_argument);
}

TEST_CASE("ranges across word boundaries set exactly the requested processors") {
  for (std::size_t first : {0u, 1u, 63u, 64u, 65u, 127u}) {
    for (std::size_t len : {0u, 1u, 2u, 64u, 65u, 130u}) {
      auto s = processor_set::range(300, first, first + len);
      CHECK(s.count() == len);
      CHECK(s.count_range(first, first + len) == len);
      if (len > 0) {
        CHECK(s.first() == first);
        CHECK(s.test(first + len - 1));
      }
      CHECK_FALSE(s.test(first + len));
    }
  }
}

TEST_CASE("set algebra agrees with std::set on random sets") {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 200; ++round) {
    std::size_t na = rng() % 300, nb = rng() % 300;
    processor_set a(na), b(nb);
    std::set<std::size_t> sa, sb;
    for (std::size_t i = 0; i < na; ++i) if (rng() % 3 == 0) { a.set(i); sa.insert(i); }
    for (std::size_t i = 0; i < nb; ++i) if (rng() % 3 == 0) { b.set(i); sb.insert(i); }
    auto to_set = [](const processor_set& s) {
      auto m = s.members();
      return std::set<std::size_t>(m.begin(), m.end());
    };
    std::set<std::size_t> uni = sa, inter, diff;
    uni.insert(sb.begin(), sb.end());
    for (auto x : sa) (sb.count(x) ? inter : diff).insert(x);
    CHECK(to_set(a | b) == uni);
    CHECK(to_set(a & b) == inter);
    CHECK(to_set(a - b) == diff);
    CHECK((a | b).size() == std::max(na, nb));
    CHECK(a.intersects(b) == !inter.empty());
    CHECK(a.is_subset_of(b) == (diff.empty()));
    CHECK((a & b).is_subset_of(a));
    auto low = a.lowest(5);
    CHECK(low.count() == std::min<std::size_t>(5, sa.size()));
    CHECK(low.is_subset_of(a));
    CHECK(processor_set::from_string(a.to_string()) == a);
    CHECK(processor_set::from_ranges(na, a.to_ranges()) == a);
  }
}

TEST_CASE("find_next walks the members in order and ends with npos") {
  auto s = processor_set::from_ranges(130, "0,64,129");
  CHECK(s.find_next(0) == 0);
  CHECK(s.find_next(1) == 64);
  CHECK(s.find_next(65) == 129);
  CHECK(s.find_next(130) == processor_set::npos);
  CHECK(processor_set(0).first() == processor_set::npos);
}

TEST_CASE("shrinking the universe drops processors beyond it") {
  auto s = processor_set::from_ranges(130, "10,100,129");
  s.resize(101);
  CHECK(s.to_ranges() == "10,100");
  s.resize(64);
  CHECK(s.to_ranges() == "10");
  CHECK(s.count() == 1);
}

TEST_CASE("set and reset outside the universe throw and test is false") {
  processor_set s(4);
  CHECK_THROWS_AS(s.set(4), std::out_of_range);
  CHECK_THROWS_AS(s.reset(100), std::out_of_range);
  CHECK_FALSE(s.test(1000));
}

TEST_CASE("find_next_unset, last and highest walk the set word by word") {
  processor_set s(200);
  s.set_range(0, 70);
  s.set(130);
  CHECK(s.find_next_unset(0) == 70);
  CHECK(s.find_next_unset(70) == 70);
  CHECK(s.find_next_unset(130) == 131);
  CHECK(s.last() == 130);
  CHECK(processor_set(10).last() == processor_set::npos);
  processor_set full(128);
  full.set_range(0, 128);
  CHECK(full.find_next_unset(5) == processor_set::npos);
  CHECK(s.highest(3).members() == std::vector<std::size_t>{68, 69, 130});
  CHECK(s.highest(500).count() == s.count());
  CHECK(s.highest(0).none());
  processor_set t(100);
  t.set_range(60, 100);
  CHECK(s.count_common(t) == 10);
  CHECK(t.count_common(s) == 10);
  CHECK(s.count_common(processor_set(0)) == 0);
}
