// The job state machine in the store: every pair of states, legal or not,
// resizes with both maps, times and exit status, and the database trigger
// agreeing with core::is_legal_transition.
#include <doctest/doctest.h>

#include <atomic>

#include <pqxx/pqxx>

#include "store/pg_job_store.hpp"
#include "store_test_util.hpp"
#include "test_pg.hpp"

using namespace aqs::store;
using aqs::core::is_legal_transition;
using aqs::core::job_state;
using aqs::core::k_all_job_states;
using aqs::core::processor_set;
using namespace aqs::test;  // the store tests' helpers (store_test_util.hpp) and databases

namespace {

const processor_set k_map = processor_set::from_string("00111100");
const processor_set k_other_map = processor_set::from_string("11111100");

// A fresh job brought into `state` by legal transitions.
std::int64_t job_in(job_store& store, job_state state) {
  job_submission q = simple_request("dave", 2);
  q.adaptive = true;
  q.max_pe = 8;
  const auto id = store.submit(q);
  if (state == job_state::pending) return id;
  store.transition({.job_id = id, .to = job_state::running, .procs = k_map});
  switch (state) {
    case job_state::running: break;
    case job_state::resizing:
      store.transition({.job_id = id, .to = job_state::resizing, .procs = k_other_map});
      break;
    default: store.transition({.job_id = id, .to = state});
  }
  REQUIRE(store.get_job(id)->status.state == state);
  return id;
}

// What a caller would pass to move a job from `from` to `to`.
job_transition request_for(std::int64_t id, job_state from, job_state to) {
  job_transition t{.job_id = id, .from = from, .to = to, .reason = "test"};
  if (to == job_state::resizing || (to == job_state::running && (from == job_state::pending || from == job_state::node_fail))) {
    t.procs = to == job_state::resizing ? k_other_map : k_map;
  }
  if (aqs::core::is_final(to)) t.exit_code = 0;
  return t;
}

std::string row_image(const std::string& conninfo, std::int64_t id) {
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  return tx.exec_params1("SELECT j::text FROM jobs j WHERE id = $1", id)[0].as<std::string>() + "#" +
         tx.exec_params1("SELECT count(*) FROM job_events WHERE job_id = $1", id)[0].as<std::string>();
}

}  // namespace

TEST_CASE_FIXTURE(fresh_store, "every legal transition is written with its event, every illegal one is refused and writes nothing") {
  int legal = 0, illegal = 0;
  for (job_state from : k_all_job_states) {
    for (job_state to : k_all_job_states) {
      CAPTURE(aqs::core::to_string(from));
      CAPTURE(aqs::core::to_string(to));
      const auto id = job_in(store, from);
      const auto before = store.job_history(id);
      const job_transition t = request_for(id, from, to);
      if (is_legal_transition(from, to)) {
        ++legal;
        const history_event e = store.transition(t);
        CHECK(e.old_state == from);
        CHECK(e.new_state == to);
        const auto rec = store.get_job(id);
        CHECK(rec->status.state == to);
        const auto after = store.job_history(id);
        REQUIRE(after.size() == before.size() + 1);
        CHECK(after.back().id == e.id);
        CHECK(after.back().old_state == from);
        CHECK(after.back().new_state == to);
        CHECK(after.back().reason == "test");
        CHECK(rec->status.end_time.has_value() == aqs::core::is_final(to));
        CHECK(rec->status.procs.any() == aqs::core::holds_processors(to));
      } else {
        ++illegal;
        const std::string image = row_image(db.conninfo(), id);
        try {
          store.transition(t);
          FAIL("an illegal transition was accepted");
        } catch (const illegal_transition& e) {
          CHECK(e.job() == id);
          CHECK(e.from() == from);
          CHECK(e.to() == to);
          const std::string what = e.what();
          CHECK(what.find(std::to_string(id)) != std::string::npos);
          CHECK(what.find(std::string(aqs::core::to_string(from)) + " -> " + std::string(aqs::core::to_string(to))) !=
                std::string::npos);
        }
        CHECK(row_image(db.conninfo(), id) == image);
      }
    }
  }
  CHECK(legal == 28);  // with fctl requeue: RUNNING, RESIZING, SUSPENDED -> PENDING
  CHECK(illegal == 72);
}

TEST_CASE_FIXTURE(fresh_store, "the database trigger refuses exactly the transitions the core calls illegal") {
  pqxx::connection c(db.conninfo());
  for (job_state from : k_all_job_states) {
    const auto id = job_in(store, from);
    for (job_state to : k_all_job_states) {
      if (from == to) continue;
      CAPTURE(aqs::core::to_string(from));
      CAPTURE(aqs::core::to_string(to));
      pqxx::work tx(c);
      std::string error;
      try {
        pqxx::subtransaction sub(tx, "probe");
        sub.exec_params("UPDATE jobs SET state = $2 WHERE id = $1", id, std::string(aqs::core::to_string(to)));
      } catch (const pqxx::sql_error& e) {
        error = e.what();
      }
      // A legal change may still break another constraint (times, maps), but
      // never the transition rule.
      CHECK((error.find("illegal transition") != std::string::npos) == !is_legal_transition(from, to));
      tx.abort();
    }
  }
}

