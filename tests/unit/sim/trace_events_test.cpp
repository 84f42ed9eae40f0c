// Unit tests of suspend, resume and range changes replayed by the simulator, on hand-checked workloads.
#include <doctest/doctest.h>

#include <string_view>

#include "sim/simulator.hpp"
#include "sim_jobs.hpp"

using namespace aqs::sim;
using namespace aqs::sim::test;

namespace {

constexpr auto suspend = trace_event::kind::suspend;
constexpr auto resume = trace_event::kind::resume;
constexpr auto range = trace_event::kind::range;

}  // namespace

TEST_CASE("a suspended rigid job alone ends later by exactly the time it was suspended") {
  workload w = on(4, {rigid(1, 0, 100, 4)});
  for (const char* policy : {"fcfs", "easy", "equipartition"}) {
    CAPTURE(policy);
    auto r = simulate(w, with(policy, {ev(30, 1, suspend), ev(80, 1, resume)}));
    CHECK(r.jobs[0].end == 150);
    CHECK(r.jobs[0].suspended_s == 50);
    CHECK(r.jobs[0].suspensions == 1);
    CHECK(r.suspends == 1);
    CHECK(r.resumes == 1);
    CHECK(r.events_skipped == 0);
    CHECK(r.mean_response == 150);
    // The slowdown counts the suspension as waiting: (0 + 50 + 100) / 100.
    CHECK(r.mean_bsld == doctest::Approx(1.5));
    // Suspended, it held nothing: 100 s of 4 processors over 150 s.
    CHECK(r.utilization == doctest::Approx(100.0 / 150));
  }
}

TEST_CASE("a job suspended twice keeps its remaining work across both suspensions") {
  workload w = on(2, {rigid(1, 0, 100, 2)});
  auto r = simulate(w, with("easy", {ev(10, 1, suspend), ev(20, 1, resume), ev(50, 1, suspend), ev(75, 1, resume)}));
  CHECK(r.jobs[0].end == 135);
  CHECK(r.jobs[0].suspended_s == 35);
  CHECK(r.jobs[0].suspensions == 2);
}

TEST_CASE("a resumed rigid job waits until its processors are free again") {
  // 1 is suspended at 10: 2, waiting since 5, runs 10-60 on its processors;
  // 1 asks to resume at 20 but gets them back only at 60, with 90 s left.
  workload w = on(4, {rigid(1, 0, 100, 4), rigid(2, 5, 50, 4)});
  for (const char* policy : {"fcfs", "easy", "equipartition"}) {
    CAPTURE(policy);
    auto r = simulate(w, with(policy, {ev(10, 1, suspend), ev(20, 1, resume)}));
    CHECK(r.jobs[1].start == 10);
    CHECK(r.jobs[1].end == 60);
    CHECK(r.jobs[0].end == 150);
    CHECK(r.jobs[0].suspended_s == 50);
  }
}

TEST_CASE("an adaptive job given a larger range finishes sooner on an idle machine") {
  workload w = on(8, {adaptive(1, 0, 100, 2, 2, 2)});
  auto still = simulate(w, with("equipartition", {}));
  CHECK(still.jobs[0].end == doctest::Approx(100));
  // At 50 it may use 2..8: it grows to 8 and does its last half 4 times as fast.
  auto grown = simulate(w, with("equipartition", {ev(50, 1, range, 2, 8)}));
  CHECK(grown.range_changes == 1);
  CHECK(grown.jobs[0].end == doctest::Approx(62.5));
  CHECK(grown.jobs[0].resizes == 1);
  // And a smaller range slows it down: from 50 on 1 processor, half speed.
  auto shrunk = simulate(w, with("equipartition", {ev(50, 1, range, 1, 1)}));
  CHECK(shrunk.jobs[0].end == doctest::Approx(150));
}

TEST_CASE("an adaptive job resumed on another count progresses at that count's rate") {
  // 1 runs alone on 4 until 20 (a fifth done) and is suspended; 2 (rigid, 2
  // processors) starts then; 1 resumes at 30 on the 2 that are left, at half
  // its logged rate: the remaining 0.8 of 100 s take 160 s.
  workload w = on(4, {adaptive(1, 0, 100, 4, 2, 4), rigid(2, 20, 1000, 2)});
  auto r = simulate(w, with("equipartition", {ev(20, 1, suspend), ev(30, 1, resume)}));
  CHECK(r.jobs[1].start == 20);
  CHECK(r.jobs[0].suspended_s == 10);
  CHECK(r.jobs[0].end == doctest::Approx(190));
  // With a migration cost the resumed job applies its new map first.
  auto c = simulate(w, with("equipartition", {ev(20, 1, suspend), ev(30, 1, resume)}, 5));
  CHECK(c.jobs[0].end == doctest::Approx(195));
}

