// Unit tests of memory_job_store beyond the shared contract: its callback
// thread, its clock, and the database faults it can inject.
#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "store/memory_job_store.hpp"

using namespace aqs::store;
using aqs::core::job_state;
using aqs::core::processor_set;
using fault = memory_job_store::fault;

namespace {

const processor_set k_map = processor_set::from_string("0011");

job_submission request(std::string token = {}) {
  job_submission q;
  q.user_name = "alice";
  q.uid = 1000;
  q.gid = 1000;
  q.workdir = "/tmp";
  q.argv = {"true"};
  q.submit_token = std::move(token);
  return q;
}

struct outcome {
  std::int64_t id = 0;
  bool created = false;
  std::exception_ptr error;
};

outcome submit_then_wait(memory_job_store& s, job_submission q) {
  std::promise<outcome> p;
  auto f = p.get_future();
  s.submit_then(std::move(q), [&p](std::int64_t id, bool created, std::exception_ptr e) {
    p.set_value({id, created, e});
  });
  return f.get();
}

bool is_unavailable(const std::exception_ptr& e) {
  try {
    if (e) std::rethrow_exception(e);
  } catch (const store_unavailable&) {
    return true;
  } catch (...) {
  }
  return false;
}

}  // namespace

TEST_CASE("submit_then calls back on the store's own thread, in submission order, even while the caller holds a lock") {
  memory_job_store s;
  std::mutex caller_lock;
  std::vector<std::int64_t> seen;
  std::atomic<bool> on_caller_thread{false};
  const auto caller = std::this_thread::get_id();
  std::vector<std::int64_t> ids;
  {
    std::lock_guard lk(caller_lock);  // a callback taking it would deadlock if run here
    for (int i = 0; i < 50; ++i) {
      s.submit_then(request(), [&](std::int64_t id, bool created, std::exception_ptr e) {
        if (std::this_thread::get_id() == caller) on_caller_thread = true;
        std::lock_guard cl(caller_lock);
        CHECK(created);
        CHECK_FALSE(e);
        seen.push_back(id);
      });
    }
  }
  s.wait_callbacks();
  CHECK_FALSE(on_caller_thread);
  REQUIRE(seen.size() == 50);
  for (std::size_t i = 1; i < seen.size(); ++i) CHECK(seen[i] == seen[i - 1] + 1);
}

TEST_CASE("a virtual clock stamps submissions, starts, ends, events and heartbeats") {
  time_point t{std::chrono::seconds(1'000'000)};
  memory_job_store s({.clock = [&] { return t; }});
  const auto id = s.submit(request());
  t += std::chrono::seconds(5);
  s.transition({.job_id = id, .to = job_state::running, .procs = k_map});
  t += std::chrono::seconds(7);
  const auto e = s.transition({.job_id = id, .to = job_state::completed, .exit_code = 0});
  const auto rec = s.get_job(id);
  CHECK(rec->status.submit_time == time_point{std::chrono::seconds(1'000'000)});
  CHECK(rec->status.start_time == time_point{std::chrono::seconds(1'000'005)});
  CHECK(rec->status.end_time == time_point{std::chrono::seconds(1'000'012)});
  CHECK(e.time == t);
  const auto n = s.register_node({.name = "n0", .nprocs = 4});
  CHECK(n.registered_at == t);
  t += std::chrono::seconds(1);
  s.heartbeat("n0");
  CHECK(s.list_nodes()[0].last_heartbeat == t);
}

TEST_CASE("an injected lost commit throws store_unavailable and writes nothing; the next write succeeds") {
  memory_job_store s;
  const auto id = s.submit(request());
  s.inject(fault::commit_lost);
  CHECK_THROWS_AS(s.transition({.job_id = id, .to = job_state::running, .procs = k_map}), store_unavailable);
  CHECK(s.get_job(id)->status.state == job_state::pending);
  CHECK(s.job_history(id).size() == 1);
  CHECK(s.faults_pending() == 0);
  s.transition({.job_id = id, .to = job_state::running, .procs = k_map});
  CHECK(s.get_job(id)->status.state == job_state::running);

  s.inject(fault::commit_lost);
  const outcome lost = submit_then_wait(s, request("tok"));
  CHECK(is_unavailable(lost.error));
  CHECK(lost.id == 0);
  CHECK(s.list_jobs({.include_finished = true}).size() == 1);
  const outcome retried = submit_then_wait(s, request("tok"));
  CHECK_FALSE(retried.error);
  CHECK(retried.created);

  s.inject(fault::commit_lost);
  CHECK_THROWS_AS(s.register_node({.name = "n0", .nprocs = 2}), store_unavailable);
  CHECK(s.list_nodes().empty());
}

TEST_CASE("an injected in-doubt commit applies the write and still throws store_unavailable") {
  memory_job_store s;
  const auto id = s.submit(request());
  s.inject(fault::commit_in_doubt);
  CHECK_THROWS_AS(s.transition({.job_id = id, .to = job_state::running, .procs = k_map, .reason = "start"}),
                  store_unavailable);
  CHECK(s.get_job(id)->status.state == job_state::running);
  CHECK(s.job_history(id).back().reason == "start");

  // A submission in doubt is stored; the client's retry with its token finds it.
  s.inject(fault::commit_in_doubt);
  auto f = s.submit_async(request("doubt"));
  CHECK_THROWS_AS(f.get(), store_unavailable);
  const outcome retried = submit_then_wait(s, request("doubt"));
  CHECK_FALSE(retried.error);
  CHECK_FALSE(retried.created);
  CHECK(s.get_job(retried.id)->request.submit_token == "doubt");
  CHECK(s.stats().submissions == 2);  // the one in doubt was never acknowledged
}