TEST_CASE_FIXTURE(fresh_store, "a resize keeps the old map reserved until the job acknowledges, and records both maps") {
  const auto id = job_in(store, job_state::running);
  const auto grow = processor_set::from_string("00111111");
  store.transition({.job_id = id, .to = job_state::resizing, .procs = grow, .reason = "equipartition: arrival"});
  auto rec = store.get_job(id);
  CHECK(rec->status.state == job_state::resizing);
  CHECK(rec->status.procs == k_map);
  REQUIRE(rec->status.resize_procs);
  CHECK(*rec->status.resize_procs == grow);

  // The job acknowledges without restating the map: it gets the one asked for.
  store.transition({.job_id = id, .from = job_state::resizing, .to = job_state::running, .reason = "ack"});
  rec = store.get_job(id);
  CHECK(rec->status.state == job_state::running);
  CHECK(rec->status.procs == grow);
  CHECK_FALSE(rec->status.resize_procs);

  // A job that never reaches MPI_Migrate keeps its old processors.
  store.transition({.job_id = id, .to = job_state::resizing, .procs = k_map, .reason = "shrink"});
  store.transition({.job_id = id, .to = job_state::running, .procs = grow, .reason = "resize timed out"});
  CHECK(store.get_job(id)->status.procs == grow);

  const auto h = store.job_history(id);
  REQUIRE(h.size() == 6);  // submitted, started, resize, ack, resize, timeout
  CHECK(h[2].old_state == job_state::running);
  CHECK(h[2].new_state == job_state::resizing);
  CHECK(h[2].old_procs == k_map);
  CHECK(h[2].new_procs == grow);
  CHECK(h[2].reason == "equipartition: arrival");
  CHECK(h[3].old_procs == k_map);
  CHECK(h[3].new_procs == grow);
  CHECK(h[3].reason == "ack");
  CHECK(h[4].new_procs == k_map);
  CHECK(h[5].new_procs == grow);
  CHECK(h[5].reason == "resize timed out");
}

TEST_CASE_FIXTURE(fresh_store, "start and end times, exit status, and a requeue after NODE_FAIL") {
  const auto id = job_in(store, job_state::running);
  auto rec = store.get_job(id);
  REQUIRE(rec->status.start_time);
  const auto started = *rec->status.start_time;
  CHECK(started >= rec->status.submit_time);

  store.transition({.job_id = id, .to = job_state::suspended});
  store.transition({.job_id = id, .to = job_state::running});
  rec = store.get_job(id);
  CHECK(rec->status.start_time == started);  // resuming is not starting
  CHECK(rec->status.procs == k_map);         // a suspended job kept its processors

  store.transition({.job_id = id, .to = job_state::node_fail, .reason = "node3 down", .term_signal = 9});
  rec = store.get_job(id);
  CHECK(rec->status.end_time);
  CHECK(rec->status.term_signal == 9);
  CHECK(rec->status.procs.none());

  store.transition({.job_id = id, .to = job_state::pending, .reason = "requeue"});
  rec = store.get_job(id);
  CHECK(rec->status.state == job_state::pending);
  CHECK_FALSE(rec->status.start_time);
  CHECK_FALSE(rec->status.end_time);
  CHECK_FALSE(rec->status.term_signal);

  store.transition({.job_id = id, .to = job_state::running, .procs = k_other_map});
  store.transition({.job_id = id, .to = job_state::completed, .exit_code = 0});
  rec = store.get_job(id);
  CHECK(rec->status.exit_code == 0);
  REQUIRE(rec->status.end_time);
  CHECK(*rec->status.end_time >= *rec->status.start_time);
  const auto h = store.job_history(id);
  REQUIRE(h.size() == 8);  // submitted, started, suspended, resumed, node_fail, requeued, started, completed
  CHECK(h.back().exit_code == 0);
  CHECK(h[4].old_procs == k_map);  // NODE_FAIL event records what was lost
}

