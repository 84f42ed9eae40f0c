// faucetsd's store against the test run's PostgreSQL: migration 002 on a
// database made by 001 (the forwards already sent are backfilled from the
// events), the forwards record, and live jobs by the core's final states.
#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "core/job_state.hpp"
#include "server/faucets_store.hpp"
#include "server/market.hpp"
#include "test_pg.hpp"

using namespace aqs::faucets;

TEST_CASE("migration 002 backfills the forwards a 001 database recorded as events") {
  auto db = aqs::test::test_database::empty();
  {
    pqxx::connection conn(db.conninfo());
    aqs::store::apply_migrations(conn, {faucets_migrations().at(0)});
    pqxx::work tx(conn);
    tx.exec("INSERT INTO faucets_jobs (owner, name, submit, min_pe, max_pe) VALUES ('alice', 'j', '{}', 1, 1)");
    tx.exec("INSERT INTO faucets_events (job_id, event, detail) VALUES "
            "(1, 'submitted', 'by alice for auto'), "
            "(1, 'dispatched', 'to one as alice by fastest-queue: most free'), "
            "(1, 'refused', 'one: no'), "
            "(1, 'dispatched', 'to two as alice by fastest-queue: next')");
    tx.commit();
  }
  faucets_store store(db.conninfo());  // applies 002
  CHECK(store.forwarded_to(1, "one", 1));
  CHECK(store.forwarded_to(1, "two", 2));
  CHECK_FALSE(store.forwarded_to(1, "one", 2));
  CHECK(store.forwarded_to(1, "two", std::nullopt));
  CHECK_FALSE(store.forwarded_to(1, "three", std::nullopt));
  // The next forward is attempt 1 (001 kept attempts on the job, not counted
  // here), recorded as it is sent.
  const auto attempt = store.dispatched(1, "three", "to three as alice");
  CHECK(store.forwarded_to(1, "three", attempt));
}

TEST_CASE("a job in any final state of the core is no longer live in the store") {
  auto db = aqs::test::test_database::empty();
  faucets_store store(db.conninfo());
  for (const auto s : aqs::core::k_all_job_states) {
    stored_job j;
    j.owner = "alice";
    j.name = std::string(aqs::core::to_string(s));
    j.submit = "{}";
    const auto id = store.add_job(j);
    store.set_state(id, j.name, j.name, "test");
  }
  for (const auto s : aqs::core::k_all_job_states) {
    const std::string name(aqs::core::to_string(s));
    CAPTURE(name);
    bool live = false, listed = false;
    for (const auto& j : store.live_jobs()) live = live || j.name == name;
    for (const auto& j : store.jobs(std::nullopt, false, std::nullopt, 100)) listed = listed || j.name == name;
    CHECK(live == !aqs::core::is_final(s));
    CHECK(listed == !aqs::core::is_final(s));
  }
}

TEST_CASE("migration 003: prices per placement, a job charged once, balances summing to exactly zero") {
  auto db = aqs::test::test_database::empty();
  faucets_store store(db.conninfo());
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    stored_job j;
    j.owner = "alice";
    j.name = "j" + std::to_string(i);
    j.submit = "{}";
    ids.push_back(store.add_job(j));
  }
  CHECK_FALSE(store.agreed_price(ids[0], "fast"));
  store.agree_price(ids[0], "fast", 2.5);
  store.agree_price(ids[0], "fast", 3.0);  // placed there again: the newer price
  store.agree_price(ids[0], "slow", 0.5);
  CHECK(store.agreed_price(ids[0], "fast") == 3.0);
  CHECK(store.agreed_price(ids[0], "slow") == 0.5);

  const owners_table owners = owners_table::parse("cluster fast lab\ncluster slow uni\ncluster mid dept\nhome * slow\n", "o");
  std::string why;
  auto e = entry_for(owners, ids[0], "alice", "fast", 10, 3.0, &why);
  REQUIRE(e);
  CHECK(store.charge(*e, "10 processor-seconds at 3"));
  CHECK_FALSE(store.charge(*e, "again"));  // once per job
  CHECK(store.charge(*entry_for(owners, ids[1], "alice", "mid", 1.0 / 3.0, 0.7, &why), "a third"));
  CHECK(store.charge(*entry_for(owners, ids[2], "alice", "fast", 7.77, 1.1, &why), "more"));
  const auto b = store.balances();
  CHECK(b.at("lab") == 30'000'000 + 8'547'000);
  CHECK(b.at("dept") == 233'333);
  std::int64_t total = 0;
  for (const auto& [who, v] : b) total += v;
  CHECK(total == 0);
  const auto all = store.entries(std::nullopt, 100);
  REQUIRE(all.size() == 3);
  CHECK(all.front().job_id == ids[2]);  // newest first
  CHECK(all.back().amount_micro == 30'000'000);
  CHECK(store.entries(std::string("dept"), 100).size() == 1);
  CHECK(store.entries(std::nullopt, 1).size() == 1);
  bool charged = false;
  for (const auto& h : store.history(ids[0])) charged = charged || (h.event == "charged" && h.detail == "10 processor-seconds at 3");
  CHECK(charged);
  // The table itself refuses what the rules never write.
  pqxx::connection conn(db.conninfo());
  pqxx::work tx(conn);
  CHECK_THROWS_AS(tx.exec("INSERT INTO faucets_ledger (job_id, owner, payer, payee, home_cluster, cluster, proc_seconds, "
                          "price, amount_micro) VALUES (1, 'a', 'x', 'x', 'h', 'c', 1, 1, 1)"),
                  pqxx::check_violation);
}

TEST_CASE("migration 004: staged inputs kept byte for byte, replaced by the outputs, waiting ones listed once ended") {
  auto db = aqs::test::test_database::empty();
  faucets_store store(db.conninfo());
  stored_job j;
  j.owner = "alice";
  j.name = "staged";
  j.submit = "{}";
  const auto id = store.add_job(j);
  const auto other = store.add_job(j);
  CHECK_FALSE(store.stage_result_of(id));
  const std::string bytes("\0\x01\xfe\xff\n'\\", 7);
  store.stage_inputs(id, {{"in/data.bin", 0640, bytes}, {"b", 0600, ""}});
  const auto in = store.staged(id, "in");
  REQUIRE(in.size() == 2);
  CHECK(in[1].path == "in/data.bin");
  CHECK(in[1].data == bytes);
  CHECK(in[1].mode == 0640);
  CHECK(store.stage_result_of(id)->outputs == "waiting");
  CHECK(store.stage_result_of(id)->in_bytes == 7);
  CHECK(store.outputs_waiting().empty());  // it has not ended
  store.set_state(id, "COMPLETED", "completed", "");
  CHECK(store.outputs_waiting() == std::vector<std::int64_t>{id});
  store.outputs_back(id, {{"out.txt", 0644, bytes + bytes}});
  CHECK(store.staged(id, "in").empty());
  REQUIRE(store.staged(id, "out").size() == 1);
  CHECK(store.staged(id, "out")[0].data == bytes + bytes);
  CHECK(store.stage_result_of(id)->outputs == "back");
  CHECK(store.stage_result_of(id)->out_bytes == 14);
  CHECK(store.outputs_waiting().empty());
  // A path out of the job's directory cannot be stored even by mistake.
  CHECK_THROWS(store.stage_inputs(other, {{"/etc/passwd", 0644, "x"}}));
  CHECK_FALSE(store.stage_result_of(other));
}
