// job_store_contract: the job_store contract as doctest template test cases,
// run against every implementation (memory here, PostgreSQL in
// tests/integration/store). Include in ONE file per test binary, then
// AQS_JOB_STORE_CONTRACT(fixture): a fixture is default-constructible and
// has `job_store& store()`, a fresh empty store.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <string>
#include <tuple>

#include "core/job_state.hpp"
#include "core/processor_set.hpp"
#include "store/job_store.hpp"
#include "store_samples.hpp"

namespace aqs::test::contract {

using core::job_state;
using core::processor_set;
using store::job_submission;
using store::job_store;
using store::job_transition;

inline const processor_set k_map = processor_set::from_string("00111100");
inline const processor_set k_other_map = processor_set::from_string("11111100");

inline job_submission request(std::string user = "alice", int procs = 2) { return sample_request(std::move(user), procs); }

// A fresh adaptive job brought into `state` by legal transitions.
inline std::int64_t job_in(job_store& s, job_state state) {
  job_submission q = request("dave", 2);
  q.adaptive = true;
  q.max_pe = 8;
  const auto id = s.submit(q);
  if (state == job_state::pending) return id;
  s.transition({.job_id = id, .to = job_state::running, .procs = k_map});
  switch (state) {
    case job_state::running: break;
    case job_state::resizing: s.transition({.job_id = id, .to = job_state::resizing, .procs = k_other_map}); break;
    default: s.transition({.job_id = id, .to = state});
  }
  REQUIRE(s.get_job(id)->status.state == state);
  return id;
}

// What a caller would pass to move a job from `from` to `to`.
inline job_transition request_for(std::int64_t id, job_state from, job_state to) {
  job_transition t{.job_id = id, .from = from, .to = to, .reason = "test"};
  if (to == job_state::resizing ||
      (to == job_state::running && (from == job_state::pending || from == job_state::node_fail))) {
    t.procs = to == job_state::resizing ? k_other_map : k_map;
  }
  if (core::is_final(to)) t.exit_code = 0;
  return t;
}

// submit_then's outcome, waited for.
inline std::tuple<std::int64_t, bool, std::exception_ptr> submit_then_wait(job_store& s, job_submission q) {
  std::promise<std::tuple<std::int64_t, bool, std::exception_ptr>> p;
  auto f = p.get_future();
  s.submit_then(std::move(q), [&p](std::int64_t id, bool created, std::exception_ptr e) {
    p.set_value({id, created, e});
  });
  return f.get();
}

}  // namespace aqs::test::contract

// The cases below read the names above unqualified (this header is included
// in one test file per binary, which holds nothing else).
using namespace aqs::test::contract;

