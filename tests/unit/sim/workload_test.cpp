// Unit tests of workloads: the job filter, malleable conversion, the generator, speedup models.
#include <doctest/doctest.h>

#include <stdexcept>
#include <utility>
#include <vector>

#include "sim/workload.hpp"

using namespace aqs::sim;

TEST_CASE("the filter skips unusable jobs, cuts run times to the request and sizes by requested processors") {
  auto t = parse_swf(
      "1 0 -1 50 4 -1 -1 8 100 -1 1 1 1 -1 -1 -1 -1 -1\n"     // kept, size 8
      "2 5 -1 500 4 -1 -1 4 100 -1 1 1 1 -1 -1 -1 -1 -1\n"    // run cut to 100
      "3 5 -1 0 4 -1 -1 4 100 -1 1 1 1 -1 -1 -1 -1 -1\n"      // run 0
      "4 5 -1 10 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"      // no request time
      "5 5 -1 10 4 -1 -1 -1 10 -1 1 1 1 -1 -1 -1 -1 -1\n"     // no requested procs
      "6 5 -1 10 4 -1 -1 17 10 -1 1 1 1 -1 -1 -1 -1 -1\n"     // larger than the machine
      "7 1 -1 10 4 -1 -1 16 10 -1 1 1 1 -1 -1 -1 -1 -1\n");   // exactly the machine
  auto w = filter_trace(t, 16);
  REQUIRE(w.jobs.size() == 3);
  CHECK(w.skipped == 4);
  CHECK(w.skipped_by_reason.at("run_time<=0") == 1);
  CHECK(w.skipped_by_reason.at("requested_time<=0") == 1);
  CHECK(w.skipped_by_reason.at("requested_procs<=0") == 1);
  CHECK(w.skipped_by_reason.at("larger_than_machine") == 1);
  CHECK(w.jobs[0].id == 1);
  CHECK(w.jobs[0].size == 8);
  CHECK(w.jobs[1].id == 7);  // sorted by submit time
  CHECK(w.jobs[2].runtime == 100);
  CHECK(w.jobs[2].estimate == 100);
}

TEST_CASE("malleable jobs get min = ceil(size/2) and max = min(machine, 2 size)") {
  workload w;
  w.procs = 10;
  for (std::size_t s : {1, 3, 6}) {
    sim_job j;
    j.id = s;
    j.size = j.min_pe = j.max_pe = s;
    w.jobs.push_back(j);
  }
  make_malleable(w, 1.0, 1);
  const std::vector<std::pair<std::size_t, std::size_t>> ranges = {{1, 2}, {2, 6}, {3, 10}};  // min, max
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    CAPTURE(i);
    CHECK(w.jobs[i].min_pe == ranges[i].first);
    CHECK(w.jobs[i].max_pe == ranges[i].second);
  }
  for (const auto& j : w.jobs) CHECK(j.adaptive);

  const generator_params p{.jobs = 4000};
  auto g = generate(p);
  make_malleable(g, 0.25, 3);
  std::size_t n = 0;
  for (const auto& j : g.jobs) n += j.adaptive ? 1 : 0;
  CHECK(n > 900);
  CHECK(n < 1100);
}

TEST_CASE("the generator offers the asked load, reproducibly from its seed") {
  generator_params p{.jobs = 20000, .procs = 64, .load = 0.6, .mean_runtime = 64.5, .seed = 11};
  auto w = generate(p);
  REQUIRE(w.jobs.size() == 20000);
  double work = 0;
  for (const auto& j : w.jobs) {
    work += j.runtime * static_cast<double>(j.size);
    CHECK(j.size >= 1);
    CHECK(j.size <= 32);
    CHECK(j.estimate >= j.runtime);
  }
  double span = w.jobs.back().submit - w.jobs.front().submit;
  CHECK(work / (64 * span) == doctest::Approx(0.6).epsilon(0.05));
  auto again = generate(p);
  CHECK(again.jobs[777].submit == w.jobs[777].submit);
  CHECK(again.jobs[777].size == w.jobs[777].size);
  p.seed = 12;
  CHECK(generate(p).jobs[777].submit != w.jobs[777].submit);
  p.load = 0;
  CHECK_THROWS_AS(generate(p), std::invalid_argument);
}

TEST_CASE("speedup models: linear, Amdahl, and clear errors") {
  auto lin = speedup_model::parse("linear");
  CHECK(lin.relative_rate(8, 4) == doctest::Approx(2));
  auto am = speedup_model::parse("amdahl:0.9");
  CHECK(am.speedup(1) == doctest::Approx(1));
  CHECK(am.speedup(10) == doctest::Approx(1 / (0.1 + 0.09)));
  CHECK(am.relative_rate(4, 4) == doctest::Approx(1));
  CHECK(am.relative_rate(8, 4) < 2);
  CHECK_THROWS_WITH_AS(speedup_model::parse("magic"), "unknown speedup model 'magic' (known: linear, amdahl:F)",
                       std::invalid_argument);
  CHECK_THROWS_AS(speedup_model::parse("amdahl:1.5"), std::invalid_argument);
  CHECK_THROWS_AS(speedup_model::parse("amdahl:"), std::invalid_argument);
}
