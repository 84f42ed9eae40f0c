// faucetsd's store against the test run's PostgreSQL: migration 002 on a
// database made by 001 (the forwards already sent are backfilled from the
// events), the forwards record, and live jobs by the core's final states.
#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "core/job_state.hpp"
#include "server/faucets_store.hpp"
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