TEST_CASE_TEMPLATE_DEFINE("a submitted job reads back as asked, PENDING, with its submission event", F,
                          job_store_contract_submit) {
  F fixture;
  job_store& s = fixture.store();
  job_submission q = request();
  q.argv = {"a", "b"};
  q.environment = {"PATH=/bin"};
  q.adaptive = true;
  q.max_pe = 8;
  q.walltime_s = 60;
  q.dependencies = {1};
  q.submit_token = "contract-1";
  const auto id = s.submit(q);
  CHECK(id > 0);
  const auto rec = s.get_job(id);
  REQUIRE(rec);
  CHECK(rec->request == q);
  CHECK(rec->status.state == job_state::pending);
  CHECK(rec->status.procs.none());
  CHECK_FALSE(rec->status.start_time);
  CHECK_FALSE(rec->status.end_time);
  const auto h = s.job_history(id);
  REQUIRE(h.size() == 1);
  CHECK_FALSE(h[0].old_state);
  CHECK(h[0].new_state == job_state::pending);
  CHECK(h[0].reason == "submitted");
  CHECK(h[0].time == rec->status.submit_time);
  // A request without a token gets one of the store's.
  const auto other = s.submit(request());
  CHECK(other != id);
  CHECK(s.get_job(other)->request.submit_token.rfind("aqs-", 0) == 0);
  CHECK_FALSE(s.get_job(999'999));
  CHECK(s.job_history(999'999).empty());
}

TEST_CASE_TEMPLATE_DEFINE(
    "a submit_token submitted twice yields one job, and submit_then reports the retry as not created", F,
    job_store_contract_token) {
  F fixture;
  job_store& s = fixture.store();
  job_submission q = request();
  q.submit_token = "retry-me";
  const auto [id, created, error] = submit_then_wait(s, q);
  REQUIRE_FALSE(error);
  CHECK(created);
  CHECK(s.submit(q) == id);
  const auto [again, created_again, error_again] = submit_then_wait(s, q);
  REQUIRE_FALSE(error_again);
  CHECK(again == id);
  CHECK_FALSE(created_again);
  CHECK(s.list_jobs().size() == 1);
  CHECK(s.job_history(id).size() == 1);
}

TEST_CASE_TEMPLATE_DEFINE("a request that could never be stored is invalid_job at once and stores nothing", F,
                          job_store_contract_invalid) {
  F fixture;
  job_store& s = fixture.store();
  job_submission q = request();
  q.name = std::string("a\0b", 3);
  CHECK_THROWS_AS(s.submit_async(q), aqs::store::invalid_job);
  q = request();
  q.max_pe = 4;  // rigid with min != max
  CHECK_THROWS_AS(s.submit_then(q, [](std::int64_t, bool, std::exception_ptr) { FAIL("called"); }),
                  aqs::store::invalid_job);
  q = request();
  q.min_pe = 0;
  CHECK_THROWS_AS(s.submit(q), aqs::store::invalid_job);
  CHECK(s.list_jobs({.include_finished = true}).empty());
}

TEST_CASE_TEMPLATE_DEFINE("every legal transition is written with its event and every illegal one writes nothing", F,
                          job_store_contract_legality) {
  F fixture;
  job_store& s = fixture.store();
  int legal = 0, illegal = 0;
  for (job_state from : aqs::core::k_all_job_states) {
    for (job_state to : aqs::core::k_all_job_states) {
      CAPTURE(aqs::core::to_string(from));
      CAPTURE(aqs::core::to_string(to));
      const auto id = job_in(s, from);
      const auto before = s.job_history(id);
      const auto record_before = s.get_job(id);
      if (aqs::core::is_legal_transition(from, to)) {
        ++legal;
        const auto e = s.transition(request_for(id, from, to));
        CHECK(e.old_state == from);
        CHECK(e.new_state == to);
        const auto rec = s.get_job(id);
        CHECK(rec->status.state == to);
        CHECK(rec->status.end_time.has_value() == aqs::core::is_final(to));
        CHECK(rec->status.procs.any() == aqs::core::holds_processors(to));
        const auto after = s.job_history(id);
        REQUIRE(after.size() == before.size() + 1);
        CHECK(after.back().id == e.id);
        CHECK(after.back().reason == "test");
      } else {
        ++illegal;
        CHECK_THROWS_AS(s.transition(request_for(id, from, to)), aqs::store::illegal_transition);
        CHECK(s.job_history(id).size() == before.size());
        CHECK(s.get_job(id)->status.state == record_before->status.state);
        CHECK(s.get_job(id)->status.procs == record_before->status.procs);
      }
    }
  }
  CHECK(legal == 28);  // with the requeues (fctl requeue): RUNNING, RESIZING, SUSPENDED -> PENDING
  CHECK(illegal == 72);
}

TEST_CASE_TEMPLATE_DEFINE(
    "transitions with the wrong maps, exit status, expectation or job are refused and write nothing", F,
    job_store_contract_refusals) {
  F fixture;
  job_store& s = fixture.store();
  const auto pending = job_in(s, job_state::pending);
  const auto running = job_in(s, job_state::running);
  CHECK_THROWS_WITH_AS(s.transition({.job_id = pending, .to = job_state::running}),
                       doctest::Contains("non-empty processor map"), aqs::store::invalid_job);
  CHECK_THROWS_WITH_AS(s.transition({.job_id = running, .to = job_state::resizing}),
                       doctest::Contains("needs the new map"), aqs::store::invalid_job);
  CHECK_THROWS_WITH_AS(s.transition({.job_id = running, .to = job_state::cancelled, .procs = k_map}),
                       doctest::Contains("no map allowed"), aqs::store::invalid_job);
  CHECK_THROWS_WITH_AS(s.transition({.job_id = running, .to = job_state::suspended, .exit_code = 1}),
                       doctest::Contains("not a final state"), aqs::store::invalid_job);
  CHECK_THROWS_WITH_AS(s.transition({.job_id = running, .from = job_state::pending, .to = job_state::cancelled}),
                       doctest::Contains("is RUNNING, not PENDING"), aqs::store::unexpected_state);
  CHECK_THROWS_AS(s.transition({.job_id = 999'999, .to = job_state::cancelled}), aqs::store::not_found);
  CHECK(s.get_job(pending)->status.state == job_state::pending);
  CHECK(s.get_job(running)->status.state == job_state::running);
  CHECK(s.job_history(pending).size() == 1);
  CHECK(s.job_history(running).size() == 2);
}

TEST_CASE_TEMPLATE_DEFINE("a job's history holds its times, maps and exit status, through a resize and a requeue", F,
                          job_store_contract_history) {
  F fixture;
  job_store& s = fixture.store();
  const auto id = job_in(s, job_state::running);
  const auto started = *s.get_job(id)->status.start_time;
  const auto grow = processor_set::from_string("00111111");
  s.transition({.job_id = id, .to = job_state::resizing, .procs = grow, .reason = "grow"});
  auto rec = s.get_job(id);
  CHECK(rec->status.procs == k_map);  // still held until the job acknowledges
  REQUIRE(rec->status.resize_procs);
  CHECK(*rec->status.resize_procs == grow);
  s.transition({.job_id = id, .from = job_state::resizing, .to = job_state::running, .reason = "ack"});
  rec = s.get_job(id);
  CHECK(rec->status.procs == grow);
  CHECK_FALSE(rec->status.resize_procs);
  CHECK(rec->status.start_time == started);  // a resize is not a start
  s.transition({.job_id = id, .to = job_state::node_fail, .reason = "node down", .term_signal = 9});
  rec = s.get_job(id);
  CHECK(rec->status.end_time);
  CHECK(rec->status.term_signal == 9);
  CHECK(rec->status.procs.none());
  s.transition({.job_id = id, .to = job_state::pending, .reason = "requeue"});
  rec = s.get_job(id);
  CHECK_FALSE(rec->status.start_time);
  CHECK_FALSE(rec->status.end_time);
  CHECK_FALSE(rec->status.term_signal);
  s.transition({.job_id = id, .to = job_state::running, .procs = k_other_map});
  s.transition({.job_id = id, .to = job_state::completed, .exit_code = 3});
  rec = s.get_job(id);
  CHECK(rec->status.exit_code == 3);
  REQUIRE(rec->status.end_time);
  CHECK(*rec->status.end_time >= *rec->status.start_time);
  const auto h = s.job_history(id);
  REQUIRE(h.size() == 8);  // submitted, started, resize, ack, node_fail, requeue, started, completed
  for (std::size_t i = 1; i < h.size(); ++i) {
    CHECK(h[i].id > h[i - 1].id);
    CHECK(h[i].time >= h[i - 1].time);
    CHECK(h[i].old_state == h[i - 1].new_state);
  }
  CHECK(h[2].old_procs == k_map);
  CHECK(h[2].new_procs == grow);
  CHECK(h[4].old_procs == grow);  // NODE_FAIL records what was lost
  CHECK(h[4].new_procs.none());
  CHECK(h[7].exit_code == 3);
}

TEST_CASE_TEMPLATE_DEFINE("a batch of transitions is written whole, or not at all when one of them fails", F,
                          job_store_contract_batch) {
  F fixture;
  job_store& s = fixture.store();
  const auto a = job_in(s, job_state::running);
  const auto b = job_in(s, job_state::pending);
  CHECK_THROWS_AS(s.transition_all({{.job_id = a, .to = job_state::cancelled},
                                    {.job_id = b, .to = job_state::suspended}}),
                  aqs::store::illegal_transition);
  CHECK_THROWS_AS(s.transition_all({{.job_id = a, .to = job_state::cancelled},
                                    {.job_id = a, .to = job_state::cancelled}}),
                  aqs::store::invalid_job);
  CHECK(s.get_job(a)->status.state == job_state::running);
  CHECK(s.job_history(a).size() == 2);
  const auto events = s.transition_all({{.job_id = b, .to = job_state::cancelled, .reason = "fkill"},
                                        {.job_id = a, .to = job_state::cancelled, .reason = "fkill"}});
  REQUIRE(events.size() == 2);
  CHECK(events[0].job_id == b);
  CHECK(events[1].job_id == a);
  CHECK(s.get_job(a)->status.state == job_state::cancelled);
  CHECK(s.get_job(b)->status.state == job_state::cancelled);
  CHECK(s.transition_all({}).empty());
}

TEST_CASE_TEMPLATE_DEFINE("nodes are numbered in registration order and keep their numbers when they register again", F,
                          job_store_contract_nodes) {
  F fixture;
  job_store& s = fixture.store();
  const auto n0 = s.register_node({.name = "n0", .address = "10.0.0.1", .nprocs = 4});
  const auto n1 = s.register_node({.name = "n1", .address = "10.0.0.2", .nprocs = 8});
  CHECK(n0.first_proc == 0);
  CHECK(n1.first_proc == 4);
  CHECK(n0.state == aqs::store::node_state::up);
  CHECK(n0.last_heartbeat);
  s.set_node_state("n0", aqs::store::node_state::down);
  const auto again = s.register_node({.name = "n0", .address = "10.0.0.9", .nprocs = 4, .gpus = 1});
  CHECK(again.id == n0.id);
  CHECK(again.first_proc == 0);
  CHECK(again.address == "10.0.0.9");
  CHECK(again.gpus == 1);
  CHECK(again.state == aqs::store::node_state::up);
  CHECK_THROWS_WITH_AS(s.register_node({.name = "n1", .nprocs = 2}), doctest::Contains("renumbering"),
                       aqs::store::invalid_job);
  CHECK_THROWS_AS(s.register_node({.name = "", .nprocs = 2}), aqs::store::invalid_job);
  CHECK_THROWS_AS(s.heartbeat("nobody"), aqs::store::not_found);
  CHECK_THROWS_AS(s.set_node_state("nobody", aqs::store::node_state::drained), aqs::store::not_found);
  s.heartbeat("n1");
  s.set_node_state("n1", aqs::store::node_state::drained);
  const auto nodes = s.list_nodes();
  REQUIRE(nodes.size() == 2);
  CHECK(nodes[0].name == "n0");
  CHECK(nodes[1].name == "n1");
  CHECK(nodes[1].state == aqs::store::node_state::drained);
  CHECK(s.register_node({.name = "n2", .nprocs = 1}).first_proc == 12);
}

TEST_CASE_TEMPLATE_DEFINE("listings filter by user, state and id, page, and recovery loads the live jobs and the nodes",
                          F, job_store_contract_listings) {
  F fixture;
  job_store& s = fixture.store();
  const auto a = s.submit(request("alice"));
  const auto b = s.submit(request("bob"));
  const auto c = s.submit(request("alice"));
  s.transition({.job_id = b, .to = job_state::running, .procs = k_map});
  s.transition({.job_id = c, .to = job_state::cancelled});
  s.register_node({.name = "n0", .nprocs = 8});
  auto ids = [](const std::vector<aqs::store::job_summary>& js) {
    std::vector<std::int64_t> out;
    for (const auto& j : js) out.push_back(j.id);
    return out;
  };
  CHECK(ids(s.list_jobs()) == std::vector<std::int64_t>{a, b});
  CHECK(ids(s.list_jobs({.include_finished = true})) == std::vector<std::int64_t>{a, b, c});
  CHECK(ids(s.list_jobs({.user_name = "alice"})) == std::vector<std::int64_t>{a});
  CHECK(ids(s.list_jobs({.user_name = "alice", .include_finished = true})) == std::vector<std::int64_t>{a, c});
  CHECK(ids(s.list_jobs({.states = {job_state::cancelled}})) == std::vector<std::int64_t>{c});
  CHECK(ids(s.list_jobs({.include_finished = true, .limit = 2})) == std::vector<std::int64_t>{a, b});
  CHECK(ids(s.list_jobs({.include_finished = true, .after_id = a})) == std::vector<std::int64_t>{b, c});
  CHECK(ids(s.list_jobs({.include_finished = true, .limit = 2, .newest = true})) == std::vector<std::int64_t>{b, c});
  CHECK(ids(s.list_jobs({.include_finished = true, .limit = 1, .newest = true, .before_id = c})) ==
        std::vector<std::int64_t>{b});
  CHECK(ids(s.list_jobs({.job_ids = {c, a}})) == std::vector<std::int64_t>{a});
  CHECK(ids(s.list_jobs({.include_finished = true, .job_ids = {c, a}})) == std::vector<std::int64_t>{a, c});
  const auto st = s.load_live_state();
  CHECK(ids(st.jobs) == std::vector<std::int64_t>{a, b});
  CHECK(st.jobs[1].status.procs == k_map);
  REQUIRE(st.nodes.size() == 1);
  CHECK(st.nodes[0].name == "n0");
}

TEST_CASE_TEMPLATE_DEFINE("fctl's updates are written with their event; a state change clears the control mark",
                          F, job_store_contract_updates) {
  F fixture;
  job_store& s = fixture.store();
  const auto pending = job_in(s, job_state::pending);
  const auto before = s.job_history(pending).size();
  const auto e = s.update_job({.job_id = pending, .control = "held-user", .reason = "held by alice"});
  CHECK(e.old_state == job_state::pending);
  CHECK(e.new_state == job_state::pending);
  CHECK(s.get_job(pending)->status.control == "held-user");
  s.update_job({.job_id = pending, .min_pe = 2, .max_pe = 6, .walltime_s = 60, .reason = "range 2-6 set by root"});
  auto rec = s.get_job(pending);
  CHECK(rec->request.min_pe == 2);
  CHECK(rec->request.max_pe == 6);
  CHECK(rec->request.walltime_s == 60);
  CHECK(rec->status.control == "held-user");
  const auto hist = s.job_history(pending);
  REQUIRE(hist.size() == before + 2);
  CHECK(hist.back().reason == "range 2-6 set by root");
  // The live state carries the mark, for recovery.
  bool seen = false;
  for (const auto& j : s.load_live_state().jobs) {
    if (j.id == pending) seen = j.status.control == "held-user";
  }
  CHECK(seen);
  // Refused, nothing written: no reason, min > max, a hold of a running job, an ended job.
  CHECK_THROWS_AS(s.update_job({.job_id = pending, .control = ""}), aqs::store::invalid_job);
  CHECK_THROWS_AS(s.update_job({.job_id = pending, .min_pe = 5, .max_pe = 3, .reason = "x"}), aqs::store::invalid_job);
  const auto running = job_in(s, job_state::running);
  CHECK_THROWS_AS(s.update_job({.job_id = running, .control = "held-user", .reason = "x"}), aqs::store::invalid_job);
  CHECK_THROWS_AS(s.update_job({.job_id = 999'999, .reason = "x"}), aqs::store::not_found);
  CHECK(s.job_history(pending).size() == before + 2);
  // Starting clears the hold mark (a released job starts).
  s.update_job({.job_id = pending, .control = "", .reason = "released by alice"});
  s.transition({.job_id = pending, .to = job_state::running, .procs = k_map});
  CHECK(s.get_job(pending)->status.control.empty());
  // A suspended job's resume mark goes when it runs again.
  s.transition({.job_id = running, .to = job_state::suspended});
  s.update_job({.job_id = running, .control = "resume", .reason = "resume asked by root"});
  CHECK(s.get_job(running)->status.control == "resume");
  s.transition({.job_id = running, .to = job_state::running});
  CHECK(s.get_job(running)->status.control.empty());
  s.transition({.job_id = running, .to = job_state::completed, .exit_code = 0});
  CHECK_THROWS_AS(s.update_job({.job_id = running, .min_pe = 1, .reason = "x"}), aqs::store::invalid_job);
}

TEST_CASE_TEMPLATE_DEFINE("a resize the job claimed is marked on it, read back for recovery, and cleared by its end",
                          F, job_store_contract_claims) {
  F fixture;
  job_store& s = fixture.store();
  CHECK(aqs::store::claimed_epoch(aqs::store::claim_control(7)) == 7);
  for (const char* bad : {"", "claimed:", "claimed:0", "claimed:x", "claimed:3 ", "resume", "claimed:-2"}) {
    CHECK_MESSAGE(!aqs::store::claimed_epoch(bad), bad);
  }
  const auto running = job_in(s, job_state::running);
  // Only a RESIZING job can have claimed a map.
  CHECK_THROWS_AS(s.update_job({.job_id = running, .control = aqs::store::claim_control(1), .reason = "x"}),
                  aqs::store::invalid_job);
  CHECK_THROWS_AS(s.update_job({.job_id = running, .control = "claimed:soon", .reason = "x"}), aqs::store::invalid_job);
  const auto resizing = job_in(s, job_state::resizing);
  s.update_job({.job_id = resizing, .control = aqs::store::claim_control(4), .reason = "map 4 claimed by the job"});
  bool seen = false;
  for (const auto& j : s.load_live_state().jobs) {
    if (j.id != resizing) continue;
    seen = aqs::store::claimed_epoch(j.status.control) == 4 && j.status.resize_procs == k_other_map &&
           j.status.procs == k_map;
  }
  CHECK(seen);
  CHECK(s.job_history(resizing).back().reason == "map 4 claimed by the job");
  s.transition({.job_id = resizing, .from = job_state::resizing, .to = job_state::running, .reason = "ack"});
  const auto rec = s.get_job(resizing);
  CHECK(rec->status.control.empty());
  CHECK(rec->status.procs == k_other_map);
}

// Runs every contract case above against `fixture`.
TEST_CASE_TEMPLATE_DEFINE("an array's compact record splits tasks off in one transaction, once per index", F,
                          job_store_contract_split) {
  F fixture;
  job_store& s = fixture.store();
  job_submission q = request();
  q.submit_token = "array-1";
  q.environment = {"A=1"};
  q.geometry = R"({"array":"0-99999","array_task_count":100000})";
  auto id = s.submit(q);
  aqs::store::array_split sp;
  sp.array_id = id;
  sp.tasks = {0, 1};
  sp.task_geometry = {R"({"array_job_id":)" + std::to_string(id) + R"(,"array_task_id":0})",
                      R"({"array_job_id":)" + std::to_string(id) + R"(,"array_task_id":1})"};
  sp.rest_geometry = R"({"array":"2-99999","array_task_count":100000})";
  const auto ids = s.split_array(sp);
  REQUIRE(ids.size() == 2);
  CHECK(ids[0] != ids[1]);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto t = s.get_job(ids[i]);
    REQUIRE(t);
    CHECK(t->status.state == job_state::pending);
    CHECK(t->request.environment == q.environment);
    CHECK(t->request.submit_token == "array-1#" + std::to_string(i));
    std::string g = t->request.geometry;  // PostgreSQL's jsonb spaces it out
    std::erase(g, ' ');
    CHECK(g.find("\"array_task_id\":" + std::to_string(i)) != std::string::npos);
    REQUIRE(s.job_history(ids[i]).size() == 1);
  }
  CHECK(s.get_job(id)->request.geometry.find("2-99999") != std::string::npos);
  // The same split again (a retry) finds the same tasks and adds none.
  CHECK(s.split_array(sp) == ids);
  CHECK(s.list_jobs({}).size() == 3);
  // The record becomes task 2 and the indices left move to a new record.
  sp.tasks = {3};
  sp.task_geometry = {R"({"array_job_id":)" + std::to_string(id) + R"(,"array_task_id":3})"};
  sp.rest_geometry = R"({"array_task_id":2})";
  sp.new_record_geometry = R"({"array":"4-99999","array_job_id":)" + std::to_string(id) + "}";
  const auto moved = s.split_array(sp);
  REQUIRE(moved.size() == 2);
  const auto rest = s.get_job(moved[1]);
  REQUIRE(rest);
  CHECK(rest->request.submit_token == "array-1#rest");
  CHECK(rest->request.geometry.find("4-99999") != std::string::npos);
  CHECK(rest->request.script == q.script);
  CHECK(s.get_job(id)->request.geometry.find("array_task_id") != std::string::npos);
  CHECK(s.list_jobs({}).size() == 5);
  // Not compact any more: it splits nothing.
  sp.new_record_geometry.reset();
  CHECK_THROWS_AS(s.split_array(sp), aqs::store::invalid_job);
  // A record that was cancelled splits nothing.
  id = moved[1];
  s.transition({.job_id = id, .to = job_state::cancelled});
  sp.array_id = id;
  sp.tasks = {4};
  sp.task_geometry = {"{}"};
  CHECK_THROWS_AS(s.split_array(sp), aqs::store::invalid_job);
  CHECK(s.list_jobs({.include_finished = true}).size() == 5);
  sp.array_id = 999'999;
  CHECK_THROWS_AS(s.split_array(sp), aqs::store::not_found);
  // An ordinary job is no compact record.
  sp.array_id = s.submit(request());
  CHECK_THROWS_AS(s.split_array(sp), aqs::store::invalid_job);
}

// Issue 32: what agents measured of a job, one row per node, summed (CPU)
// and the largest (memory) over its latest run; a node's second report
// replaces its first; a requeued job's earlier run does not count.
TEST_CASE_TEMPLATE_DEFINE("a job's measurements are kept per node and read back summed over its latest run", F,
                          job_store_contract_measurements) {
  F fixture;
  job_store& s = fixture.store();
  const auto id = job_in(s, job_state::running);
  CHECK(s.job_usage_of({id}).empty());
  s.record_measurement({id, "node1", 1'000'000, 200'000, 50'000});
  s.record_measurement({id, "node2", 500'000, 100'000, 90'000});
  s.record_measurement({id, "node2", 600'000, 100'000, 80'000});  // node2 again: replaces its first
  auto u = s.job_usage_of({id, id + 1000});
  REQUIRE(u.size() == 1);
  CHECK(u[0].job_id == id);
  CHECK(u[0].measured_nodes == 2);
  CHECK(u[0].user_cpu_us == 1'600'000);
  CHECK(u[0].system_cpu_us == 300'000);
  CHECK(u[0].max_rss_kb == 80'000);
  CHECK_FALSE(u[0].alloc_cpu_seconds.has_value());  // no usage record written
  CHECK_THROWS_AS(s.record_measurement({id, "node1", -1, 0, 0}), std::invalid_argument);
  CHECK_THROWS_AS(s.record_measurement({id, "", 1, 0, 0}), std::invalid_argument);
  // Requeued and started again: the first run's reports are not this run's.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  s.transition({.job_id = id, .to = job_state::node_fail});
  s.transition({.job_id = id, .to = job_state::pending});
  s.transition({.job_id = id, .to = job_state::running, .procs = k_map});
  CHECK(s.job_usage_of({id}).empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  s.record_measurement({id, "node1", 7, 8, 9});
  u = s.job_usage_of({id});
  REQUIRE(u.size() == 1);
  CHECK(u[0].measured_nodes == 1);
  CHECK(u[0].user_cpu_us == 7);
  CHECK(u[0].max_rss_kb == 9);
}

#define AQS_JOB_STORE_CONTRACT(fixture)                                 \
  TEST_CASE_TEMPLATE_INVOKE(job_store_contract_measurements, fixture);  \
  TEST_CASE_TEMPLATE_INVOKE(job_store_contract_submit, fixture);        \
  TEST_CASE_TEMPLATE_INVOKE(job_store_contract_token, fixture);         \
  TEST_CASE_TEMPLATE_INVOKE(job_store_contract_invalid, fixture);       \
  TEST_CASE_TEMPLATE_INVOKE(job_store_contract_legality, fixture);      \
  TEST_CASE_TEMPLATE_INVOKE(job_store_contract_refusals, fixture);      \
  TEST_CASE_TEMPLATE_INVOKE(job_store_contract_history, fixture);       \
  TEST_CASE_TEMPLATE_INVOKE(job_store_contract_batch, fixture);         \
  TEST_CASE_TEMPLATE_INVOKE(job_store_contract_nodes, fixture);         \
  TEST_CASE_TEMPLATE_INVOKE(job_store_contract_listings, fixture);      \
  TEST_CASE_TEMPLATE_INVOKE(job_store_contract_updates, fixture);       \
  TEST_CASE_TEMPLATE_INVOKE(job_store_contract_claims, fixture);        \
  TEST_CASE_TEMPLATE_INVOKE(job_store_contract_split, fixture)