TEST_CASE("events a job cannot take are skipped and counted by reason, never thrown") {
  // 1 fills the machine 0-100; 2 (adaptive) waits for it; 3 arrives at 500.
  workload w = on(4, {rigid(1, 0, 100, 4), adaptive(2, 1, 100, 4, 2, 4), rigid(3, 500, 10, 1)});
  auto r = simulate(w, with("equipartition", {
                                                 ev(5, 2, suspend),       // pending
                                                 ev(6, 1, resume),        // running, not suspended
                                                 ev(7, 42, suspend),      // no such job
                                                 ev(8, 3, suspend),       // not submitted yet
                                                 ev(9, 1, range, 2, 2),   // a running rigid job
                                                 ev(10, 2, range, 1, 9),  // beyond the machine
                                                 ev(11, 2, range, 1, 1),  // pending adaptive: applies
                                                 ev(20, 1, suspend),
                                                 ev(25, 1, suspend),      // already suspended
                                                 ev(30, 1, resume),
                                                 ev(31, 1, resume),       // already waiting to resume
                                                 ev(505, 1, suspend),     // finished
                                             }));
  CHECK(r.suspends == 1);
  CHECK(r.resumes == 1);
  CHECK(r.range_changes == 1);
  CHECK(r.events_skipped == 9);
  const auto& why = r.events_skipped_by_reason;
  CHECK(why.at("suspend_not_started") == 1);
  CHECK(why.at("resume_not_suspended") == 1);
  CHECK(why.at("unknown_job") == 1);
  CHECK(why.at("not_submitted") == 1);
  CHECK(why.at("range_rigid_started") == 1);
  CHECK(why.at("range_larger_than_machine") == 1);
  CHECK(why.at("already_suspended") == 1);
  CHECK(why.at("already_resuming") == 1);
  CHECK(why.at("finished") == 1);
  // 2 asked for 1..1 while pending: it starts on the 1 processor... when 1 is
  // suspended at 20 it gets the machine's room, runs at a quarter speed.
  CHECK(r.jobs[1].start == 20);
  CHECK(r.jobs[1].first_procs == 1);
  CHECK(r.jobs[1].end == doctest::Approx(420));
  // 1 resumes on its own processors once 2's one is not among them... it
  // needs all 4, so it waits for 2 to end.
  CHECK(r.jobs[0].end == doctest::Approx(420 + 80));
}

TEST_CASE("a rigid job given a new size while pending runs at the speedup model's rate for it") {
  workload w = on(4, {rigid(1, 0, 100, 4), rigid(2, 1, 100, 2)});
  auto r = simulate(w, with("easy", {ev(5, 2, range, 4, 4)}));
  CHECK(r.range_changes == 1);
  CHECK(r.jobs[1].first_procs == 4);
  CHECK(r.jobs[1].end == doctest::Approx(150));
  auto bad = simulate(w, with("easy", {ev(5, 2, range, 1, 2)}));
  CHECK(bad.events_skipped_by_reason.at("range_rigid_min_ne_max") == 1);
}

TEST_CASE("a rigid job waiting to resume on its free processors is not blocked forever by a job ahead of it") {
  // The core resumes it as soon as its processors are free, whatever the plan
  // (the simulator's workaround for when it did not is no longer needed).
  // 10 runs 0-6 but says 1000, so 3 backfills at 2 on 2-3; suspended at 5
  // and asking to resume at 6, when 10 has ended: every processor is free,
  // 2 (ahead of 3) is planned but cannot have 3's, and 3 must not wait forever.
  workload w = on(4, {rigid(10, 0, 6, 2), rigid(2, 1, 100, 4), rigid(3, 2, 100, 2)});
  w.jobs[0].estimate = 1000;
  auto r = simulate(w, with("easy", {ev(5, 3, suspend), ev(6, 3, resume)}));
  CHECK(r.unblocked_resumes == 0);
  CHECK(r.jobs[2].end == 103);
  CHECK(r.jobs[1].start == 103);
}

