// Integration tests of job_store: submission, idempotency, group commit,
// nodes, listings, recovery and the schema check, against real PostgreSQL.
#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <set>
#include <thread>

#include <pqxx/pqxx>

#include "store/pg_job_store.hpp"
#include "store/migrations.hpp"
#include "store_test_util.hpp"
#include "test_pg.hpp"

using namespace aqs::store;
using aqs::core::job_state;
using aqs::core::processor_set;
using namespace aqs::test;  // the store tests' helpers (store_test_util.hpp) and databases

namespace {

long long count(const std::string& conninfo, const std::string& sql) {
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  return tx.exec1(sql)[0].as<long long>();
}

void start(job_store& store, std::int64_t id, const char* map) {
  store.transition({.job_id = id, .to = job_state::running, .procs = processor_set::from_string(map)});
}

}  // namespace

TEST_CASE_FIXTURE(fresh_store, "a submitted job reads back exactly, PENDING, with its submission event") {
  job_submission q = simple_request();
  q.argv = {"a", "b"};
  q.environment = {"PATH=/bin", "HOME=/home/alice"};
  q.adaptive = true;
  q.min_pe = 2;
  q.max_pe = 8;
  q.walltime_s = 3600;
  q.priority = -5;
  q.requeue = true;
  q.dependencies = {1, 2};
  q.submit_token = "tok-1";
  q.umask = 077;
  const auto id = store.submit(q);
  CHECK(id > 0);

  auto rec = store.get_job(id);
  REQUIRE(rec);
  CHECK(rec->id == id);
  CHECK(rec->request == q);
  CHECK(rec->status.state == job_state::pending);
  CHECK_FALSE(rec->status.start_time);
  CHECK_FALSE(rec->status.end_time);
  CHECK(rec->status.procs.none());
  const auto age = std::chrono::system_clock::now() - rec->status.submit_time;
  CHECK(age < std::chrono::minutes(5));
  CHECK(age > -std::chrono::minutes(5));

  auto history = store.job_history(id);
  REQUIRE(history.size() == 1);
  CHECK_FALSE(history[0].old_state);
  CHECK(history[0].new_state == job_state::pending);
  CHECK(history[0].reason == "submitted");
  CHECK_FALSE(store.get_job(id + 1000));
  CHECK(store.job_history(id + 1000).empty());
}

TEST_CASE_FIXTURE(fresh_store, "submitting the same token twice gives the same job id and one job with one event") {
  job_submission q = simple_request();
  q.submit_token = "client-retry-7";
  const auto a = store.submit(q);
  const auto b = store.submit(q);
  CHECK(a == b);
  // Twice in the same batch, too.
  q.submit_token = "same-batch";
  auto f1 = store.submit_async(q);
  auto f2 = store.submit_async(q);
  CHECK(f1.get() == f2.get());
  CHECK(count(db.conninfo(), "SELECT count(*) FROM jobs") == 2);
  CHECK(count(db.conninfo(), "SELECT count(*) FROM job_events") == 2);
}

TEST_CASE_FIXTURE(fresh_store, "a request the database could never hold is refused before it is queued") {
  auto bad = [&](auto change, const char* msg) {
    CHECK_THROWS_WITH_AS(store.submit(changed_request(change)), doctest::Contains(msg), invalid_job);
  };
  bad([](job_submission& q) { q.min_pe = 0; }, "min_pe must be at least 1");
  bad([](job_submission& q) { q.max_pe = 1; }, "less than min_pe");
  bad([](job_submission& q) { q.max_pe = 4; }, "rigid");
  bad([](job_submission& q) { q.user_name.clear(); }, "user_name is empty");
  bad([](job_submission& q) { q.walltime_s = 0; }, "walltime");
  bad([](job_submission& q) { q.uid = -1; }, "uid");
  bad([](job_submission& q) { q.dependencies = {0}; }, "dependency");
  CHECK(count(db.conninfo(), "SELECT count(*) FROM jobs") == 0);
}

