// Tests of aqs-sim's fair share: trace users with equal shares, the light
// user's jobs go ahead of the heavy user's queue under every policy.
#include <doctest/doctest.h>

#include <algorithm>

#include "sim/simulator.hpp"
#include "sim_jobs.hpp"

using namespace aqs::sim;
using namespace aqs::sim::test;

namespace {

// User 1 submits ten 1-processor jobs of 100 s at t=0 on a 2-processor
// machine; user 2 submits four at t=250, when user 1 has run four and runs two.
workload two_users() {
  std::vector<sim_job> jobs;
  for (std::uint64_t i = 1; i <= 10; ++i) {
    sim_job j = rigid(i, 0, 100, 1);
    j.user = 1;
    jobs.push_back(j);
  }
  for (std::uint64_t i = 11; i <= 14; ++i) {
    sim_job j = rigid(i, 250, 100, 1);
    j.user = 2;
    jobs.push_back(j);
  }
  return on(2, jobs);
}

sim_options fair(const char* policy) {
  sim_options o = with(policy);
  o.priority.fairshare = 10000;
  o.priority.half_life_s = 86400;
  return o;
}

// The latest start of user 2's jobs and the earliest of user 1's jobs still
// waiting when user 2 submitted (7..10).
std::pair<double, double> starts(const sim_result& r) {
  double light_last = 0, heavy_first = 1e18;
  for (const job_result& j : r.jobs) {
    if (j.id >= 11) light_last = std::max(light_last, j.start);
    if (j.id >= 7 && j.id <= 10) heavy_first = std::min(heavy_first, j.start);
  }
  return {light_last, heavy_first};
}

}  // namespace

TEST_CASE("with fair share the light user's jobs start ahead of the heavy user's queue, under easy and equipartition") {
  for (const char* policy : {"easy", "equipartition", "fcfs"}) {
    CAPTURE(policy);
    const workload w = two_users();
    auto [plain_light, plain_heavy] = starts(simulate(w, with(policy)));
    CHECK(plain_light > plain_heavy);  // arrival order: user 2 waits behind all of user 1's
    const sim_result r = simulate(w, fair(policy));
    auto [light_last, heavy_first] = starts(r);
    CHECK(light_last < heavy_first);
    CHECK(light_last == doctest::Approx(400));  // 11, 12 at 300; 13, 14 at 400
    CHECK(r.priority_changes > 0);
    // Usage: every job ran 100 s on one processor; decayed a little by the end.
    REQUIRE(r.user_usage.size() == 2);
    CHECK(r.user_usage.at(1) < 1000);
    CHECK(r.user_usage.at(1) > 900);
    CHECK(r.user_usage.at(2) > 350);
    // Every job still runs, and the machine is as busy.
    for (const job_result& j : r.jobs) CHECK(j.end - j.start == doctest::Approx(100));
  }
}

TEST_CASE("fair share off (all weights 0) replays exactly as before, users or not") {
  const generator_params p{.jobs = 500, .load = 0.9};
  workload w = generate(p);
  for (std::size_t i = 0; i < w.jobs.size(); ++i) w.jobs[i].user = static_cast<long long>(i % 3);
  const sim_result a = simulate(w, with("easy"));
  sim_options o = with("easy");
  o.priority.half_life_s = 10;  // a half-life alone turns nothing on
  const sim_result b = simulate(w, o);
  CHECK(a.mean_wait == b.mean_wait);
  CHECK(b.priority_changes == 0);
  CHECK(b.user_usage.empty());
}

TEST_CASE("fair share changes a busy trace's order but every job still runs once, for its run time") {
  const generator_params p{.jobs = 800, .load = 0.95};
  workload w = generate(p);
  for (std::size_t i = 0; i < w.jobs.size(); ++i) w.jobs[i].user = static_cast<long long>((i * 7) % 5);
  make_malleable(w, 0.5, 3);
  for (const char* policy : {"easy", "equipartition"}) {
    CAPTURE(policy);
    const sim_result r = simulate(w, fair(policy));
    CHECK(r.jobs.size() == w.jobs.size());
    for (const job_result& j : r.jobs) {
      CHECK(j.start >= j.submit);
      CHECK(j.end > j.start);
    }
    CHECK(r.utilization > 0);
    CHECK(r.utilization <= 1.0 + 1e-9);
  }
}
