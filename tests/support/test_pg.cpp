// test_pg: per-test databases on the test run's private PostgreSQL.
#include "test_pg.hpp"

#include <atomic>
#include <cstdlib>
#include <random>
#include <unistd.h>

#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/transaction>

#include "store/pg_server.hpp"

namespace aqs::test {

std::filesystem::path test_pg_dir() {
  if (const char* env = std::getenv("AQS_TEST_PGDIR"); env != nullptr && *env != '\0') return env;
  return AQS_TEST_PGDIR_DEFAULT;
}

std::string test_pg_conninfo(const std::string& dbname) {
  return "host=" + store::conninfo_quote(test_pg_dir().string()) +
         " user=postgres dbname=" + store::conninfo_quote(dbname);
}

test_database::test_database() : test_database(k_template_db) {}

test_database test_database::empty() { return test_database("template0"); }

test_database::test_database(const char* template_name) {
  static std::atomic<int> counter{0};
  std::random_device rd;
  name_ = "aqs_t_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
          std::to_string(rd() % 100000);
  pqxx::connection conn(test_pg_conninfo("postgres"));
  pqxx::nontransaction tx(conn);
  tx.exec0("CREATE DATABASE " + tx.quote_name(name_) + " TEMPLATE " + tx.quote_name(template_name));
  // A copy of the template is a database made now: a cluster of its own,
  // with an id of its own (sql/007_cluster_identity), as a new one would be.
  pqxx::connection db(test_pg_conninfo(name_));
  pqxx::work w(db);
  if (w.exec1("SELECT to_regclass('cluster_identity') IS NOT NULL")[0].as<bool>()) {
    w.exec0("ALTER TABLE cluster_identity DISABLE TRIGGER cluster_identity_fixed");
    w.exec0("UPDATE cluster_identity SET cluster_id = replace(gen_random_uuid()::text, '-', '')");
    w.exec0("ALTER TABLE cluster_identity ENABLE TRIGGER cluster_identity_fixed");
  }
  w.commit();
}

test_database::test_database(test_database&& other) noexcept : name_(std::move(other.name_)) {
  other.name_.clear();
}

test_database::~test_database() {
  if (name_.empty()) return;
  try {
    pqxx::connection conn(test_pg_conninfo("postgres"));
    pqxx::nontransaction tx(conn);
    tx.exec0("DROP DATABASE IF EXISTS " + tx.quote_name(name_) + " WITH (FORCE)");
  } catch (...) {
    // The whole server is thrown away at the end of the run anyway.
  }
}

}  // namespace aqs::test