TEST_CASE_FIXTURE(fresh_store, "concurrent submissions are group-committed: fewer transactions than jobs, every id distinct") {
  constexpr int n = 500;
  std::vector<std::future<std::int64_t>> futures;
  for (int i = 0; i < n; ++i) futures.push_back(store.submit_async(simple_request("u" + std::to_string(i % 7))));
  std::set<std::int64_t> ids;
  for (auto& f : futures) ids.insert(f.get());
  CHECK(ids.size() == n);
  CHECK(store.stats().submissions == n);
  CHECK(store.stats().batches < n);
  CHECK(count(db.conninfo(), "SELECT count(*) FROM jobs") == n);
  CHECK(count(db.conninfo(), "SELECT count(*) FROM job_events WHERE new_state = 'PENDING'") == n);

  // And from many threads at once.
  std::vector<std::thread> threads;
  std::atomic<int> done{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        store.submit(simple_request());
        ++done;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(done == 400);
  CHECK(count(db.conninfo(), "SELECT count(*) FROM jobs") == n + 400);
}

TEST_CASE("a job the database refuses fails alone; the rest of its batch is committed") {
  test_database db;
  {
    pqxx::connection c(db.conninfo());
    pqxx::work tx(c);
    tx.exec0("ALTER TABLE jobs ADD CONSTRAINT test_no_evil CHECK (name <> 'evil')");
    tx.commit();
  }
  pg_job_store store(options_for(db.conninfo()));
  std::vector<std::future<std::int64_t>> futures;
  for (int i = 0; i < 30; ++i) {
    job_submission q = simple_request();
    q.name = i == 13 ? "evil" : "good";
    futures.push_back(store.submit_async(q));
  }
  for (int i = 0; i < 30; ++i) {
    if (i == 13) {
      CHECK_THROWS_WITH_AS(futures[i].get(), doctest::Contains("test_no_evil"), store_error);
    } else {
      CHECK(futures[i].get() > 0);
    }
  }
  CHECK(count(db.conninfo(), "SELECT count(*) FROM jobs") == 29);
  CHECK(count(db.conninfo(), "SELECT count(*) FROM job_events") == 29);
}

TEST_CASE_FIXTURE(fresh_store, "nodes are numbered in registration order and keep their numbers when they register again") {
  auto a = store.register_node({.name = "node1", .address = "10.0.0.1", .nprocs = 4, .cpus = "0-3", .memory_mb = 1024});
  auto b = store.register_node({.name = "node2", .nprocs = 8, .gpus = 2});
  auto c = store.register_node({.name = "node3", .nprocs = 2});
  CHECK(a.first_proc == 0);
  CHECK(b.first_proc == 4);
  CHECK(c.first_proc == 12);
  CHECK(a.address == "10.0.0.1");
  CHECK(a.cpus == "0-3");
  CHECK(a.memory_mb == 1024);
  CHECK(b.gpus == 2);
  CHECK(a.state == node_state::up);
  CHECK(a.last_heartbeat);

  store.set_node_state("node2", node_state::down);
  auto again = store.register_node({.name = "node2", .address = "10.0.0.2", .nprocs = 8});
  CHECK(again.id == b.id);
  CHECK(again.first_proc == 4);
  CHECK(again.state == node_state::up);
  CHECK(again.address == "10.0.0.2");
  CHECK_THROWS_WITH_AS(store.register_node({.name = "node2", .nprocs = 16}), doctest::Contains("renumbering"),
                       invalid_job);
  CHECK_THROWS_AS(store.register_node({.name = "", .nprocs = 1}), invalid_job);
  CHECK_THROWS_AS(store.register_node({.name = "x", .nprocs = 0}), invalid_job);

  store.heartbeat("node3");
  CHECK_THROWS_AS(store.heartbeat("nope"), not_found);
  CHECK_THROWS_AS(store.set_node_state("nope", node_state::drained), not_found);
  store.set_node_state("node3", node_state::drained);

  auto nodes = store.list_nodes();
  REQUIRE(nodes.size() == 3);
  CHECK(nodes[0].name == "node1");
  CHECK(nodes[1].name == "node2");
  CHECK(nodes[2].name == "node3");
  CHECK(nodes[2].state == node_state::drained);
}

TEST_CASE_FIXTURE(fresh_store, "fjobs listings filter by user and state and hide finished jobs unless asked") {
  std::vector<std::int64_t> alice, bob;
  for (int i = 0; i < 5; ++i) alice.push_back(store.submit(simple_request("alice")));
  for (int i = 0; i < 3; ++i) bob.push_back(store.submit(simple_request("bob")));
  start(store, alice[0], "0011");
  start(store, alice[1], "1100");
  store.transition({.job_id = alice[1], .to = job_state::completed, .exit_code = 0});
  store.transition({.job_id = bob[0], .to = job_state::cancelled, .reason = "fkill"});

  auto ids = [](const std::vector<job_summary>& jobs) {
    std::vector<std::int64_t> out;
    for (const auto& j : jobs) out.push_back(j.id);
    return out;
  };
  CHECK(store.list_jobs().size() == 6);
  CHECK(store.list_jobs({.include_finished = true}).size() == 8);
  CHECK(ids(store.list_jobs({.user_name = "alice"})) ==
        std::vector<std::int64_t>{alice[0], alice[2], alice[3], alice[4]});
  CHECK(store.list_jobs({.user_name = "alice", .include_finished = true}).size() == 5);
  CHECK(ids(store.list_jobs({.states = {job_state::running}})) == std::vector<std::int64_t>{alice[0]});
  // States asked for by name are listed even when finished.
  CHECK(ids(store.list_jobs({.states = {job_state::completed, job_state::cancelled}})) ==
        std::vector<std::int64_t>{alice[1], bob[0]});
  CHECK(ids(store.list_jobs({.user_name = "bob", .states = {job_state::pending}})) ==
        std::vector<std::int64_t>{bob[1], bob[2]});
  CHECK(ids(store.list_jobs({.limit = 2})) == std::vector<std::int64_t>{alice[0], alice[2]});
  CHECK(store.list_jobs({.user_name = "nobody"}).empty());
  CHECK(store.list_jobs({.user_name = "alice'; DROP TABLE jobs; --"}).empty());

  auto running = store.list_jobs({.states = {job_state::running}});
  REQUIRE(running.size() == 1);
  CHECK(running[0].status.procs == processor_set::from_string("0011"));
  CHECK(running[0].status.start_time);
  auto done = store.list_jobs({.states = {job_state::completed}});
  REQUIRE(done.size() == 1);
  CHECK(done[0].status.exit_code == 0);
  CHECK(done[0].status.end_time);
}

TEST_CASE_FIXTURE(fresh_store, "recovery loads every live job with its maps and every node, and nothing finished") {
  store.register_node({.name = "n1", .nprocs = 4});
  store.register_node({.name = "n2", .nprocs = 4});
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 6; ++i) {
    job_submission q = simple_request("carol", 2);
    q.adaptive = true;
    q.max_pe = 4;
    q.dependencies = {static_cast<std::int64_t>(i + 100)};
    ids.push_back(store.submit(q));
  }
  start(store, ids[0], "11000000");
  start(store, ids[1], "00110000");
  store.transition({.job_id = ids[1], .to = job_state::resizing, .procs = processor_set::from_string("00111100")});
  start(store, ids[2], "00000011");
  store.transition({.job_id = ids[2], .to = job_state::suspended});
  start(store, ids[3], "00000011");
  store.transition({.job_id = ids[3], .to = job_state::failed, .exit_code = 3});
  store.transition({.job_id = ids[4], .to = job_state::cancelled});

  const live_state st = store.load_live_state();
  REQUIRE(st.nodes.size() == 2);
  CHECK(st.nodes[1].first_proc == 4);
  REQUIRE(st.jobs.size() == 4);
  CHECK(st.jobs[0].id == ids[0]);
  CHECK(st.jobs[0].status.state == job_state::running);
  CHECK(st.jobs[0].status.procs == processor_set::from_string("11000000"));
  CHECK(st.jobs[1].status.state == job_state::resizing);
  CHECK(st.jobs[1].status.procs == processor_set::from_string("00110000"));
  REQUIRE(st.jobs[1].status.resize_procs);
  CHECK(*st.jobs[1].status.resize_procs == processor_set::from_string("00111100"));
  CHECK(st.jobs[2].status.state == job_state::suspended);
  CHECK(st.jobs[2].status.procs == processor_set::from_string("00000011"));
  CHECK(st.jobs[3].id == ids[5]);
  CHECK(st.jobs[3].status.state == job_state::pending);
  CHECK(st.jobs[3].adaptive);
  CHECK(st.jobs[3].max_pe == 4);
  CHECK(st.jobs[3].user_name == "carol");
  CHECK(st.jobs[3].dependencies == std::vector<std::int64_t>{105});
}