TEST_CASE_FIXTURE(fresh_store, "transitions with the wrong maps, exit status, expectations or job are refused and write nothing") {
  const auto pending = job_in(store, job_state::pending);
  const auto running = job_in(store, job_state::running);
  CHECK_THROWS_WITH_AS(store.transition({.job_id = pending, .to = job_state::running}),
                       doctest::Contains("non-empty processor map"), invalid_job);
  CHECK_THROWS_WITH_AS(store.transition({.job_id = running, .to = job_state::resizing}),
                       doctest::Contains("needs the new map"), invalid_job);
  CHECK_THROWS_WITH_AS(store.transition({.job_id = running, .to = job_state::cancelled, .procs = k_map}),
                       doctest::Contains("no map allowed"), invalid_job);
  CHECK_THROWS_WITH_AS(store.transition({.job_id = running, .to = job_state::suspended, .exit_code = 1}),
                       doctest::Contains("not a final state"), invalid_job);
  CHECK_THROWS_WITH_AS(
      store.transition({.job_id = running, .from = job_state::pending, .to = job_state::cancelled}),
      doctest::Contains("is RUNNING, not PENDING"), unexpected_state);
  CHECK_THROWS_AS(store.transition({.job_id = 999'999, .to = job_state::cancelled}), not_found);
  CHECK(store.get_job(pending)->status.state == job_state::pending);
  CHECK(store.get_job(running)->status.state == job_state::running);
  CHECK(store.job_history(pending).size() == 1);
  CHECK(store.job_history(running).size() == 2);
}

TEST_CASE_FIXTURE(fresh_store, "the job history is append-only") {
  job_in(store, job_state::running);
  pqxx::connection c(db.conninfo());
  pqxx::work tx(c);
  CHECK_THROWS_WITH(tx.exec0("UPDATE job_events SET reason = 'rewritten'"), doctest::Contains("append-only"));
}

TEST_CASE_FIXTURE(faulty_store, "a transition whose COMMIT was cut off is checked by the job's state and run again: one event") {
  const auto id = job_in(store, job_state::pending);
  faults.cut_next = true;
  store.transition({.job_id = id, .to = job_state::running, .procs = k_map, .reason = "start"});
  CHECK_FALSE(faults.cut_next);
  CHECK(store.stats().in_doubt == 1);
  CHECK(store.get_job(id)->status.state == job_state::running);
  const auto h = store.job_history(id);
  REQUIRE(h.size() == 2);
  CHECK(h[1].reason == "start");
}

TEST_CASE_FIXTURE(faulty_store, "a transition that committed but whose answer was lost is found, not applied twice") {
  const auto id = job_in(store, job_state::running);
  faults.lose_next = true;
  const history_event e = store.transition({.job_id = id, .to = job_state::completed, .reason = "done", .exit_code = 0});
  CHECK(store.stats().in_doubt == 1);
  CHECK(e.new_state == job_state::completed);
  CHECK(e.reason == "done");
  const auto h = store.job_history(id);
  REQUIRE(h.size() == 3);
  CHECK(h[2].id == e.id);
  CHECK(store.get_job(id)->status.exit_code == 0);
}

TEST_CASE_FIXTURE(fresh_store, "a batch of transitions is written whole, or not at all when one of them is illegal") {
  const auto a = job_in(store, job_state::running);
  const auto b = job_in(store, job_state::running);
  const auto c = job_in(store, job_state::pending);
  const auto shrink = processor_set::from_string("00110000");
  const auto grow = processor_set::from_string("00111111");

  auto events = store.transition_all({{.job_id = a, .to = job_state::resizing, .procs = shrink, .reason = "d1"},
                                      {.job_id = b, .to = job_state::resizing, .procs = grow, .reason = "d1"},
                                      {.job_id = c, .to = job_state::running, .procs = k_other_map, .reason = "d1"}});
  REQUIRE(events.size() == 3);
  CHECK(events[0].job_id == a);
  CHECK(events[1].new_procs == grow);
  CHECK(events[2].new_state == job_state::running);
  CHECK(store.get_job(a)->status.state == job_state::resizing);
  CHECK(store.get_job(c)->status.state == job_state::running);

  // b cannot be suspended while it resizes: a's acknowledgement is not written either.
  const std::string image_a = row_image(db.conninfo(), a);
  CHECK_THROWS_AS(store.transition_all({{.job_id = a, .to = job_state::running, .reason = "ack"},
                                        {.job_id = b, .to = job_state::suspended, .reason = "bad"}}),
                  illegal_transition);
  CHECK(row_image(db.conninfo(), a) == image_a);
  CHECK(store.get_job(a)->status.state == job_state::resizing);
  CHECK_THROWS_WITH_AS(store.transition_all({{.job_id = a, .to = job_state::running},
                                             {.job_id = a, .to = job_state::completed}}),
                       doctest::Contains("appears twice"), invalid_job);
  CHECK(store.transition_all({}).empty());
  CHECK(store.job_history(a).size() == 3);
}

TEST_CASE_FIXTURE(faulty_store, "a batch of transitions whose COMMIT answer was lost is found whole, not applied twice") {
  const auto a = job_in(store, job_state::running);
  const auto b = job_in(store, job_state::pending);
  faults.lose_next = true;
  const auto events = store.transition_all({{.job_id = a, .to = job_state::cancelled, .reason = "fkill"},
                                            {.job_id = b, .to = job_state::cancelled, .reason = "fkill"}});
  CHECK(store.stats().in_doubt == 1);
  REQUIRE(events.size() == 2);
  CHECK(events[0].job_id == a);
  CHECK(events[1].job_id == b);
  CHECK(store.job_history(a).size() == 3);
  CHECK(store.job_history(b).size() == 2);
}
