// Unit tests of estimate_start: what-if runs of each strategy on small hand-checked clusters.
#include <doctest/doctest.h>

#include <chrono>
#include <ctime>
#include <optional>
#include <string_view>
#include <vector>

#include "core/scheduler.hpp"
#include "core/start_estimate.hpp"
#include "core_jobs.hpp"

using namespace aqs::core;
using namespace aqs::core::test;

namespace {

scheduler make(std::string_view policy, std::size_t nodes, std::size_t per_node) {
  return scheduler(cluster::uniform(nodes, per_node), make_strategy(policy));
}

// Decides at `now` and acknowledges every resize until nothing changes, as a
// daemon whose jobs answer at once would.
void settle(scheduler& s, double now) {
  for (int i = 0; i < 10; ++i) {
    auto d = s.decide(now);
    bool acked = false;
    for (const auto& [end, id] : std::vector(s.holding_by_end().begin(), s.holding_by_end().end())) {
      if (s.get(id).state == job_state::resizing) {
        s.apply(event::on_job(event::kind::resize_ack, id));
        acked = true;
      }
    }
    if (d.empty() && !acked) return;
  }
}

void submit(scheduler& s, const job_request& r, double now) {
  job_request q = r;
  q.submit_time = now;
  s.apply(event::arrival(q));
  settle(s, now);
}

}  // namespace

TEST_CASE("estimate_start: an idle cluster starts a job at once under every strategy") {
  for (std::string_view p : {"fcfs", "easy", "equipartition"}) {
    CAPTURE(p);
    scheduler s = make(p, 2, 4);
    CHECK(estimate_start(s, rigid(1, 8, 100), 5) == 0.0);
    CHECK(estimate_start(s, adaptive(1, 2, 8, 100), 5) == 0.0);
    CHECK(s.queue().empty());  // the real scheduler did not get the job
  }
}

TEST_CASE("estimate_start: a job bigger than the cluster never starts") {
  for (std::string_view p : {"fcfs", "easy", "equipartition"}) {
    CAPTURE(p);
    scheduler s = make(p, 2, 4);
    CHECK_FALSE(estimate_start(s, rigid(1, 9, 100), 0).has_value());
    CHECK_FALSE(estimate_start(s, adaptive(1, 9, 16, 100), 0).has_value());
  }
}

TEST_CASE("estimate_start: on a full rigid cluster, at the earliest end that frees enough") {
  for (std::string_view p : {"fcfs", "easy", "equipartition"}) {
    CAPTURE(p);
    scheduler s = make(p, 2, 4);
    submit(s, rigid(1, 4, 100), 0);  // ends at 100
    submit(s, rigid(2, 4, 50), 0);   // ends at 50
    REQUIRE(s.free_count() == 0);
    CHECK(estimate_start(s, rigid(3, 4, 10), 10) == 40.0);  // job 2's end is enough
    CHECK(estimate_start(s, rigid(3, 6, 10), 10) == 90.0);  // both must end
    CHECK(estimate_start(s, rigid(3, 8, 10), 10) == 90.0);
    // A job past its walltime is taken to end now.
    CHECK(estimate_start(s, rigid(3, 4, 10), 60) == 0.0);
    // The real scheduler is as it was.
    CHECK(s.get(1).state == job_state::running);
    CHECK(s.get(2).state == job_state::running);
    CHECK(s.holding_by_end().size() == 2);
  }
}

TEST_CASE("estimate_start: adaptive jobs above their minimum shrink for it, so it starts now") {
  scheduler s = make("equipartition", 2, 4);
  submit(s, adaptive(1, 2, 8, 100), 0);
  submit(s, adaptive(2, 2, 8, 100), 0);
  REQUIRE(s.get(1).size() == 4);
  REQUIRE(s.get(2).size() == 4);
  REQUIRE(s.free_count() == 0);
  CHECK(estimate_start(s, rigid(3, 4, 10), 1) == 0.0);
  CHECK(estimate_start(s, adaptive(3, 2, 8, 10), 1) == 0.0);
  // Only what is above the minimums: 6 needs job 1 or 2 to end.
  CHECK(estimate_start(s, rigid(3, 6, 10), 1) == 99.0);
  // The snapshot's shrinks did not touch the real jobs.
  CHECK(s.get(1).size() == 4);
  CHECK(s.get(1).state == job_state::running);
  CHECK(s.reserved_count() == 0);
}