TEST_CASE_FIXTURE(fresh_store, "recovery streams more jobs than one fetch holds") {
  std::vector<std::future<std::int64_t>> futures;
  for (int i = 0; i < 25'000; ++i) futures.push_back(store.submit_async(simple_request()));
  std::int64_t last = 0;
  for (auto& f : futures) last = std::max(last, f.get());
  const live_state st = store.load_live_state();
  REQUIRE(st.jobs.size() == 25'000);
  CHECK(st.jobs.back().id == last);
  for (std::size_t i = 1; i < st.jobs.size(); ++i) REQUIRE(st.jobs[i - 1].id < st.jobs[i].id);
}

TEST_CASE("a store refuses a database at another schema version, naming both versions") {
  {
    test_database db = test_database::empty();
    CHECK_THROWS_WITH_AS(pg_job_store(options_for(db.conninfo())), doctest::Contains("older than"), schema_mismatch);
  }
  test_database db;
  {
    pqxx::connection c(db.conninfo());
    pqxx::work tx(c);
    tx.exec0("INSERT INTO schema_version (version, name) VALUES (999, 'future')");
    tx.commit();
  }
  CHECK_THROWS_WITH_AS(pg_job_store(options_for(db.conninfo())), doctest::Contains("999"), schema_mismatch);
}

TEST_CASE("a database that cannot be reached is store_unavailable after the reconnect budget") {
  pg_job_store_options o = options_for(aqs::test::test_pg_conninfo("no_such_database_here"));
  o.reconnect_timeout = std::chrono::milliseconds(300);
  // A missing database is a FATAL at connect, which libpq reports as a broken
  // connection: retried, then given up.
  CHECK_THROWS_AS(pg_job_store{o}, store_unavailable);
}

TEST_CASE_FIXTURE(faulty_store, "a COMMIT cut off by a lost connection is checked by token and retried once: one job, acknowledged") {
  job_submission q = simple_request();
  q.submit_token = "cut-off";
  faults.cut_next = true;
  const auto id = store.submit(q);
  CHECK(faults.commits >= 2);  // the batch ran again after the check
  CHECK(store.stats().in_doubt + store.stats().reconnects >= 1);
  CHECK(count(db.conninfo(), "SELECT count(*) FROM jobs WHERE submit_token = 'cut-off'") == 1);
  CHECK(count(db.conninfo(), "SELECT id FROM jobs WHERE submit_token = 'cut-off'") == id);
  CHECK(count(db.conninfo(), "SELECT count(*) FROM job_events") == 1);
}

TEST_CASE_FIXTURE(faulty_store, "a COMMIT that landed but whose answer was lost is found by token, not inserted again") {
  faults.lose_next = true;
  std::vector<std::future<std::int64_t>> futures;
  for (int i = 0; i < 20; ++i) futures.push_back(store.submit_async(simple_request()));
  std::set<std::int64_t> ids;
  for (auto& f : futures) ids.insert(f.get());
  CHECK(ids.size() == 20);
  CHECK(store.stats().in_doubt == 1);
  CHECK(count(db.conninfo(), "SELECT count(*) FROM jobs") == 20);
  CHECK(count(db.conninfo(), "SELECT count(*) FROM job_events") == 20);
}
