// The write pipeline alone, over an in-memory store (no PostgreSQL): what
// piles up while a batch is written goes in the next batch; a job's
// transitions are written in order; what is queued after a commit runs only
// once the store has it; a store outage holds the writes and retries them;
// the decider runs once for a burst and its transitions join the batch;
// hold() stops decisions and writes; a store failure that is not an outage
// is fatal.
#include <doctest/doctest.h>

#include <future>

#include "store_samples.hpp"
#include "strand_rig.hpp"

using namespace aqs;
using namespace std::chrono_literals;
using core::job_state;

namespace {

core::processor_set procs(std::size_t n) { return core::processor_set::range(4, 0, n); }

struct rig : test::strand_rig {
  std::int64_t submit() { return store.submit(test::sample_request("alice", 1)); }
  job_state state(std::int64_t id) {
    auto r = store.get_job(id);
    REQUIRE(r);
    return r->status.state;
  }
  std::vector<job_state> history(std::int64_t id) {
    std::vector<job_state> out;
    for (const auto& e : store.job_history(id)) out.push_back(e.new_state);
    return out;
  }
  std::uint64_t batches_written() const { return stats.read().commit_latency.count; }
  // On the strand: queues the job's start and, if given, what runs once the
  // store has it.
  void queue_start(std::int64_t id, std::function<void()> then = {}) {
    pipe.transition(id, job_state::running, procs(1), "started");
    if (then) pipe.after_commit(std::move(then));
  }
  // Queues the job's start and wakes the writer; the job's state in the
  // store as the after_commit that follows it sees it.
  std::optional<job_state> start_and_see(std::int64_t id) {
    std::optional<job_state> seen;
    on_strand([&] {
      queue_start(id, [&] { seen = state(id); });
      pipe.kick();
    });
    REQUIRE(until([&] { return seen.has_value(); }));
    return seen;
  }
  // Queues the job's start (and, with `decide`, a decision) on the strand and
  // wakes the writer; `written` turns true once the store has the start.
  void start_and_kick(std::int64_t id, bool& written, bool decide = false) {
    on_strand([this, id, &written, decide] {
      queue_start(id, [&written] { written = true; });
      if (decide) pipe.decide();
      pipe.kick();
    });
  }
};

}  // namespace

TEST_CASE("write_pipeline: what piles up while a batch is written is written together in the next one") {
  rig r;
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(r.submit());
  // The first batch blocks on the writer until released.
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  r.on_strand([&] {
    r.pipe.store_op([opened](store::job_store&) { opened.wait(); });
    r.pipe.kick();
  });
  // Ten events, one per turn of the strand, each kicking.
  for (const auto id : ids) {
    r.on_strand([&, id] {
      r.pipe.transition(id, job_state::running, procs(1), "started");
      r.pipe.kick();
    });
  }
  gate.set_value();
  REQUIRE(r.committed());
  CHECK(r.batches_written() == 2);
  for (const auto id : ids) CHECK(r.state(id) == job_state::running);
}

TEST_CASE("write_pipeline: a job's transitions in one batch are written in the order queued") {
  rig r;
  const auto a = r.submit();
  const auto b = r.submit();
  r.on_strand([&] {
    r.pipe.transition(a, job_state::running, procs(1), "started");
    r.pipe.transition(b, job_state::running, procs(1), "started");
    r.pipe.transition(a, job_state::node_fail, std::nullopt, "node lost");
    r.pipe.transition(a, job_state::pending, std::nullopt, "requeued");
    r.pipe.transition(b, job_state::completed, std::nullopt, "done", 0);
    r.pipe.transition(a, job_state::running, procs(2), "started again");
    r.pipe.kick();
  });
  REQUIRE(r.committed());
  CHECK(r.history(a) ==
        std::vector<job_state>{job_state::pending, job_state::running, job_state::node_fail, job_state::pending,
                               job_state::running});
  CHECK(r.history(b) == std::vector<job_state>{job_state::pending, job_state::running, job_state::completed});
  // Store operations come before the transitions of their batch.
  const auto c = r.submit();
  std::vector<std::string> order;
  r.on_strand([&] {
    r.pipe.transition(c, job_state::running, procs(1), "started");
    r.pipe.store_op([&](store::job_store& s) {
      order.push_back(s.get_job(c)->status.state == job_state::pending ? "op before" : "op after");
    });
    r.pipe.kick();
  });
  REQUIRE(r.committed());
  CHECK(order == std::vector<std::string>{"op before"});
}

