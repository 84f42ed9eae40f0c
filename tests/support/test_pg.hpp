// test_pg: where the test run's private PostgreSQL lives, and a fresh
// database per test cloned from the schema template.
#pragma once

#include <filesystem>
#include <string>

namespace aqs::test {

// The template database that holds the migrated schema.
inline constexpr const char* k_template_db = "aqs_template";

// $AQS_TEST_PGDIR, else the build tree's default (set by CMake).
std::filesystem::path test_pg_dir();
// Connection string for a database of the test server.
std::string test_pg_conninfo(const std::string& dbname);

// A database of its own for one test: created from the template (so it has
// the schema) when constructed, dropped when destroyed. Tests can therefore
// run in parallel and never see each other's rows.
class test_database {
public:
  test_database();
  // An empty database (from template0), for testing migrations themselves.
  static test_database empty();
  ~test_database();
  test_database(test_database&& other) noexcept;
  test_database(const test_database&) = delete;
  test_database& operator=(const test_database&) = delete;
  test_database& operator=(test_database&&) = delete;

  const std::string& name() const noexcept { return name_; }
  std::string conninfo() const { return test_pg_conninfo(name_); }

private:
  explicit test_database(const char* template_name);
  std::string name_;
};

}  // namespace aqs::test
