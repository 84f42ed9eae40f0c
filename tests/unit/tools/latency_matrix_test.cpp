// Unit tests of fnodes --latency: its option and its from/to matrix.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cmdline/commands.hpp"
#include "cmdline/latency_matrix.hpp"

using namespace aqs::cmdline;
using aqs::protocol::node_info;
using args = std::vector<std::string>;

namespace {
node_info node(std::string name, std::vector<aqs::protocol::latency_sample> latency = {}) {
  node_info n;
  n.name = std::move(name);
  n.latency = std::move(latency);
  return n;
}
}  // namespace

TEST_CASE("fnodes --latency is an option of its own, with --json beside it") {
  CHECK(parse_fnodes_command_line(args{"--latency"}).latency);
  CHECK_FALSE(parse_fnodes_command_line(args{}).latency);
  const auto both = parse_fnodes_command_line(args{"--latency", "--json"});
  CHECK(both.latency);
  CHECK(both.common.json);
  CHECK(fnodes_usage().find("--latency") != std::string::npos);
}

TEST_CASE("the matrix has a row per measuring node and a column per measured one, in ms") {
  const std::vector<node_info> nodes = {
      node("node0", {{"node1", 81}, {"node2", 20112}}),
      node("node1", {{"node0", 90}}),
      node("node2", {{"node0", 20250}, {"node1", 20004}}),
  };
  CHECK(format_latency_matrix(nodes) ==
        "FROM\\TO   node0   node1   node2\n"
        "node0         -   0.081  20.112\n"
        "node1     0.090       -       -\n"
        "node2    20.250  20.004       -\n");
}

TEST_CASE("nothing measured shows dashes; unknown or own names in the data are not shown") {
  const std::vector<node_info> nodes = {
      node("a", {{"a", 5}, {"ghost", 7}}),
      node("a-much-longer-name"),
  };
  CHECK(format_latency_matrix(nodes) ==
        "FROM\\TO             a  a-much-longer-name\n"
        "a                   -                   -\n"
        "a-much-longer-name  -                   -\n");
  CHECK(format_latency_matrix({}).empty());
}

TEST_CASE("round trips of seconds keep their three decimals and widen their column") {
  const std::vector<node_info> nodes = {node("x", {{"y", 60000000}}), node("y", {{"x", 0}})};
  CHECK(format_latency_matrix(nodes) ==
        "FROM\\TO      x          y\n"
        "x            -  60000.000\n"
        "y        0.000          -\n");
}