TEST_CASE("injected faults queue in order and are met only by writes that pass their checks") {
  memory_job_store s;
  const auto id = s.submit(request());
  s.inject(fault::commit_lost, 2);
  s.inject(fault::commit_in_doubt);
  CHECK(s.faults_pending() == 3);
  CHECK(s.get_job(id));  // reads never fail
  CHECK(s.list_jobs().size() == 1);
  CHECK_THROWS_AS(s.transition({.job_id = id, .to = job_state::completed}), illegal_transition);
  CHECK_THROWS_AS(s.heartbeat("nobody"), not_found);
  CHECK(s.faults_pending() == 3);
  CHECK_THROWS_AS(s.transition({.job_id = id, .to = job_state::running, .procs = k_map}), store_unavailable);
  CHECK_THROWS_AS(s.transition({.job_id = id, .to = job_state::running, .procs = k_map}), store_unavailable);
  CHECK(s.get_job(id)->status.state == job_state::pending);
  CHECK_THROWS_AS(s.transition({.job_id = id, .to = job_state::running, .procs = k_map}), store_unavailable);
  CHECK(s.get_job(id)->status.state == job_state::running);
  CHECK(s.faults_pending() == 0);
}

TEST_CASE("a fault injected for always fails every write until cleared") {
  memory_job_store s;
  const auto id = s.submit(request());
  s.inject(fault::commit_lost, memory_job_store::always);
  CHECK(s.faults_pending() == memory_job_store::always);
  for (int i = 0; i < 5; ++i) {
    CHECK_THROWS_AS(s.transition({.job_id = id, .to = job_state::cancelled}), store_unavailable);
  }
  CHECK_THROWS_AS(s.submit(request()), store_unavailable);
  s.clear_faults();
  CHECK(s.faults_pending() == 0);
  s.transition({.job_id = id, .to = job_state::cancelled});
  CHECK(s.get_job(id)->status.state == job_state::cancelled);
}

TEST_CASE("a batch of transitions meets one fault as a whole") {
  memory_job_store s;
  const auto a = s.submit(request());
  const auto b = s.submit(request());
  const std::vector<job_transition> both = {{.job_id = a, .to = job_state::cancelled},
                                            {.job_id = b, .to = job_state::cancelled}};
  s.inject(fault::commit_lost);
  CHECK_THROWS_AS(s.transition_all(both), store_unavailable);
  CHECK(s.get_job(a)->status.state == job_state::pending);
  CHECK(s.get_job(b)->status.state == job_state::pending);
  s.inject(fault::commit_in_doubt);
  CHECK_THROWS_AS(s.transition_all(both), store_unavailable);
  CHECK(s.get_job(a)->status.state == job_state::cancelled);
  CHECK(s.get_job(b)->status.state == job_state::cancelled);
}

TEST_CASE("a store set down refuses every call with store_unavailable and is unreachable until restored") {
  memory_job_store s;
  const auto id = s.submit(request());
  s.register_node({.name = "n0", .nprocs = 2});
  s.set_down(true);
  CHECK(s.unreachable());
  CHECK_THROWS_AS(s.get_job(id), store_unavailable);
  CHECK_THROWS_AS(s.job_history(id), store_unavailable);
  CHECK_THROWS_AS(s.list_jobs(), store_unavailable);
  CHECK_THROWS_AS(s.list_nodes(), store_unavailable);
  CHECK_THROWS_AS(s.load_live_state(), store_unavailable);
  CHECK_THROWS_AS(s.transition({.job_id = id, .to = job_state::cancelled}), store_unavailable);
  CHECK_THROWS_AS(s.transition_all({{.job_id = id, .to = job_state::cancelled}}), store_unavailable);
  CHECK_THROWS_AS(s.register_node({.name = "n1", .nprocs = 2}), store_unavailable);
  CHECK_THROWS_AS(s.heartbeat("n0"), store_unavailable);
  CHECK_THROWS_AS(s.set_node_state("n0", node_state::down), store_unavailable);
  // Submissions fail through their future or callback; bad requests at once.
  CHECK_THROWS_AS(s.submit_async(request()).get(), store_unavailable);
  CHECK(is_unavailable(submit_then_wait(s, request()).error));
  job_submission bad = request();
  bad.user_name.clear();
  CHECK_THROWS_AS(s.submit_async(bad), invalid_job);

  s.set_down(false);
  CHECK_FALSE(s.unreachable());
  CHECK(s.stats().reconnects == 1);
  CHECK(s.get_job(id)->status.state == job_state::pending);
  CHECK(s.list_jobs().size() == 1);
}

TEST_CASE("after shutdown submissions are refused and every callback queued before it has run") {
  memory_job_store s;
  std::atomic<int> called{0};
  for (int i = 0; i < 20; ++i) {
    s.submit_then(request(), [&](std::int64_t, bool, std::exception_ptr) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ++called;
    });
  }
  s.shutdown();
  CHECK(called == 20);
  CHECK_THROWS_AS(s.submit_async(request()), store_unavailable);
  CHECK_THROWS_AS(s.submit_then(request(), [](std::int64_t, bool, std::exception_ptr) {}), store_unavailable);
  s.shutdown();  // idempotent
  CHECK(s.list_jobs().size() == 20);  // the rest of the store still answers
}
