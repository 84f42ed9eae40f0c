// Unit tests of adaptive jobs with several processors per rank (-c): they
// start, grow and shrink in whole ranks, each rank's processors on one node.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "core/partition.hpp"
#include "core/scheduler.hpp"
#include "core_jobs.hpp"

using namespace aqs::core;
using kind = decision::kind;

namespace {

// Submitted in the order of their ids.
job_request rigid(job_id id, std::size_t n) { return test::rigid(id, n, 100, static_cast<double>(id)); }

// min and max in processors (whole ranks of `per_rank`), as aqsd hands them on.
job_request ranks_of(job_id id, std::size_t per_rank, std::size_t min, std::size_t max) {
  job_request r = rigid(id, min);
  r.max_pe = max;
  r.adaptive = true;
  r.shape.cpus_per_task = per_rank;
  r.shape.ntasks = min / per_rank;
  return r;
}

// Every node's share of the map is whole ranks.
bool whole_ranks(const scheduler& s, const processor_set& map, std::size_t per_rank) {
  for (const node& n : s.machine().nodes()) {
    if (map.count_range(n.first_proc, n.first_proc + n.procs) % per_rank != 0) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("an adaptive job with 2 processors per rank starts in whole ranks, each rank on one node") {
  // Three nodes of 3: 9 processors, but only 3 ranks of 2 fit (one per node).
  scheduler s(cluster::uniform(3, 3), make_strategy("equipartition"));
  auto d = s.handle(event::arrival(ranks_of(1, 2, 2, 18)), 0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == kind::start);
  CHECK(d[0].to.count() == 6);
  CHECK(whole_ranks(s, d[0].to, 2));
  // The processor no rank of it can use goes to a rigid job at once.
  d = s.handle(event::arrival(rigid(2, 3)), 1);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 2);
  CHECK(d[0].what == kind::start);
}

TEST_CASE("an adaptive job with 2 processors per rank shrinks and grows by whole ranks") {
  scheduler s(cluster::uniform(2, 4), make_strategy("equipartition"));
  auto d = s.handle(event::arrival(ranks_of(1, 2, 2, 8)), 0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.count() == 8);
  // A rigid job of 3: the adaptive job gives back 4 (two ranks), not 3.
  d = s.handle(event::arrival(rigid(2, 3)), 1);
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == kind::resize);
  CHECK(d[0].to.count() == 4);
  CHECK(whole_ranks(s, d[0].to, 2));
  d = s.handle(event::on_job(event::kind::resize_ack, 1), 2);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 2);
  // One processor is left over: no half rank of it.
  CHECK(s.get(1).size() == 4);
  // The rigid job ends: back to 8, in whole ranks.
  d = s.handle(event::completion(2), 3);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.count() == 8);
  CHECK(whole_ranks(s, d[0].to, 2));
}

TEST_CASE("processors a job cannot use in whole ranks go to the adaptive jobs that can") {
  // One node of 8, minimums 2 and 1: the 5 left would be 3 and 2 extra; the
  // 2-per-rank job takes 2 (one rank) and the 1-per-rank job the other 3.
  scheduler s(cluster::uniform(1, 8), make_strategy("equipartition"));
  s.apply(event::arrival(ranks_of(1, 2, 2, 8)));
  s.apply(event::arrival(ranks_of(2, 1, 1, 8)));
  auto d = s.decide(0);
  REQUIRE(d.size() == 2);
  CHECK(s.get(1).size() == 4);
  CHECK(s.get(2).size() == 4);
}

TEST_CASE("a size change of a job with 2 processors per rank is taken in whole ranks, never below what it asked") {
  scheduler s(cluster::uniform(1, 8), make_strategy("equipartition"));
  s.handle(event::arrival(ranks_of(1, 2, 2, 4)), 0);
  s.apply(event::change(1, 3, 7));
  CHECK(s.get(1).req.min_pe == 4);
  CHECK(s.get(1).req.max_pe == 6);
  CHECK_THROWS_AS(s.apply(event::change(1, 5, 5)), std::invalid_argument);
  CHECK_THROWS_AS(s.handle(event::arrival(ranks_of(2, 2, 3, 8)), 1), std::invalid_argument);
}

TEST_CASE("in a partition, a job with 2 processors per rank grows onto a node freed by a rigid job") {
  scheduler s(cluster::uniform(4, 3), make_strategy("equipartition"));
  s.set_partitions(parse_config("PartitionName=one Nodes=node[0-1] Default=YES MaxNodes=1\n"
                                "PartitionName=odd Nodes=node[2-3]\n", "t").partitions);
  job_request a = ranks_of(1, 1, 1, 6);
  a.partition = "one";
  REQUIRE(s.handle(event::arrival(a), 0).size() == 1);
  job_request r = rigid(2, 3);
  r.partition = "odd";
  REQUIRE(s.handle(event::arrival(r), 1).size() == 1);
  job_request k = ranks_of(3, 2, 2, 8);
  k.partition = "odd";
  auto d = s.handle(event::arrival(k), 2);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.count() == 2);
  d = s.handle(event::completion(2), 3);
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == kind::resize);
  CHECK(d[0].to.count() == 4);
  CHECK(whole_ranks(s, d[0].to, 2));
}
