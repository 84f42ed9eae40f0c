// Unit tests of the simulator's event loop and metrics on hand-checked workloads.
#include <doctest/doctest.h>

#include <stdexcept>

#include "sim/simulator.hpp"
#include "sim_jobs.hpp"

using namespace aqs::sim;
using namespace aqs::sim::test;

TEST_CASE("bounded slowdown uses tau = 10 s and is at least 1") {
  CHECK(bounded_slowdown(0, 5) == 1);
  CHECK(bounded_slowdown(15, 5) == doctest::Approx(2));
  CHECK(bounded_slowdown(100, 100) == doctest::Approx(2));
}

TEST_CASE("fcfs and easy on a hand-checked four-processor workload") {
  workload w = on(4, {rigid(1, 0, 100, 3), rigid(2, 10, 50, 4), rigid(3, 20, 30, 1, 40)});
  auto f = simulate(w, with("fcfs"));
  // fcfs: 1 at 0-100, 2 at 100-150, 3 at 150-180.
  CHECK(f.jobs[0].start == 0);
  CHECK(f.jobs[1].start == 100);
  CHECK(f.jobs[2].start == 150);
  CHECK(f.mean_wait == doctest::Approx((0 + 90 + 130) / 3.0));
  CHECK(f.makespan == 180);
  CHECK(f.utilization == doctest::Approx((100 * 3 + 50 * 4 + 30 * 1) / (4.0 * 180)));
  // easy: 3 ends (by its estimate) at 60 <= 100, so it backfills at 20.
  auto e = simulate(w, with("easy"));
  CHECK(e.jobs[2].start == 20);
  CHECK(e.jobs[1].start == 100);
  CHECK(e.makespan == 150);
  CHECK(e.mean_bsld == doctest::Approx((1 + (90 + 50) / 50.0 + 1) / 3));
}

TEST_CASE("completions are handled before arrivals at the same instant, then one decision") {
  workload w = on(2, {rigid(1, 0, 10, 2), rigid(2, 10, 5, 2)});
  auto r = simulate(w, with("fcfs"));
  CHECK(r.jobs[1].start == 10);
  CHECK(r.mean_wait == 0);
}

TEST_CASE("adaptive jobs progress by the speedup model across resizes, and resize cost is lost time") {
  // A alone runs on 4 processors; B's arrival at 50 halves it; B grows at A's end.
  workload w = on(4, {adaptive(1, 0, 100, 4, 2, 4), adaptive(2, 50, 100, 4, 2, 4)});
  auto r = simulate(w, with("equipartition"));
  CHECK(r.jobs[0].end == doctest::Approx(150));  // 50 done, 0.5 left at half speed
  CHECK(r.jobs[1].start == 50);
  CHECK(r.jobs[1].first_procs == 2);
  CHECK(r.jobs[1].end == doctest::Approx(200));  // half done by 150, then full speed
  CHECK(r.resizes == 2);
  CHECK(r.ranks_moved == 2);
  CHECK(r.utilization == doctest::Approx(1.0));
  auto c = simulate(w, with("equipartition", {}, 10));
  CHECK(c.jobs[0].end == doctest::Approx(160));
  CHECK(c.jobs[1].start == 60);  // the processors A gives up are free only after its ack
  CHECK(c.jobs[1].end == doctest::Approx(220));
  // A job alone grows to its maximum: twice its logged size, twice as fast.
  workload one = on(8, {adaptive(1, 0, 100, 2, 1, 4)});
  CHECK(simulate(one, with("equipartition")).jobs[0].end == doctest::Approx(50));
  sim_options am = with("equipartition");
  am.speedup = speedup_model::parse("amdahl:0.5");
  // S(4)/S(2) = 1.6 / 1.3333 = 1.2
  CHECK(simulate(one, am).jobs[0].end == doctest::Approx(100 / 1.2));
}

TEST_CASE("with all jobs rigid, equipartition schedules exactly as easy") {
  const generator_params p{.jobs = 3000, .load = 0.9};
  auto w = generate(p);
  auto e = simulate(w, with("easy"));
  auto q = simulate(w, with("equipartition"));
  CHECK(q.mean_wait == doctest::Approx(e.mean_wait));
  CHECK(q.utilization == doctest::Approx(e.utilization));
}

TEST_CASE("the Faucets setting: at high load adaptive equipartition beats rigid easy on response time") {
  const generator_params p{.jobs = 3000, .load = 0.9};
  auto rigid_w = generate(p);
  auto adaptive_w = rigid_w;
  make_malleable(adaptive_w, 1.0, 1);
  auto e = simulate(rigid_w, with("easy"));
  auto q = simulate(adaptive_w, with("equipartition"));
  CHECK(q.mean_response < e.mean_response);
  CHECK(q.resizes > 0);
}

TEST_CASE("bad simulator options are refused") {
  workload w = on(10, {rigid(1, 0, 1, 1)});
  CHECK_THROWS_WITH_AS(simulate(w, with("lottery")), doctest::Contains("known: easy, equipartition, fcfs"),
                       std::invalid_argument);
  sim_options o = with("easy");
  o.procs_per_node = 4;
  CHECK_THROWS_AS(simulate(w, o), std::invalid_argument);
  w.jobs.push_back(rigid(1, 1, 1, 1));
  CHECK_THROWS_AS(simulate(w, with("easy")), std::invalid_argument);
}

TEST_CASE("random synthetic workloads finish every job under every policy, with sane metrics (seeded)") {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    CAPTURE(seed);
    const generator_params p{
        .jobs = 150, .procs = std::size_t{8} << (seed % 4), .load = 0.2 + 0.15 * static_cast<double>(seed % 7), .seed = seed};
    auto w = generate(p);
    make_malleable(w, static_cast<double>(seed % 5) / 4.0, seed);
    for (const char* policy : {"fcfs", "easy", "equipartition"}) {
      sim_options o = with(policy, {}, static_cast<double>(seed % 3));
      o.procs_per_node = seed % 2 ? 1 : 4;
      if (seed % 4 == 0) o.speedup = speedup_model::parse("amdahl:0.9");
      auto r = simulate(w, o);
      REQUIRE(r.jobs.size() == w.jobs.size());
      for (const auto& j : r.jobs) {
        REQUIRE(j.start >= j.submit);
        REQUIRE(j.end > j.start);
        REQUIRE(j.first_procs >= 1);
      }
      CHECK(r.utilization > 0);
      CHECK(r.utilization <= 1.0 + 1e-9);
      CHECK(r.mean_bsld >= 1);
    }
  }
}
