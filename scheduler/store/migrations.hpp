// migrations: the numbered sql/NNN_name.sql files, applied in order.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <pqxx/connection>

namespace aqs::store {

struct migration {
  int version;       // NNN of the file name
  std::string name;  // file name without .sql
  std::string sql;
};

// The database holds a schema this build cannot use: newer than it knows, or
// older and not migrated. The message says both versions and what to do.
class schema_mismatch : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// sql/*.sql as compiled into this build, in version order (generated).
const std::vector<migration>& embedded_migrations();
// The schema version this build expects: the last embedded migration.
int latest_schema_version();

// Version recorded in the database, 0 for a database that never saw AQS.
int schema_version(pqxx::connection& conn);

// Applies every migration newer than the database's version, each in its own
// transaction together with its schema_version row, under an advisory lock so
// that concurrent callers apply each migration once. Returns the version
// reached. Throws schema_mismatch if the database is newer than this build;
// pqxx exceptions on SQL errors (the failed migration is rolled back).
int apply_migrations(pqxx::connection& conn,
                     const std::vector<migration>& migrations = embedded_migrations());

// Throws schema_mismatch unless the database is exactly at `expected`.
void check_schema_version(pqxx::connection& conn, int expected = latest_schema_version());

}  // namespace aqs::store
