// The metrics part alone: counters and histograms as /metrics reads them,
// recorded from several threads at once.
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "daemon/metrics.hpp"

using namespace aqs;

TEST_CASE("metrics: a histogram counts an observation in the first bucket whose bound holds it") {
  daemon::histogram h({0.1, 1, 10});
  h.observe(0.1);   // on the bound: that bucket
  h.observe(0.5);
  h.observe(1.0);
  h.observe(100);   // above every bound: +Inf only
  CHECK(h.counts == std::vector<std::uint64_t>{1, 2, 0});
  CHECK(h.count == 4);
  CHECK(h.sum == doctest::Approx(101.6));
}

TEST_CASE("metrics: every resize outcome and phase is there from the start, at zero") {
  daemon::metrics m;
  const auto s = m.read();
  for (const char* o : {"acked", "refused", "timeout", "abandoned", "killed"}) {
    CAPTURE(o);
    REQUIRE(s.resizes.count(o) == 1);
    CHECK(s.resizes.at(o) == 0);
  }
  for (const char* p : {"wait", "spawn", "data", "total"}) {
    CAPTURE(p);
    REQUIRE(s.resize_phase.count(p) == 1);
    CHECK(s.resize_phase.at(p).count == 0);
  }
  CHECK(s.submissions == 0);
  CHECK(s.jobs_ended.empty());
  CHECK(s.decision_time.bounds.size() == s.decision_time.counts.size());
  CHECK_FALSE(s.decision_time.bounds.empty());
}

TEST_CASE("metrics: what is recorded is what is read; a snapshot is a copy") {
  daemon::metrics m;
  m.submitted();
  m.submitted();
  m.resize_started();
  m.resize_ended("acked", 0.3);
  m.resize_ended("timeout", -1);  // not observed in the latency
  m.resize_phase("spawn", 2.0);
  m.resize_phase("no-such-phase", 1.0);  // ignored
  m.job_ended("COMPLETED");
  m.job_ended("OUT_OF_MEMORY");
  m.decided(0.002);
  m.committed(0.004);
  auto s = m.read();
  CHECK(s.submissions == 2);
  CHECK(s.resizes_started == 1);
  CHECK(s.resizes.at("acked") == 1);
  CHECK(s.resizes.at("timeout") == 1);
  CHECK(s.resize_latency.count == 1);
  CHECK(s.resize_latency.sum == doctest::Approx(0.3));
  CHECK(s.resize_phase.at("spawn").count == 1);
  CHECK(s.resize_phase.count("no-such-phase") == 0);
  CHECK(s.jobs_ended.at("COMPLETED") == 1);
  CHECK(s.jobs_ended.at("OUT_OF_MEMORY") == 1);
  CHECK(s.decision_time.count == 1);
  CHECK(s.commit_latency.count == 1);
  m.submitted();
  CHECK(s.submissions == 2);  // the snapshot taken before does not move
  CHECK(m.read().submissions == 3);
}

TEST_CASE("metrics: records from several threads at once are all counted") {
  daemon::metrics m;
  constexpr int k_threads = 4, k_each = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < k_each; ++i) {
        m.submitted();
        m.committed(0.001);
        m.job_ended("COMPLETED");
        m.resize_ended("refused", -1);
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto s = m.read();
  CHECK(s.submissions == k_threads * k_each);
  CHECK(s.commit_latency.count == k_threads * k_each);
  CHECK(s.jobs_ended.at("COMPLETED") == k_threads * k_each);
  CHECK(s.resizes.at("refused") == k_threads * k_each);
}
