// Unit tests of shaped placement: tasks per node, cpus per task, node
// counts, memory, GPUs, whole nodes; and the refusal reasons.
#include <doctest/doctest.h>

#include <map>
#include <memory>

#include "core/geometry.hpp"
#include "core/scheduler.hpp"
#include "core/strategy.hpp"

using namespace aqs::core;

namespace {

// Four nodes of 8 processors, 16 GB and 2 GPUs each.
struct four_nodes {
  cluster c = cluster::uniform(4, 8);
  std::vector<node_resources> res = std::vector<node_resources>(4, node_resources{16384, 2, 0, 0, 0, false});
  processor_set free = processor_set::range(32, 0, 32);
};

std::vector<std::size_t> tasks_of(const shaped_allocation& a) {
  std::vector<std::size_t> out;
  for (const auto& n : a.nodes) out.push_back(n.tasks);
  return out;
}

}  // namespace

TEST_CASE("tasks per node and nodes: -N 2 --ntasks-per-node=4 takes 4 processors on each of 2 nodes") {
  four_nodes m;
  job_shape s;
  s.tasks_per_node = 4;
  s.min_nodes = s.max_nodes = 2;
  s.ntasks = 8;
  auto a = place_shaped(m.c, m.free, m.res, s, 8);
  REQUIRE(a);
  CHECK(a->nodes.size() == 2);
  CHECK(tasks_of(*a) == std::vector<std::size_t>{4, 4});
  CHECK(a->procs.count() == 8);
  for (const auto& n : a->nodes) CHECK(a->procs.count_range(n.node * 8, n.node * 8 + 8) == 4);
}

TEST_CASE("cpus per task keep a task's processors on one node") {
  four_nodes m;
  // Node 0 has 5 free, node 1 has 8: a task of 6 fits only on node 1.
  m.free = processor_set::range(32, 3, 32);
  job_shape s;
  s.cpus_per_task = 6;
  s.ntasks = 1;
  auto a = place_shaped(m.c, m.free, m.res, s, 6);
  REQUIRE(a);
  REQUIRE(a->nodes.size() == 1);
  CHECK(a->nodes[0].node == 1);
  CHECK(a->procs.count() == 6);
  s.cpus_per_task = 9;
  CHECK_FALSE(place_shaped(m.c, m.free, m.res, s, 9));
  CHECK(never_fits(m.c, m.res, {0, 1, 2, 3}, s, 9).value_or("").find("largest node has 8") != std::string::npos);
}

TEST_CASE("-N 2 -n 5 lays tasks out as Slurm's block distribution: 3 and 2") {
  four_nodes m;
  job_shape s;
  s.min_nodes = s.max_nodes = 2;
  s.ntasks = 5;
  auto a = place_shaped(m.c, m.free, m.res, s, 5);
  REQUIRE(a);
  CHECK(tasks_of(*a) == std::vector<std::size_t>{3, 2});
  CHECK(task_layout({3, 2}, 1, 5) == std::vector<std::size_t>{3, 2});
  CHECK(tasks_per_node_text({3, 3, 3, 2}) == "3(x3),2");
}

TEST_CASE("a node range takes the fewest nodes that hold the tasks") {
  four_nodes m;
  job_shape s;
  s.min_nodes = 1;
  s.max_nodes = 3;
  s.ntasks = 12;
  auto a = place_shaped(m.c, m.free, m.res, s, 12);
  REQUIRE(a);
  CHECK(a->nodes.size() == 2);
  s.ntasks = 30;
  CHECK_FALSE(place_shaped(m.c, m.free, m.res, s, 30));
  CHECK(never_fits(m.c, m.res, {0, 1, 2, 3}, s, 30));
}

TEST_CASE("memory per node and per cpu, and GPUs, limit where tasks go") {
  four_nodes m;
  m.res[0].memory_used_mb = 10000;  // 6384 MB left on node 0
  job_shape s;
  s.mem_per_node_mb = 8000;
  s.ntasks = 1;
  auto a = place_shaped(m.c, m.free, m.res, s, 1);
  REQUIRE(a);
  CHECK(a->nodes[0].node != 0);
  CHECK(a->nodes[0].memory_mb == 8000);

  job_shape per_cpu;
  per_cpu.mem_per_cpu_mb = 4096;  // 4 tasks per 16 GB node
  per_cpu.ntasks = 8;
  per_cpu.max_nodes = 2;
  a = place_shaped(m.c, m.free, m.res, per_cpu, 8);
  REQUIRE(a);
  CHECK(tasks_of(*a) == std::vector<std::size_t>{4, 4});
  CHECK(a->nodes[0].node != 0);  // node 0 has room for 1 only

  job_shape gpus;
  gpus.gpus_per_node = 3;
  gpus.ntasks = 1;
  CHECK_FALSE(place_shaped(m.c, m.free, m.res, gpus, 1));
  CHECK(never_fits(m.c, m.res, {0, 1, 2, 3}, gpus, 1).value_or("").find("GPUs") != std::string::npos);
  gpus.gpus_per_node = 2;
  CHECK(place_shaped(m.c, m.free, m.res, gpus, 1));
}

TEST_CASE("an exclusive job takes whole idle nodes only") {
  four_nodes m;
  m.free = processor_set::range(32, 1, 32);  // node 0 is in use
  m.res[0].jobs = 1;
  job_shape s;
  s.exclusive = true;
  s.ntasks = 2;
  auto a = place_shaped(m.c, m.free, m.res, s, 2);
  REQUIRE(a);
  CHECK(a->nodes[0].node == 1);
  CHECK(a->procs.count() == 8);  // all of node 1
  CHECK(a->nodes[0].tasks == 2);
}