TEST_CASE("write_pipeline: after_commit runs on the strand once the store has the batch") {
  rig r;
  const auto id = r.submit();
  CHECK(r.start_and_see(id) == job_state::running);
}

TEST_CASE("write_pipeline: writes the store lost are held and retried, nothing is acted on before, nothing lost") {
  rig r;
  const auto id = r.submit();
  // The next two writes fail as lost before COMMIT (the connection went).
  r.store.inject(store::memory_job_store::fault::commit_lost, 2);
  CHECK(r.start_and_see(id) == job_state::running);
  CHECK(r.store.faults_pending() == 0);
  CHECK(r.fatal_errors.empty());
  CHECK(r.history(id) == std::vector<job_state>{job_state::pending, job_state::running});
}

TEST_CASE("write_pipeline: a COMMIT whose answer was lost is not written twice nor given up") {
  rig r;
  const auto id = r.submit();
  r.store.inject(store::memory_job_store::fault::commit_in_doubt, 1);
  r.on_strand([&] {
    r.queue_start(id);
    r.pipe.kick();
  });
  REQUIRE(r.committed());
  CHECK(r.fatal_errors.empty());
  CHECK(r.history(id) == std::vector<job_state>{job_state::pending, job_state::running});
}

TEST_CASE("write_pipeline: the decider runs once for a burst, and what it queues joins the batch") {
  rig r;
  const auto id = r.submit();
  std::size_t decided = 0;
  r.pipe.set_hooks({[&] {
                      ++decided;
                      r.pipe.transition(id, job_state::running, procs(1), "decided");
                    },
                    nullptr, nullptr});
  std::optional<job_state> seen;
  r.on_strand([&] {
    for (int i = 0; i < 5; ++i) r.pipe.decide();
    r.pipe.after_commit([&] { seen = r.state(id); });
  });
  REQUIRE(r.until([&] { return seen.has_value(); }));
  CHECK(decided == 1);
  CHECK(seen == job_state::running);
}

TEST_CASE("write_pipeline: while held nothing is decided or written; released, it goes on") {
  rig r;
  const auto id = r.submit();
  r.pipe.hold(true);
  bool after = false;
  r.start_and_kick(id, after, true);
  r.io.poll();
  CHECK(r.decisions == 0);
  CHECK_FALSE(after);
  CHECK(r.state(id) == job_state::pending);
  r.on_strand([&] {
    r.pipe.hold(false);
    r.pipe.kick();
  });
  REQUIRE(r.until([&] { return after; }));
  CHECK(r.decisions == 1);
  CHECK(r.state(id) == job_state::running);
}

TEST_CASE("write_pipeline: a store task's failure that is not an outage stops the daemon; stopped, nothing runs") {
  rig r;
  bool then = false;
  r.on_strand([&] {
    r.pipe.store_task([](store::job_store& s) { s.update_job(store::control_change{.job_id = 424242}); },
                      [&] { then = true; });
  });
  REQUIRE(r.until([&] { return !r.fatal_errors.empty(); }));
  CHECK_FALSE(then);
  CHECK(r.pipe.failed());
  CHECK(r.fatal_errors[0].starts_with("the job store failed: "));

  r.pipe.stop();
  CHECK(r.pipe.stopped());
  bool ran = false;
  r.pipe.post([&] { ran = true; });
  r.io.poll();
  CHECK_FALSE(ran);
}

TEST_CASE("write_pipeline: stopped while the store is down, it returns and nothing unacknowledged is acted on") {
  rig r;
  const auto id = r.submit();
  r.store.set_down(true);
  bool after = false;
  r.start_and_kick(id, after);
  r.pipe.stop();  // bounded: the writer's wait for the store ends
  r.io.poll();
  CHECK_FALSE(after);
  CHECK(r.fatal_errors.empty());
  r.store.set_down(false);
  CHECK(r.state(id) == job_state::pending);
}

TEST_CASE("write_pipeline: a job update the store refuses is logged, the rest of the batch is written, nothing stops") {
  rig r;
  const auto id = r.submit();
  store::control_change bad;
  bad.job_id = 999;
  bad.reason = "no such job";
  r.on_strand([&] {
    r.pipe.record_update(bad);
    r.queue_start(id);
    r.pipe.kick();
  });
  REQUIRE(r.committed());
  CHECK(r.fatal_errors.empty());
  CHECK_FALSE(r.pipe.failed());
  CHECK(r.state(id) == job_state::running);
}
