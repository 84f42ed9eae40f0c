// Unit tests of jobs on named nodes (--nodelist, --exclude): they get
// processors there only, wait without holding up others when those are
// busy, and a list that names no usable node never fits.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/scheduler.hpp"
#include "core_jobs.hpp"

using namespace aqs::core;
using kind = decision::kind;

namespace {

scheduler three_nodes(std::string_view policy) { return scheduler(cluster::uniform(3, 4), make_strategy(policy)); }

job_request on(job_request r, std::vector<std::string> nodelist, std::vector<std::string> exclude = {}) {
  r.nodelist = std::move(nodelist);
  r.exclude = std::move(exclude);
  return r;
}

}  // namespace

TEST_CASE("a job with a node list runs there only; one excluding nodes never runs on them") {
  scheduler s = three_nodes("easy");
  auto d = s.handle(event::arrival(on(test::rigid(1, 2, 100, 0), {"node2"})), 0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.is_subset_of(processor_set::range(12, 8, 12)));
  d = s.handle(event::arrival(on(test::rigid(2, 6, 100, 1), {}, {"node0"})), 1);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.is_subset_of(processor_set::range(12, 4, 12)));
  CHECK(d[0].to.count() == 6);
}

TEST_CASE("a job whose named nodes are busy waits; jobs after it still start") {
  scheduler s = three_nodes("fcfs");
  s.handle(event::arrival(test::rigid(1, 4, 100, 0)), 0);  // node0
  auto d = s.handle(event::arrival(on(test::rigid(2, 2, 100, 1), {"node0"})), 1);
  CHECK(d.empty());
  d = s.handle(event::arrival(test::rigid(3, 4, 100, 2)), 2);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 3);
  // Once node0 is free it starts there.
  d = s.handle(event::completion(1), 3);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 2);
  CHECK(d[0].to.is_subset_of(processor_set::range(12, 0, 4)));
}

TEST_CASE("an adaptive job on named nodes grows only there") {
  scheduler s = three_nodes("equipartition");
  auto d = s.handle(event::arrival(on(test::adaptive(1, 1, 12, 100, 0), {"node0", "node1"})), 0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.is_subset_of(processor_set::range(12, 0, 8)));
  CHECK(d[0].to.count() == 8);
}

TEST_CASE("named nodes the cluster does not have, or too few processors on them, never fit") {
  scheduler s = three_nodes("fcfs");
  CHECK(s.never_fits(on(test::rigid(1, 2), {"node9"})) ==
        "none of the nodes it may use (--nodelist, --exclude) is in the cluster");
  CHECK(s.never_fits(on(test::rigid(1, 6), {"node1"})) == "it needs 6 processors; there are 4");
  CHECK(s.never_fits(on(test::rigid(1, 12), {}, {"node1"})) == "it needs 12 processors; there are 8");
  CHECK_FALSE(s.never_fits(on(test::rigid(1, 4), {"node1"})));
  CHECK_FALSE(s.allowed_procs(test::rigid(1, 4)));
}
