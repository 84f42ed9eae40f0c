// Unit tests of the compact per-node processor map display.
#include <doctest/doctest.h>

#include <vector>

#include "core/map_display.hpp"

using namespace aqs::core;
using aqs::core::processor_set;

namespace {
// Four nodes of 4 processors: node0 0-3, node1 4-7, node2 8-11, node3 12-15.
std::vector<node_span> four_nodes() {
  return {{"node0", 0, 4}, {"node1", 4, 4}, {"node2", 8, 4}, {"node3", 12, 4}};
}
}  // namespace

TEST_CASE("a map shows as node:local-range items in processor order") {
  const auto nodes = four_nodes();
  CHECK(format_processor_map(nodes, processor_set::from_ranges(16, "8-13")) == "node2:0-3,node3:0-1");
  CHECK(format_processor_map(nodes, processor_set::from_string("00011100")) == "node0:3,node1:0-1");
  CHECK(format_processor_map(nodes, processor_set::from_ranges(16, "0-15")) ==
        "node0:0-3,node1:0-3,node2:0-3,node3:0-3");
  CHECK(format_processor_map(nodes, processor_set(16)).empty());
}

TEST_CASE("a node with a gap in its processors appears once per run") {
  const auto nodes = four_nodes();
  CHECK(format_processor_map(nodes, processor_set::from_ranges(16, "4-5,7,9")) == "node1:0-1,node1:3,node2:1");
}

TEST_CASE("node order in the input does not matter and uneven nodes work") {
  const std::vector<node_span> nodes = {{"big", 2, 6}, {"small", 0, 2}};
  CHECK(format_processor_map(nodes, processor_set::from_ranges(8, "1-3,7")) == "small:1,big:0-1,big:5");
}

TEST_CASE("processors no node covers are shown by global number under ?") {
  const std::vector<node_span> nodes = {{"n0", 0, 2}};
  CHECK(format_processor_map(nodes, processor_set::from_ranges(6, "1-4")) == "n0:1,?:2-4");
  CHECK(format_processor_map({}, processor_set::from_ranges(4, "0,2")) == "?:0,?:2");
}
