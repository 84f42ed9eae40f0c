// pg_statements: the named SQL statements of the PostgreSQL job store. A new
// query is a line in pg_statements.cpp; its rows are read with pg_rows.
#pragma once

#include <string>
#include <vector>

#include <pqxx/pqxx>

namespace aqs::store {

struct pg_statement {
  std::string name;
  std::string sql;
};

// Every statement the store runs with exec_prepared, by name.
const std::vector<pg_statement>& pg_statements();
// Prepares them all on a new connection.
void prepare_statements(pqxx::connection& c);

// Recovery's cursor over every live job summary (not prepared: a cursor
// cannot run a prepared statement), fetched k_fetch_live rows at a time.
const std::string& pg_declare_live_cursor();
inline constexpr const char* k_fetch_live = "FETCH FORWARD 10000 FROM aqs_live";
// Recovery reads jobs and nodes from one snapshot. SET TRANSACTION takes no
// parameters: constant text.
inline constexpr const char* k_snapshot = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY";

}  // namespace aqs::store
