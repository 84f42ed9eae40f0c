// Integration tests of the sql/ migrations against the real test PostgreSQL.
#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "store/migrations.hpp"
#include "test_pg.hpp"

using namespace aqs;

TEST_CASE("a database cloned from the template is at the latest schema version") {
  test::test_database db;
  pqxx::connection conn(db.conninfo());
  CHECK(store::schema_version(conn) == store::latest_schema_version());
  CHECK_NOTHROW(store::check_schema_version(conn));
}

TEST_CASE("migrating an empty database creates the schema, records the version, and is idempotent") {
  auto db = test::test_database::empty();
  pqxx::connection conn(db.conninfo());
  CHECK(store::schema_version(conn) == 0);
  CHECK_THROWS_AS(store::check_schema_version(conn), store::schema_mismatch);

  CHECK(store::apply_migrations(conn) == store::latest_schema_version());
  CHECK(store::apply_migrations(conn) == store::latest_schema_version());
  pqxx::read_transaction tx(conn);
  for (const char* table : {"jobs", "job_events", "nodes", "schema_version", "accounts", "account_users",
                            "account_default", "qos", "usage_records", "accounting_audit"}) {
    CAPTURE(table);
    CHECK(tx.exec_params1("SELECT to_regclass($1) IS NOT NULL", table)[0].as<bool>());
  }
  CHECK(tx.exec1("SELECT count(*) FROM schema_version")[0].as<int>() ==
        static_cast<int>(store::embedded_migrations().size()));
}

TEST_CASE("a database newer than this build is refused with both versions in the message") {
  test::test_database db;
  pqxx::connection conn(db.conninfo());
  {
    pqxx::work tx(conn);
    tx.exec0("INSERT INTO schema_version (version, name) VALUES (999, '999_future')");
    tx.commit();
  }
  CHECK_THROWS_WITH_AS(store::apply_migrations(conn),
                       doctest::Contains("schema version 999 is newer than this build's"),
                       store::schema_mismatch);
  CHECK_THROWS_AS(store::check_schema_version(conn), store::schema_mismatch);
}

TEST_CASE("a failing migration is rolled back whole and leaves the version unchanged") {
  auto db = test::test_database::empty();
  pqxx::connection conn(db.conninfo());
  std::vector<store::migration> bad = {
      {1, "001_ok", "CREATE TABLE a (x int)"},
      {2, "002_broken", "CREATE TABLE b (y int); SELECT no_such_function()"},
  };
  CHECK_THROWS_AS(store::apply_migrations(conn, bad), pqxx::sql_error);
  CHECK(store::schema_version(conn) == 1);
  pqxx::read_transaction tx(conn);
  CHECK(tx.exec1("SELECT to_regclass('b') IS NULL")[0].as<bool>());
}

TEST_CASE("the schema's constraints reject invalid jobs") {
  test::test_database db;
  pqxx::connection conn(db.conninfo());
  auto insert = [&](int min_pe, int max_pe, bool adaptive, const char* state, const char* procs) {
    pqxx::work tx(conn);
    // Started if it holds processors, ended if final: what the store writes.
    tx.exec_params("INSERT INTO jobs (user_name, uid, workdir, min_pe, max_pe, adaptive, state, procs, "
                   "start_time, end_time) VALUES ('u', 1000, '/tmp', $1, $2, $3, $4, $5, "
                   "CASE WHEN $4 IN ('RUNNING', 'RESIZING', 'SUSPENDED') THEN now() END, "
                   "CASE WHEN $4 IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL') THEN now() END)",
                   min_pe, max_pe, adaptive, state, procs);
    tx.commit();
  };
  CHECK_NOTHROW(insert(2, 4, true, "PENDING", ""));
  CHECK_NOTHROW(insert(3, 3, false, "RUNNING", "00011100"));
  CHECK_THROWS_AS(insert(0, 4, true, "PENDING", ""), pqxx::check_violation);
  CHECK_THROWS_AS(insert(4, 2, true, "PENDING", ""), pqxx::check_violation);
  CHECK_THROWS_AS(insert(2, 4, false, "PENDING", ""), pqxx::check_violation);
  CHECK_THROWS_AS(insert(1, 1, false, "LOST", ""), pqxx::check_violation);
  CHECK_THROWS_AS(insert(1, 1, false, "RUNNING", "0012"), pqxx::check_violation);
  CHECK_THROWS_AS(insert(1, 1, false, "PENDING", "0010"), pqxx::check_violation);    // map without processors held
  CHECK_THROWS_AS(insert(1, 1, false, "COMPLETED", "0010"), pqxx::check_violation);  // a finished job holds nothing
  CHECK_NOTHROW(insert(1, 1, false, "COMPLETED", ""));
  auto raw = [&](const char* sql) {
    pqxx::work tx(conn);
    tx.exec0(sql);
    tx.commit();
  };
  // Times ordered and tied to the state; resize map only while resizing.
  CHECK_THROWS_AS(raw("INSERT INTO jobs (user_name, uid, workdir, min_pe, max_pe, state, procs) "
                      "VALUES ('u', 1, '/', 1, 1, 'RUNNING', '1')"), pqxx::check_violation);
  CHECK_THROWS_AS(raw("INSERT INTO jobs (user_name, uid, workdir, min_pe, max_pe, state) "
                      "VALUES ('u', 1, '/', 1, 1, 'FAILED')"), pqxx::check_violation);
  CHECK_THROWS_AS(raw("INSERT INTO jobs (user_name, uid, workdir, min_pe, max_pe, state, end_time) "
                      "VALUES ('u', 1, '/', 1, 1, 'PENDING', now())"), pqxx::check_violation);
  CHECK_THROWS_AS(raw("INSERT INTO jobs (user_name, uid, workdir, min_pe, max_pe, state, procs, start_time, "
                      "resize_procs) VALUES ('u', 1, '/', 1, 1, 'RUNNING', '1', now(), '11')"),
                  pqxx::check_violation);
  CHECK_THROWS_AS(raw("INSERT INTO jobs (user_name, uid, workdir, min_pe, max_pe, submit_time, start_time, "
                      "state, procs) VALUES ('u', 1, '/', 1, 1, now(), now() - interval '1 s', 'RUNNING', '1')"),
                  pqxx::check_violation);
  pqxx::read_transaction tx(conn);
  CHECK(tx.exec1("SELECT count(*) FROM jobs")[0].as<int>() == 3);
}