TEST_CASE("a job still suspended when nothing else is left to happen is resumed then") {
  workload w = on(2, {rigid(1, 0, 100, 2), rigid(2, 0, 10, 1)});
  auto r = simulate(w, with("fcfs", {ev(50, 1, suspend)}));
  CHECK(r.resumed_at_end == 1);
  // 2 waited for 1 (fcfs) and runs on its room 50-60; then nothing is left
  // to happen and 1 resumes at 60.
  CHECK(r.jobs[1].start == 50);
  CHECK(r.jobs[0].end == 110);
  CHECK(r.jobs[0].suspended_s == 10);
}

TEST_CASE("a suspend that hits a job while it migrates takes effect when it has applied its map") {
  // 1 alone on 4; 2 arrives at 50: 1 shrinks to 2, migrating until 60.
  workload w = on(4, {adaptive(1, 0, 100, 4, 2, 4), rigid(2, 50, 1000, 2)});
  auto r = simulate(w, with("equipartition", {ev(55, 1, suspend), ev(70, 1, resume)}, 10));
  CHECK(r.deferred_suspends == 1);
  CHECK(r.suspends == 1);
  CHECK(r.jobs[0].suspended_s == 10);  // 60 to 70
  // Half done at 50; resumed at 70 on 2 processors (migrating 10 s): 0.5 at half speed from 80.
  CHECK(r.jobs[0].end == doctest::Approx(180));
  // Resumed before the suspend could apply: neither happens.
  auto c = simulate(w, with("equipartition", {ev(55, 1, suspend), ev(58, 1, resume)}, 10));
  CHECK(c.suspends == 0);
  CHECK(c.events_skipped_by_reason.at("suspend_cancelled") == 1);
}

TEST_CASE("synthesised suspensions hit every chosen job mid-run and are reproducible") {
  const generator_params p{.jobs = 400, .load = 0.7};
  auto w = generate(p);
  sim_options o = with("easy", {});
  auto base = simulate(w, o);
  o.suspend_fraction = 1;
  o.suspend_duration = 100;
  auto r = simulate(w, o);
  CHECK(r.suspends == 400);
  CHECK(r.resumes == 400);
  CHECK(r.events_skipped == 0);
  CHECK(r.mean_suspended_s >= 100);
  CHECK(r.mean_response > base.mean_response + 100);
  auto again = simulate(w, o);
  CHECK(again.mean_response == r.mean_response);
  o.seed = 2;
  CHECK(simulate(w, o).mean_response != r.mean_response);
}

TEST_CASE("random workloads with synthesised events finish every job under every policy (seeded)") {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    CAPTURE(seed);
    const generator_params p{
        .jobs = 120, .procs = std::size_t{8} << (seed % 3), .load = 0.3 + 0.2 * static_cast<double>(seed % 4), .seed = seed};
    auto rigid_w = generate(p);
    auto malleable_w = rigid_w;
    make_malleable(malleable_w, static_cast<double>(seed % 3) / 2.0, seed);
    // Adaptive jobs only under equipartition, as aqs-sim runs them: under the
    // rigid policies an adaptive job waiting to resume can still be blocked
    // by the core (see the workaround in simulator.cpp).
    for (const char* policy : {"fcfs", "easy", "equipartition"}) {
      const workload& w = std::string_view(policy) == "equipartition" ? malleable_w : rigid_w;
      sim_options o = with(policy, {}, static_cast<double>(seed % 3));
      o.procs_per_node = seed % 2 ? 1 : 4;
      o.suspend_fraction = 0.3;
      o.suspend_duration = static_cast<double>(seed % 4) * 50;
      o.range_change_fraction = 0.5;
      o.seed = seed;
      // A few hand-made events too, some of them impossible.
      o.events = {ev(10, 3, suspend), ev(15, 3, resume), ev(20, 5, range, 1, 4), ev(30, 999, resume)};
      auto r = simulate(w, o);
      REQUIRE(r.jobs.size() == w.jobs.size());
      for (const auto& j : r.jobs) {
        REQUIRE(j.start >= j.submit);
        REQUIRE(j.end - j.start >= j.suspended_s);
      }
      CHECK(r.suspends > 0);
      CHECK(r.utilization <= 1.0 + 1e-9);
      CHECK(r.mean_bsld >= 1);
    }
  }
}
