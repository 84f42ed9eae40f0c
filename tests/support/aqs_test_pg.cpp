// aqs-test-pg: starts and stops the test run's private PostgreSQL (the ctest
// fixture "postgres"), with a template database at the latest schema.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include <pqxx/connection>
#include <pqxx/nontransaction>

#include "store/migrations.hpp"
#include "store/pg_server.hpp"
#include "test_pg.hpp"

namespace {

int usage() {
  std::fputs("usage: aqs-test-pg start|stop|status [DIR]\n"
             "  DIR defaults to $AQS_TEST_PGDIR, else the build tree's test-pg/\n"
             "  start: initdb if needed, start, (re)create the template database aqs_template\n"
             "  stop:  stop the server and remove DIR\n",
             stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) return usage();
  const std::string cmd = argv[1];
  const std::filesystem::path dir = argc == 3 ? std::filesystem::path(argv[2]) : aqs::test::test_pg_dir();
  try {
    aqs::store::pg_server server({.dir = dir, .durable = false, .stop_on_destroy = false});
    if (cmd == "start") {
      server.start();
      {
        pqxx::connection conn(server.connection_string("postgres"));
        pqxx::nontransaction tx(conn);
        tx.exec0(std::string("DROP DATABASE IF EXISTS ") + aqs::test::k_template_db + " WITH (FORCE)");
        tx.exec0(std::string("CREATE DATABASE ") + aqs::test::k_template_db);
      }
      pqxx::connection conn(server.connection_string(aqs::test::k_template_db));
      int v = aqs::store::apply_migrations(conn);
      std::printf("test PostgreSQL ready in %s (template %s at schema version %d)\n", dir.c_str(),
                  aqs::test::k_template_db, v);
    } else if (cmd == "stop") {
      server.stop();
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      std::printf("test PostgreSQL in %s stopped and removed\n", dir.c_str());
    } else if (cmd == "status") {
      std::printf("%s\n", server.ready() ? "running" : "stopped");
      return server.ready() ? 0 : 1;
    } else {
      return usage();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aqs-test-pg: %s\n", e.what());
    return 1;
  }
  return 0;
}
