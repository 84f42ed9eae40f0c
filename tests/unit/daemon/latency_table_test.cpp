// Unit tests of latency_table: rows replaced per report, nonsense dropped, DOWN nodes forgotten.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "daemon/latency_table.hpp"

using aqs::daemon::latency_table;
using aqs::protocol::latency_sample;

namespace {
const auto peers_of_n1 = [](const std::string& name) { return name == "n2" || name == "n3"; };
}

TEST_CASE("a report replaces the whole row of the node that measured") {
  latency_table t;
  CHECK(t.set_row("n1", {{"n2", 80}, {"n3", 90}}, peers_of_n1) == 0);
  CHECK(t.row("n1") == std::vector<latency_sample>{{"n2", 80}, {"n3", 90}});
  // n3 no longer answered: it leaves the row.
  CHECK(t.set_row("n1", {{"n2", 70}}, peers_of_n1) == 0);
  CHECK(t.row("n1") == std::vector<latency_sample>{{"n2", 70}});
  CHECK(t.set_row("n1", {}, peers_of_n1) == 0);
  CHECK(t.row("n1").empty());
  CHECK(t.rows() == 0);
}

TEST_CASE("samples naming unknown nodes, the node itself or a negative time are dropped and counted") {
  latency_table t;
  CHECK(t.set_row("n1", {{"n2", 80}, {"ghost", 5}, {"n1", 1}, {"n3", -4}}, peers_of_n1) == 3);
  CHECK(t.row("n1") == std::vector<latency_sample>{{"n2", 80}});
  // A node named twice keeps its last sample.
  CHECK(t.set_row("n1", {{"n2", 80}, {"n2", 60}}, peers_of_n1) == 0);
  CHECK(t.row("n1") == std::vector<latency_sample>{{"n2", 60}});
}

TEST_CASE("a node that goes DOWN leaves its row and every column") {
  latency_table t;
  t.set_row("n1", {{"n2", 80}, {"n3", 90}}, peers_of_n1);
  t.set_row("n2", {{"n1", 81}, {"n3", 91}}, [](const std::string&) { return true; });
  t.forget("n3");
  CHECK(t.row("n1") == std::vector<latency_sample>{{"n2", 80}});
  CHECK(t.row("n2") == std::vector<latency_sample>{{"n1", 81}});
  t.forget("n2");
  CHECK(t.row("n2").empty());
  CHECK(t.row("n1").empty());
}
