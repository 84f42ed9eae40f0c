// Unit tests of adaptive jobs with a shape (issue 30): -N, --ntasks-per-node,
// --exclusive, --mem and GPUs are bounds kept as the job starts, grows and
// shrinks (core/adaptive_placement.hpp), and the memory, GPUs and whole
// nodes it takes follow its map.
#include <doctest/doctest.h>

#include <set>
#include <stdexcept>
#include <vector>

#include "core/adaptive_placement.hpp"
#include "core/reservation.hpp"
#include "core/scheduler.hpp"
#include "core_jobs.hpp"

using namespace aqs::core;
using kind = decision::kind;

namespace {

// Per node, how many processors of `map` it holds.
std::vector<std::size_t> per_node(const scheduler& s, const processor_set& map) {
  std::vector<std::size_t> out;
  for (const node& n : s.machine().nodes()) out.push_back(map.count_range(n.first_proc, n.first_proc + n.procs));
  return out;
}

std::size_t nodes_used(const scheduler& s, const processor_set& map) {
  std::size_t k = 0;
  for (const std::size_t n : per_node(s, map)) k += n != 0 ? 1 : 0;
  return k;
}

// Four nodes of 4 processors, 1000 MB and 2 GPUs each.
scheduler four_nodes() {
  scheduler s(cluster::uniform(4, 4), make_strategy("equipartition"));
  for (std::size_t i = 0; i < 4; ++i) s.set_node_resources(i, 1000, 2);
  return s;
}

const decision* for_job(const std::vector<decision>& d, job_id id) {
  for (const auto& x : d) {
    if (x.job == id) return &x;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("--ntasks-per-node bounds an adaptive job's ranks on every node as it starts and grows") {
  scheduler s = four_nodes();
  job_request r = test::adaptive(1, 2, 16);
  r.shape.tasks_per_node = 2;
  auto d = s.handle(event::arrival(r), 0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == kind::start);
  // 16 wanted, at most 2 a node: 8 on four nodes.
  CHECK(per_node(s, d[0].to) == std::vector<std::size_t>{2, 2, 2, 2});
  // The rest of each node goes to a plain job of 8.
  d = s.handle(event::arrival(test::rigid(2, 8)), 1);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 2);
  CHECK(d[0].what == kind::start);
}

TEST_CASE("-N MIN spreads an adaptive job's start over MIN nodes, and a shrink never leaves fewer") {
  scheduler s = four_nodes();
  job_request r = test::adaptive(1, 3, 3);
  r.shape.min_nodes = 3;
  auto d = s.handle(event::arrival(r), 0);
  REQUIRE(d.size() == 1);
  CHECK(nodes_used(s, d[0].to) == 3);
  s.handle(event::completion(1), 1);

  // Grown to the whole machine, then shrunk to its minimum of 3 for a rigid
  // job of 13: one rank is left on each of 3 nodes, not 3 on one node.
  job_request g = test::adaptive(2, 3, 16);
  g.shape.min_nodes = 3;
  d = s.handle(event::arrival(g), 2);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.count() == 16);
  d = s.handle(event::arrival(test::rigid(3, 13)), 3);
  const decision* shrink = for_job(d, 2);
  REQUIRE(shrink != nullptr);
  CHECK(shrink->what == kind::resize);
  CHECK(shrink->to.count() == 3);
  CHECK(nodes_used(s, shrink->to) == 3);
}

TEST_CASE("an adaptive job's minimum below its node minimum is refused by the core") {
  scheduler s = four_nodes();
  job_request r = test::adaptive(1, 2, 8);
  r.shape.min_nodes = 3;
  CHECK_THROWS_AS(s.apply(event::arrival(r)), std::invalid_argument);
}

TEST_CASE("--mem: an adaptive job grows only onto nodes with its memory free, takes it there and gives it back") {
  scheduler s = four_nodes();
  // A rigid job holds 800 MB of node0 and node1 (one processor each).
  job_request big = test::rigid(1, 2);
  big.shape.mem_per_node_mb = 800;
  big.shape.tasks_per_node = 1;
  big.shape.ntasks = 2;
  auto d = s.handle(event::arrival(big), 0);
  REQUIRE(d.size() == 1);
  REQUIRE(per_node(s, d[0].to) == std::vector<std::size_t>{1, 1, 0, 0});
  // The adaptive job asks 500 MB a node: nodes 2 and 3 only, though 6 more
  // processors are free on nodes 0 and 1.
  job_request a = test::adaptive(2, 1, 14);
  a.shape.mem_per_node_mb = 500;
  d = s.handle(event::arrival(a), 1);
  REQUIRE(d.size() == 1);
  CHECK(per_node(s, d[0].to) == std::vector<std::size_t>{0, 0, 4, 4});
  // A second such job finds no node with 500 MB free and waits.
  job_request a2 = test::adaptive(3, 1, 4);
  a2.shape.mem_per_node_mb = 500;
  d = s.handle(event::arrival(a2), 2);
  CHECK(for_job(d, 3) == nullptr);
  CHECK(s.get(3).state == job_state::pending);
  // The rigid job ends: the first grows onto nodes 0 and 1, the second
  // starts once a node's memory is free, never onto a node the first took.
  d = s.handle(event::completion(1), 3);
  const decision* grow = for_job(d, 2);
  const decision* start = for_job(d, 3);
  REQUIRE((grow != nullptr || start != nullptr));
  std::set<std::size_t> first_nodes, second_nodes;
  const auto map1 = grow != nullptr ? grow->to : s.get(2).procs;
  for (std::size_t i = 0; i < 4; ++i) {
    if (per_node(s, map1)[i] != 0) first_nodes.insert(i);
  }
  if (start != nullptr) {
    for (std::size_t i = 0; i < 4; ++i) {
      if (per_node(s, start->to)[i] != 0) second_nodes.insert(i);
    }
    for (const std::size_t i : second_nodes) CHECK(first_nodes.count(i) == 0);
  }
  // At most two jobs of 500 MB on a node of 1000: the memory is counted.
  CHECK(first_nodes.size() + second_nodes.size() <= 4);
}

TEST_CASE("--mem follows the map: taken on a node it enters at the grow, given back when it has left the node") {
  scheduler s = four_nodes();
  job_request a = test::adaptive(1, 1, 8);
  a.shape.mem_per_node_mb = 600;
  a.shape.tasks_per_node = 4;
  auto d = s.handle(event::arrival(a), 0);
  REQUIRE(d.size() == 1);
  REQUIRE(per_node(s, d[0].to) == std::vector<std::size_t>{4, 4, 0, 0});
  auto used = [&] {
    std::vector<std::uint64_t> out;
    for (const auto& r : s.resources()) out.push_back(r.memory_used_mb);
    return out;
  };
  CHECK(used() == std::vector<std::uint64_t>{600, 600, 0, 0});
  // A rigid job of 8 on node2 and node3: the adaptive job is not shrunk
  // (free processors are enough), memory is untouched.
  d = s.handle(event::arrival(test::rigid(2, 8)), 1);
  REQUIRE(for_job(d, 2) != nullptr);
  // A rigid job of 4 more: the adaptive job shrinks off node1, whose memory
  // stays its own until it acknowledges.
  d = s.handle(event::arrival(test::rigid(3, 4)), 2);
  const decision* sh = for_job(d, 1);
  REQUIRE(sh != nullptr);
  CHECK(sh->what == kind::resize);
  CHECK(per_node(s, sh->to) == std::vector<std::size_t>{4, 0, 0, 0});
  CHECK(used() == std::vector<std::uint64_t>{600, 600, 0, 0});
  s.handle(event::on_job(event::kind::resize_ack, 1), 3);
  CHECK(used()[1] == 0);
  CHECK(used()[0] == 600);
  // The job of 4 ends: it grows back onto node1, taking its 600 there at
  // once (before the acknowledgement), and a timed-out grow gives it back.
  d = s.handle(event::completion(3), 4);
  const decision* g = for_job(d, 1);
  REQUIRE(g != nullptr);
  CHECK(per_node(s, g->to) == std::vector<std::size_t>{4, 4, 0, 0});
  CHECK(used() == std::vector<std::uint64_t>{600, 600, 0, 0});
  s.handle(event::on_job(event::kind::resize_timeout, 1), 5);
  CHECK(used() == std::vector<std::uint64_t>{600, 0, 0, 0});
  s.handle(event::completion(2), 6);
  s.handle(event::completion(1), 7);
  CHECK(used() == std::vector<std::uint64_t>{0, 0, 0, 0});
}

TEST_CASE("--exclusive: an adaptive job holds whole nodes no other job is on, and grows and shrinks by whole nodes") {
  scheduler s(cluster::uniform(3, 4), make_strategy("equipartition"));
  REQUIRE(s.handle(event::arrival(test::rigid(1, 1)), 0).size() == 1);  // one processor of node0
  // Asked 1..6: one whole node (4), never a part of node0.
  job_request a = test::adaptive(2, 1, 6);
  a.shape.exclusive = true;
  auto d = s.handle(event::arrival(a), 1);
  REQUIRE(d.size() == 1);
  const processor_set first = d[0].to;
  CHECK(per_node(s, first) == std::vector<std::size_t>{0, 4, 0});
  CHECK(s.resources()[1].exclusive_owner);
  // Its maximum raised to 12: it grows by the one whole node it may take.
  s.apply(event::change(2, 1, 12));
  d = s.decide(2);
  const decision* g = for_job(d, 2);
  REQUIRE(g != nullptr);
  CHECK(per_node(s, g->to) == std::vector<std::size_t>{0, 4, 4});
  s.handle(event::on_job(event::kind::resize_ack, 2), 3);
  // A rigid job of 3 more: it gives back a whole node (4), not 3, and the
  // rigid job gets processors of that node once acknowledged.
  d = s.handle(event::arrival(test::rigid(3, 6)), 4);
  const decision* sh = for_job(d, 2);
  REQUIRE(sh != nullptr);
  CHECK(sh->what == kind::resize);
  CHECK(per_node(s, sh->to) == std::vector<std::size_t>{0, 4, 0});
  d = s.handle(event::on_job(event::kind::resize_ack, 2), 5);
  const decision* st = for_job(d, 3);
  REQUIRE(st != nullptr);
  CHECK((st->to & first).none());
  CHECK_FALSE(s.resources()[2].exclusive_owner);
}

TEST_CASE("--exclusive: a maximum below every node's size never fits") {
  scheduler s(cluster::uniform(2, 4), make_strategy("equipartition"));
  job_request a = test::adaptive(1, 1, 3);
  a.shape.exclusive = true;
  const auto why = s.never_fits(a, {});
  REQUIRE(why.has_value());
  CHECK(why->find("holds whole nodes") != std::string::npos);
  a.max_pe = 4;
  CHECK_FALSE(s.never_fits(a, {}).has_value());
}

TEST_CASE("GPUs per node: an adaptive job enters only nodes with its GPUs free, and they follow its map") {
  scheduler s = four_nodes();  // 2 GPUs a node
  job_request g1 = test::rigid(1, 4);
  g1.shape.gpus_per_node = 2;
  g1.shape.ntasks = 4;
  g1.shape.min_nodes = g1.shape.max_nodes = 1;
  auto d = s.handle(event::arrival(g1), 0);
  REQUIRE(d.size() == 1);
  const auto taken = per_node(s, d[0].to);
  job_request a = test::adaptive(2, 1, 16);
  a.shape.gpus_per_node = 1;
  d = s.handle(event::arrival(a), 1);
  REQUIRE(d.size() == 1);
  const auto mine = per_node(s, d[0].to);
  for (std::size_t i = 0; i < 4; ++i) CHECK((taken[i] == 0 || mine[i] == 0));
  CHECK(d[0].to.count() == 12);
  // Another one-GPU adaptive job fits beside it on the nodes it holds (2 GPUs a node).
  job_request b = test::adaptive(3, 1, 4);
  b.shape.gpus_per_node = 1;
  d = s.handle(event::arrival(b), 2);
  const decision* st = for_job(d, 3);
  // It starts once the first shrinks: never on the GPU job's node.
  if (st != nullptr && st->what == kind::start) {
    const auto on = per_node(s, st->to);
    for (std::size_t i = 0; i < 4; ++i) CHECK((taken[i] == 0 || on[i] == 0));
  }
}

TEST_CASE("max_size counts only the ranks its bounds allow") {
  scheduler s = four_nodes();
  job_request r = test::adaptive(1, 1, 64);
  r.shape.tasks_per_node = 3;
  s.apply(event::arrival(r));
  CHECK(s.max_size(s.get(1)) == 12);
  job_request m = test::adaptive(2, 1, 64);
  m.shape.mem_per_node_mb = 2000;  // no node has it
  s.apply(event::arrival(m));
  CHECK(s.max_size(s.get(2)) == 0);
}

TEST_CASE("shrink_adaptive_shaped: whole ranks, highest nodes first, drained nodes last, node minimum kept") {
  const cluster c = cluster::uniform(3, 4);
  const processor_set all = processor_set::range(12, 0, 12);
  job_shape plain, three;
  three.min_nodes = 3;
  // 6 back, no minimum: node2's 4, then node1's top 2.
  auto left = shrink_adaptive_shaped(c, plain, 1, 1, all, 6, processor_set(12));
  CHECK(left == processor_set::range(12, 0, 6));
  // Node2 drained: it is given back last.
  left = shrink_adaptive_shaped(c, plain, 1, 1, all, 4, processor_set::range(12, 8, 12));
  CHECK(left == (processor_set::range(12, 0, 4) | processor_set::range(12, 8, 12)));
  // Minimum 3 nodes: 9 back leaves one rank on each node.
  left = shrink_adaptive_shaped(c, three, 1, 3, all, 9, processor_set(12));
  CHECK(left.count() == 3);
  for (std::size_t n = 0; n < 3; ++n) CHECK(left.count_range(n * 4, n * 4 + 4) == 1);
  // Ranks of 2: 4 back is two whole ranks off node2.
  left = shrink_adaptive_shaped(c, plain, 2, 2, all, 4, processor_set(12));
  CHECK(left == processor_set::range(12, 0, 8));
  // Whole nodes: 3 back is node2's 4, while that leaves its minimum of 8.
  job_shape whole;
  whole.exclusive = true;
  left = shrink_adaptive_shaped(c, whole, 1, 8, all, 3, processor_set(12));
  CHECK(left == processor_set::range(12, 0, 8));
  // With a minimum of 9 no whole node can go.
  left = shrink_adaptive_shaped(c, whole, 1, 9, all, 3, processor_set(12));
  CHECK(left == all);
}

TEST_CASE("a reservation taking part of an --exclusive adaptive job's node does not leave it on part of a node") {
  scheduler s(cluster::uniform(2, 4), make_strategy("equipartition"));
  job_request a = test::adaptive(1, 1, 4);
  a.shape.exclusive = true;
  auto d = s.handle(event::arrival(a), 0);
  REQUIRE(d.size() == 1);
  REQUIRE(d[0].to == processor_set::range(8, 0, 4));
  // From 10, processors 0-1 are reserved for others: moving off them would
  // keep it on half of node0 (node1's 4 would pass its maximum), so it
  // stays where it is, as a rigid job would.
  s.set_reservations({advance_reservation{"maint", 10, 100, processor_set::range(8, 0, 2)}});
  d = s.decide(10);
  CHECK(for_job(d, 1) == nullptr);
  CHECK(s.get(1).procs == processor_set::range(8, 0, 4));
  CHECK(s.get(1).state == job_state::running);
}
