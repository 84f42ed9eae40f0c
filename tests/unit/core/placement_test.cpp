// Unit tests of placement: best-fit ranges, adjacent growth, tail shrinking.
#include <doctest/doctest.h>

#include <stdexcept>

#include "core/placement.hpp"

using aqs::core::place_grow;
using aqs::core::place_new;
using aqs::core::place_shrink;
using aqs::core::processor_set;

TEST_CASE("a new job goes into the smallest free range that holds it, from its start") {
  auto free = processor_set::from_string("1111000110011111");
  CHECK(place_new(free, 2).to_string() == "0000000110000000");
  CHECK(place_new(free, 3).to_string() == "1110000000000000");
  CHECK(place_new(free, 5).to_string() == "0000000000011111");
}

TEST_CASE("a job no free range can hold takes the longest ranges first") {
  auto free = processor_set::from_string("1100111000011110");
  CHECK(place_new(free, 6).to_string() == "0000110000011110");
  CHECK_THROWS_AS(place_new(free, 10), std::invalid_argument);
}

TEST_CASE("a growing job keeps its processors and takes the adjacent free ones first") {
  auto held = processor_set::from_string("0001100000000000");
  auto free = processor_set::from_string("1110011000000111");
  auto grown = place_grow(held, free, 3);
  CHECK(held.is_subset_of(grown));
  CHECK(grown.to_string() == "0011111000000000");
  auto more = place_grow(held, free, 7);
  CHECK(more.count() == 9);
  CHECK(held.is_subset_of(more));
  CHECK_THROWS_AS(place_grow(held, free, 20), std::invalid_argument);
  CHECK_THROWS_AS(place_grow(held, held, 1), std::invalid_argument);
}

TEST_CASE("a shrinking job gives back its highest processors and moves only those ranks") {
  auto held = processor_set::from_string("0011110011000000");
  auto kept = place_shrink(held, 3);
  CHECK(kept.to_string() == "0011100000000000");
  CHECK((held - kept).count() == 3);
  CHECK_THROWS_AS(place_shrink(held, 6), std::invalid_argument);
}

TEST_CASE("a shrink gives back the processors it is told to keep only after all the others") {
  auto held = processor_set::from_string("1111111100000000");
  auto keep = processor_set::from_string("0000111100000000");  // e.g. on a drained node
  CHECK(place_shrink(held, 3, keep).to_string() == "1000111100000000");
  CHECK(place_shrink(held, 6, keep).to_string() == "0000110000000000");
  CHECK(place_shrink(held, 3, processor_set(16)) == place_shrink(held, 3));
  CHECK_THROWS_AS(place_shrink(held, 8, keep), std::invalid_argument);
}

TEST_CASE("placement on a 9,216-processor machine works across word boundaries") {
  processor_set free(9216);
  free.set_range(100, 9000);
  auto a = place_new(free, 4096);
  CHECK(a.count() == 4096);
  CHECK(a.first() == 100);
  CHECK(a.last() == 4195);
  free -= a;
  auto g = place_grow(a, free, 1000);
  CHECK(g.count() == 5096);
  CHECK(g.last() == 5195);
  auto s = place_shrink(g, 5000);
  CHECK(s.count() == 96);
  CHECK(s.last() == 195);
}

TEST_CASE("a node limit leaves a job the free processors of its own nodes and of the emptiest others") {
  using aqs::core::cluster;
  using aqs::core::nodes_spanned;
  using aqs::core::within_nodes;
  const cluster c = cluster::uniform(4, 4);  // 0-3, 4-7, 8-11, 12-15
  processor_set free(16);
  free.set_range(2, 4);    // node0: 2 free
  free.set_range(5, 8);    // node1: 3 free
  free.set_range(8, 12);   // node2: 4 free
  free.set_range(12, 13);  // node3: 1 free
  processor_set none(16);
  CHECK(within_nodes(c, none, free, 0) == free);
  // No processors yet: the two nodes with the most free, node2 then node1.
  processor_set two = within_nodes(c, none, free, 2);
  CHECK(two.count() == 7);
  CHECK(nodes_spanned(c, two) == 2);
  CHECK(two.test(8));
  CHECK(two.test(5));
  // Holding node3: its own free ones and the emptiest other node only.
  processor_set held(16);
  held.set(13);
  processor_set mine = within_nodes(c, held, free, 2);
  CHECK(mine.count() == 5);
  CHECK(mine.test(12));
  CHECK(mine.count_range(8, 12) == 4);
  // Already on as many nodes as it may use: only those.
  held.set(0);
  processor_set full = within_nodes(c, held, free, 2);
  CHECK(full.count() == 3);
  CHECK(full.test(2));
  CHECK(full.test(12));
  CHECK(nodes_spanned(c, held) == 2);
}
