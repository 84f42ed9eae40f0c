// Integration test of pg_server: a second private PostgreSQL, started from
// nothing in its own directory, the way aqsd's zero-configuration mode does.
#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>
#include <filesystem>

#include <pqxx/pqxx>

#include "store/migrations.hpp"
#include "store/pg_server.hpp"
#include "store_test_util.hpp"

namespace fs = std::filesystem;
using aqs::store::pg_server;

namespace {

using aqs::test::temp_dir;

}  // namespace

TEST_CASE("a private server starts from nothing, keeps its data across a restart, and stops") {
  temp_dir tmp;  // removed last, also when a check fails
  const fs::path dir = tmp.path();
  {
    pg_server server({.dir = dir, .durable = false});
    server.start();
    CHECK(server.ready());
    {
      pqxx::connection conn(server.connection_string());
      aqs::store::apply_migrations(conn);
      pqxx::work tx(conn);
      tx.exec0("INSERT INTO jobs (user_name, uid, workdir, min_pe, max_pe) VALUES ('kept', 1, '/', 1, 1)");
      tx.commit();
    }
    server.stop();
    CHECK_FALSE(server.ready());

    // Second start reuses the data directory: the job is still there.
    server.start();
    pqxx::connection conn(server.connection_string());
    pqxx::read_transaction tx(conn);
    CHECK(tx.exec1("SELECT count(*) FROM jobs WHERE user_name = 'kept'")[0].as<int>() == 1);
  }  // destructor stops the server
  pg_server probe({.dir = dir, .stop_on_destroy = false});
  CHECK_FALSE(probe.ready());
  CHECK_FALSE(fs::exists(dir / "data" / "postmaster.pid"));
}

TEST_CASE("a second pg_server on a running directory adopts the server instead of starting another") {
  temp_dir tmp;  // removed last, also when a check fails
  const fs::path dir = tmp.path();
  pg_server first({.dir = dir, .durable = false});
  first.start();
  {
    pg_server second({.dir = dir, .durable = false, .stop_on_destroy = false});
    CHECK_NOTHROW(second.start());
    CHECK(second.ready());
  }
  CHECK(first.ready());
  first.stop();
  CHECK_FALSE(first.ready());
}

// A directory (removed at the end, also when a check fails) where a server
// was made, started and stopped.
struct stopped_server_dir {
  temp_dir tmp;
  const fs::path dir = tmp.path();
  stopped_server_dir() {
    pg_server server({.dir = dir, .durable = false});
    server.start();
    server.stop();
  }
};

TEST_CASE_FIXTURE(stopped_server_dir, "a server that cannot start reports why in one line") {
  // Corrupt the configuration: PostgreSQL refuses to start, and we say so.
  {
    std::FILE* f = std::fopen((dir / "data" / "postgresql.conf").c_str(), "a");
    REQUIRE(f != nullptr);
    std::fputs("\nshared_buffers = 'not a size'\n", f);
    std::fclose(f);
  }
  pg_server server({.dir = dir, .durable = false, .start_timeout = std::chrono::seconds(20)});
  CHECK_THROWS_WITH_AS(server.start(), doctest::Contains("while starting"), aqs::store::pg_server_error);
  CHECK_FALSE(server.ready());
}

TEST_CASE("the connection string quotes a directory with spaces and quotes") {
  CHECK(aqs::store::conninfo_quote("a b'c\\d") == "'a b\\'c\\\\d'");
}

TEST_CASE_FIXTURE(stopped_server_dir, "a stale postmaster.pid naming an unrelated live process never gets that process signalled") {
  // As after a host crash: the lock file survives and its pid now belongs
  // to some other program.
  const pid_t other = ::fork();
  REQUIRE(other >= 0);
  if (other == 0) {
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  {
    std::FILE* f = std::fopen((dir / "data" / "postmaster.pid").c_str(), "w");
    REQUIRE(f != nullptr);
    std::fprintf(f, "%d\n%s\n", static_cast<int>(other), (dir / "data").c_str());
    std::fclose(f);
  }
  pg_server server({.dir = dir, .durable = false, .stop_on_destroy = false});
  CHECK_FALSE(server.ready());
  CHECK_NOTHROW(server.stop());
  CHECK(::kill(other, 0) == 0);  // still alive: not ours to stop
  ::kill(other, SIGKILL);
  ::waitpid(other, nullptr, 0);
}