TEST_CASE("estimate_start: a resize under way is taken as acknowledged") {
  scheduler s = make("equipartition", 2, 4);
  submit(s, adaptive(1, 2, 8, 100), 0);
  s.apply(event::arrival(rigid(2, 4, 100)));
  auto d = s.decide(1);  // job 1 shrinks to 4; job 2 waits for the ack
  REQUIRE(s.get(1).state == job_state::resizing);
  REQUIRE(s.get(2).state == job_state::pending);
  CHECK(estimate_start(s, rigid(3, 2, 10), 2) == 0.0);   // job 1 gives 2 more back
  CHECK(estimate_start(s, rigid(3, 4, 10), 2) == 98.0);  // job 1 (min 2) and job 2 leave 2 until job 1 ends at 100
  CHECK(s.get(1).state == job_state::resizing);
}

TEST_CASE("estimate_start: the queue ahead counts, in its order") {
  for (std::string_view p : {"fcfs", "easy", "equipartition"}) {
    CAPTURE(p);
    scheduler s = make(p, 2, 4);
    submit(s, rigid(1, 8, 100), 0);  // runs 0..100
    submit(s, rigid(2, 8, 100), 0);  // queued: runs 100..200
    REQUIRE(s.get(2).state == job_state::pending);
    CHECK(estimate_start(s, rigid(3, 8, 10), 0) == 200.0);
    CHECK(estimate_start(s, rigid(3, 1, 10), 0) == 200.0);
    // Higher priority goes ahead of the queued job.
    job_request urgent = rigid(3, 8, 10);
    urgent.priority = 5;
    CHECK(estimate_start(s, urgent, 0) == 100.0);
  }
}

TEST_CASE("estimate_start: EASY backfills a short job now and holds a long one behind the reservation") {
  scheduler s = make("easy", 2, 4);
  submit(s, rigid(1, 6, 100), 0);  // runs 0..100, 2 free
  submit(s, rigid(2, 8, 100), 0);  // head: reserved at 100
  REQUIRE(s.free_count() == 2);
  CHECK(estimate_start(s, rigid(3, 2, 50), 0) == 0.0);    // ends before the shadow time: backfilled
  CHECK(estimate_start(s, rigid(3, 2, 200), 0) == 200.0); // would delay the head: after it
  // fcfs never backfills.
  scheduler f = make("fcfs", 2, 4);
  submit(f, rigid(1, 6, 100), 0);
  submit(f, rigid(2, 8, 100), 0);
  CHECK(estimate_start(f, rigid(3, 2, 50), 0) == 200.0);
}

TEST_CASE("estimate_start: equipartition backfills under the head's reservation as EASY does") {
  scheduler s = make("equipartition", 2, 4);
  submit(s, rigid(1, 6, 100), 0);
  submit(s, rigid(2, 8, 100), 0);
  REQUIRE(s.free_count() == 2);
  CHECK(estimate_start(s, rigid(3, 2, 50), 0) == 0.0);
  CHECK(estimate_start(s, rigid(3, 2, 200), 0) == 200.0);
}

TEST_CASE("estimate_start: a cluster with nodes down waits for nothing it cannot see") {
  scheduler s = make("easy", 2, 4);
  s.apply(event::on_node(event::kind::node_down, 1));
  // Fits the cluster, not its UP nodes, and no job will end to change that.
  CHECK_FALSE(estimate_start(s, rigid(1, 6, 10), 0).has_value());
  CHECK(estimate_start(s, rigid(1, 4, 10), 0) == 0.0);
}

TEST_CASE("estimate_start: 1,000 queued jobs on 1,024 processors answer in milliseconds") {
  for (std::string_view p : {"easy", "equipartition", "fcfs"}) {
    CAPTURE(p);
    scheduler s = make(p, 32, 32);
    job_id id = 1;
    // A full machine: 64 jobs of 16, ending over the next hour; then 1,000 queued.
    for (int i = 0; i < 64; ++i, ++id) {
      s.apply(event::arrival(p == "equipartition" && i % 2 == 0 ? adaptive(id, 8, 32, 600.0 + 50.0 * i)
                                                                 : rigid(id, 16, 600.0 + 50.0 * i)));
    }
    settle(s, 0);
    for (int i = 0; i < 1000; ++i, ++id) {
      job_request r = rigid(id, 1 + static_cast<std::size_t>((i * 37) % 64), 300.0 + 10.0 * (i % 50));
      r.submit_time = 1;
      s.apply(event::arrival(r));
    }
    settle(s, 1);
    REQUIRE(s.queue().size() >= 900);
    // CPU time as well as wall time: the machine running the tests may be busy.
    const std::clock_t c0 = std::clock();
    const auto t0 = std::chrono::steady_clock::now();
    auto at = estimate_start(s, rigid(id, 64, 600), 2);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double cpu_ms = 1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    REQUIRE(at.has_value());
    CHECK(*at > 0);
    MESSAGE(p << ": starts in " << *at << " s, estimated in " << ms << " ms (" << cpu_ms << " ms CPU) with " << s.queue().size() << " queued");
    CHECK(ms < 1000);  // a loose bound for shared, sanitized builds; the measured time is printed above
  }
}
