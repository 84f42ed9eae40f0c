// Tests of aqs-sim with the preferred-size policies: the malleable generator's draws, the rigid case,
// and a fixed small trace whose results must not change unnoticed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "sim/simulator.hpp"


using namespace aqs::sim;

namespace {

workload fixed_trace(double malleable, std::uint64_t seed) {
  const generator_params g{.jobs = 400, .procs = 32, .load = 0.9, .mean_runtime = 100, .seed = 7};
  workload w = generate(g);
  if (malleable > 0) make_malleable(w, malleable, seed);
  return w;
}

sim_result run(const workload& w, const char* policy) {
  sim_options o;
  o.policy = policy;
  o.speedup = speedup_model::parse("amdahl:0.95");
  o.resize_cost = 10;
  o.params.default_resize_cost = 10;
  return simulate(w, o);
}

}  // namespace

TEST_CASE("the malleable generator draws preferred sizes within min..max, half of them the logged size") {
  const generator_params g{.jobs = 4000, .procs = 64};
  workload w = generate(g);
  make_malleable(w, 1.0, 5, true);
  std::size_t at_logged = 0;
  for (const sim_job& j : w.jobs) {
    REQUIRE(j.adaptive);
    CHECK(j.pref_pe >= j.min_pe);
    CHECK(j.pref_pe <= j.max_pe);
    at_logged += j.pref_pe == j.size ? 1 : 0;
    CHECK(j.parallel_fraction >= 0.9 - 1e-12);
    CHECK(j.parallel_fraction <= 0.999 + 1e-12);
  }
  CHECK(at_logged > 2000);  // 1/2 by choice, plus the draws that land on it
  CHECK(at_logged < 3000);
  // The same seed gives the same draws; the choice of jobs is the one made without them.
  workload again = generate(g);
  make_malleable(again, 1.0, 5, true);
  for (std::size_t i = 0; i < w.jobs.size(); ++i) {
    CHECK(again.jobs[i].pref_pe == w.jobs[i].pref_pe);
    CHECK(again.jobs[i].parallel_fraction == w.jobs[i].parallel_fraction);
  }
  workload a = generate(g), b = generate(g);
  make_malleable(a, 0.3, 9);
  make_malleable(b, 0.3, 9, true);
  for (std::size_t i = 0; i < a.jobs.size(); ++i) CHECK(a.jobs[i].adaptive == b.jobs[i].adaptive);
}

TEST_CASE("with no malleable jobs the new policies give easy's results to the last digit") {
  const workload w = fixed_trace(0, 1);
  const sim_result e = run(w, "easy");
  for (const char* policy : {"pref_common_pool", "payoff"}) {
    const std::string name = policy;
    CAPTURE(name);
    const sim_result r = run(w, policy);
    CHECK(r.mean_response == e.mean_response);
    CHECK(r.mean_wait == e.mean_wait);
    CHECK(r.mean_bsld == e.mean_bsld);
    CHECK(r.resizes == 0);
  }
  // payoff_lxf backfills in another order, so on rigid jobs it is EASY with
  // that order, not easy: it resizes nothing, and its numbers are pinned.
  // On this small trace it is 1.7 % worse than easy (EASY is not monotone);
  // on the study's workloads it is better on average (docs/simulator.md).
  const sim_result x = run(w, "payoff_lxf");
  char got[200];
  std::snprintf(got, sizeof got, "%.8f, %.8f, %.8f", x.mean_response, x.mean_wait, x.mean_bsld);
  CAPTURE(got);
  CHECK(x.resizes == 0);
  CHECK(x.mean_response == doctest::Approx(195.02).epsilon(1e-6));
  CHECK(x.mean_wait == doctest::Approx(97.195).epsilon(1e-6));
  CHECK(x.mean_bsld == doctest::Approx(3.739078).epsilon(1e-6));
}

// The numbers each policy gives on a fixed 400-job trace (32 processors,
// load 0.9, 30 % malleable, Amdahl 0.95, 10 s per resize). A change to a
// policy or to the simulator that moves them must update them here, on
// purpose.
TEST_CASE("the policies' results on a small fixed trace do not change") {
  struct expected {
    const char* policy;
    double response, wait, bsld;
    std::size_t resizes;
  };
  const workload w = fixed_trace(0.3, 3), rigid = fixed_trace(0, 3);
  for (const expected& x : {
           expected{"easy", 191.69, 93.865, 3.64010000, 0},
           expected{"equipartition", 234.0535, 117.7584, 3.6872, 461},
           expected{"pref_common_pool", 224.74324257, 106.76414652, 3.61622919, 470},
           expected{"payoff", 184.36582253, 73.45032925, 2.82786921, 210},
           expected{"payoff_lxf", 181.21686580, 70.41684792, 2.70490938, 214},
       }) {
    const std::string name = x.policy;
    CAPTURE(name);
    // easy runs the rigid trace, as aqs-sim does (rigid policies ignore --malleable).
    const sim_result r = run(std::string(x.policy) == "easy" ? rigid : w, x.policy);
    char got[200];
    std::snprintf(got, sizeof got, "%.8f, %.8f, %.8f, %zu", r.mean_response, r.mean_wait, r.mean_bsld, r.resizes);
    CAPTURE(got);
    CHECK(r.mean_response == doctest::Approx(x.response).epsilon(1e-6));
    CHECK(r.mean_wait == doctest::Approx(x.wait).epsilon(1e-6));
    CHECK(r.mean_bsld == doctest::Approx(x.bsld).epsilon(1e-6));
    CHECK(r.resizes == x.resizes);
  }
}