TEST_CASE("the scheduler starts a shaped job only where it fits, and later jobs wait behind it") {
  cluster c = cluster::uniform(2, 4);
  scheduler s(c, make_strategy("fcfs"));
  double now = 0;
  // Job 1 takes 2 processors on node 0 and 2 on node 1 would be impossible
  // for place_new; here a plain job of 3 takes node 0 (best fit of 8 free: 0-2).
  job_request a;
  a.id = 1;
  a.min_pe = a.max_pe = 3;
  auto d = s.handle(event::arrival(a), now);
  REQUIRE(d.size() == 1);
  // Job 2 wants 2 tasks on one node: node 0 has 1 free, node 1 has 4.
  job_request b;
  b.id = 2;
  b.min_pe = b.max_pe = 4;
  b.shape.ntasks = 1;
  b.shape.cpus_per_task = 4;
  d = s.handle(event::arrival(b), now);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.count_range(4, 8) == 4);
  // Job 3 wants 2 nodes with 1 task each: only 1 processor is free, it waits.
  job_request e;
  e.id = 3;
  e.min_pe = e.max_pe = 1;
  e.shape.ntasks = 1;
  e.shape.min_nodes = 2;
  e.shape.max_nodes = 2;
  CHECK(s.never_fits(e));  // 1 task cannot span 2 nodes
  e.min_pe = e.max_pe = 2;
  e.shape.ntasks = 2;
  CHECK_FALSE(s.never_fits(e));
  d = s.handle(event::arrival(e), now);
  CHECK(d.empty());
  // A plain job of 1 behind it waits too (fcfs order kept).
  job_request f;
  f.id = 4;
  d = s.handle(event::arrival(f), now);
  CHECK(d.empty());
  d = s.handle(event::completion(2), now);
  REQUIRE(d.size() == 2);
  CHECK(d[0].job == 3);
}

// ---- dependencies (core/dependency.hpp) ----
#include "core/dependency.hpp"

TEST_CASE("Slurm dependency lists parse into terms joined by all (',') or any ('?')") {
  const auto d = parse_dependency("afterok:1:2,afterany:3,after:4,afternotok:5");
  REQUIRE(d.terms.size() == 5);
  CHECK_FALSE(d.any);
  CHECK(d.terms[2].what == dependency::kind::afterany);
  CHECK(d.jobs() == std::vector<std::int64_t>{1, 2, 3, 4, 5});
  CHECK(to_string(d) == "afterok:1:2,afterany:3,after:4,afternotok:5");
  CHECK(parse_dependency("afterok:7?afternotok:8").any);
  CHECK(to_string(parse_dependency("afterok:7?afternotok:8")) == "afterok:7?afternotok:8");
  CHECK(parse_dependency("afterok:1:2").plain_afterok());
  CHECK_FALSE(parse_dependency("afterany:1").plain_afterok());
  CHECK(parse_dependency("singleton").singleton);
  CHECK(parse_dependency("singleton").terms.empty());
  CHECK_FALSE(parse_dependency("singleton").plain_afterok());  // it must reach aqsd as an expression
  CHECK(to_string(parse_dependency("afterok:3,singleton")) == "singleton,afterok:3");
  CHECK_THROWS_WITH(parse_dependency("aftercorr:1"), doctest::Contains("'aftercorr' is not supported"));
  CHECK_THROWS_WITH(parse_dependency("afterok:1,afterok:2?afterok:3"), doctest::Contains("mixes"));
  CHECK_THROWS_WITH(parse_dependency("afterok:x"), doctest::Contains("invalid job id 'x'"));
  CHECK_THROWS_WITH(parse_dependency("afterok"), doctest::Contains("names no job"));
}

TEST_CASE("each dependency type is met, waits or becomes impossible by its job's state") {
  std::map<std::int64_t, job_state> states;
  auto of = [&](std::int64_t j) -> std::optional<job_state> {
    auto it = states.find(j);
    return it == states.end() ? std::nullopt : std::optional<job_state>(it->second);
  };
  using k = dependency_verdict::kind;
  states[1] = job_state::pending;
  CHECK(evaluate(parse_dependency("after:1"), of).what == k::waiting);
  states[1] = job_state::running;
  CHECK(evaluate(parse_dependency("after:1"), of).what == k::ready);
  CHECK(evaluate(parse_dependency("afterany:1"), of).what == k::waiting);
  states[1] = job_state::failed;
  CHECK(evaluate(parse_dependency("afterany:1"), of).what == k::ready);
  CHECK(evaluate(parse_dependency("afternotok:1"), of).what == k::ready);
  const auto v = evaluate(parse_dependency("afterok:1"), of);
  CHECK(v.what == k::never);
  CHECK(v.failed_job == 1);
  states[2] = job_state::completed;
  CHECK(evaluate(parse_dependency("afternotok:2"), of).what == k::never);
  // Any: one met term is enough; all impossible is never.
  CHECK(evaluate(parse_dependency("afterok:1?afterok:2"), of).what == k::ready);
  CHECK(evaluate(parse_dependency("afterok:1?afternotok:2"), of).what == k::never);
  CHECK(evaluate(parse_dependency("afterok:1?afterok:3"), of).what == k::waiting);
  CHECK(evaluate(parse_dependency("afterok:1?afterok:3"), of).waiting == std::vector<std::int64_t>{3});
}
