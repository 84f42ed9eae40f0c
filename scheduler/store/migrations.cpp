// migrations: version bookkeeping and ordered application of sql/ files.
#include "store/migrations.hpp"

#include <pqxx/nontransaction>
#include <pqxx/transaction>

namespace aqs::store {

namespace {

// Arbitrary constant naming "AQS schema migration" among advisory locks.
constexpr long long k_migration_lock = 0x415153'5343484dLL;

constexpr const char* k_create_version_table =
    "CREATE TABLE IF NOT EXISTS schema_version ("
    "  version integer PRIMARY KEY CHECK (version > 0),"
    "  name text NOT NULL,"
    "  applied_at timestamptz NOT NULL DEFAULT now())";

int read_version(pqxx::transaction_base& tx) {
  auto exists = tx.exec1("SELECT to_regclass('schema_version') IS NOT NULL");
  if (!exists[0].as<bool>()) return 0;
  return tx.exec1("SELECT coalesce(max(version), 0) FROM schema_version")[0].as<int>();
}

}  // namespace

int latest_schema_version() {
  const auto& all = embedded_migrations();
  return all.empty() ? 0 : all.back().version;
}

int schema_version(pqxx::connection& conn) {
  pqxx::read_transaction tx(conn);
  return read_version(tx);
}

int apply_migrations(pqxx::connection& conn, const std::vector<migration>& migrations) {
  const int latest = migrations.empty() ? 0 : migrations.back().version;
  int version = 0;
  {
    pqxx::work tx(conn);
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", k_migration_lock);
    tx.exec0(k_create_version_table);
    version = read_version(tx);
    tx.commit();
  }
  if (version > latest) {
    throw schema_mismatch("database schema version " + std::to_string(version) +
                          " is newer than this build's " + std::to_string(latest) +
                          ": upgrade AQS or use another database");
  }
  for (const migration& m : migrations) {
    pqxx::work tx(conn);
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", k_migration_lock);
    if (read_version(tx) >= m.version) continue;  // someone else applied it meanwhile
    tx.exec0(m.sql);
    tx.exec_params("INSERT INTO schema_version (version, name) VALUES ($1, $2)", m.version, m.name);
    tx.commit();
    version = m.version;
  }
  return version;
}

void check_schema_version(pqxx::connection& conn, int expected) {
  const int found = schema_version(conn);
  if (found == expected) return;
  if (found > expected) {
    throw schema_mismatch("database schema version " + std::to_string(found) +
                          " is newer than this build's " + std::to_string(expected) +
                          ": upgrade AQS or use another database");
  }
  throw schema_mismatch("database schema version " + std::to_string(found) + " is older than " +
                        std::to_string(expected) + ": run the migrations (aqsd applies them at start)");
}

}  // namespace aqs::store
