// pg_server: a private PostgreSQL server in one directory (tests, and aqsd's
// zero-configuration default).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace aqs::store {

// Anything that stops the private server from starting or stopping: missing
// binaries, a failed initdb, a server that exits or never becomes ready. The
// message is one line and names the log file to read.
class pg_server_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct pg_server_options {
  // Holds data/ (PGDATA), the Unix socket and the logs. Created if missing.
  std::filesystem::path dir;
  // Only names the socket file (.s.PGSQL.<port>); the server opens no TCP port.
  int port = 5432;
  // false: fsync off, for throwaway test clusters. Crash safety of committed
  // data then depends on the OS staying up, which is fine for tests only.
  bool durable = true;
  // Stop the server when this object is destroyed.
  bool stop_on_destroy = true;
  std::chrono::milliseconds start_timeout{60'000};
  std::chrono::milliseconds stop_timeout{30'000};
};

// Runs `postgres` directly (no pg_ctl, no shell), as the `postgres` user when
// we are root (PostgreSQL refuses to run as root), in its own session so that
// a Ctrl-C meant for our process group does not hit it. It listens on a Unix
// socket in `dir` only (mode 0700, trust authentication: only the owner and
// root can reach it), never on TCP. An existing data directory is reused; a
// server already running in it is adopted.
class pg_server {
public:
  explicit pg_server(pg_server_options options);
  ~pg_server();
  pg_server(const pg_server&) = delete;
  pg_server& operator=(const pg_server&) = delete;

  // initdb if the directory holds no cluster, start the server unless one is
  // already running there, and wait until it accepts connections. Throws
  // pg_server_error; also, without waiting any longer, once `cancel` (if
  // given) becomes true (the server started so far is left to stop()).
  void start(const std::atomic<bool>* cancel = nullptr);
  // The wait status of the postmaster this object started, if it has exited
  // since (it is reaped: no zombie is left); nullopt while it runs or when
  // we did not start it. Not thread-safe with the other methods.
  std::optional<int> reap_exited();
  // Fast shutdown (SIGINT), then immediate (SIGQUIT) and SIGKILL if it does
  // not go within stop_timeout. No-op when nothing runs. Throws
  // pg_server_error only if the process cannot be stopped at all.
  void stop();
  // Immediate shutdown (SIGQUIT, then SIGKILL): no checkpoint, sessions cut
  // off, WAL replayed at the next start, as after a crash. For tests of what
  // survives one. No-op when nothing runs; throws pg_server_error if the
  // server cannot be stopped.
  void crash();
  // A server answers on our socket.
  bool ready() const;

  // libpq connection string for a database of this server.
  std::string connection_string(std::string_view dbname = "postgres") const;
  // Creates database `name` on this (started) server unless it exists, and
  // returns its connection string. Throws std::runtime_error with the
  // server's one-line reason.
  std::string ensure_database(std::string_view name) const;
  const std::filesystem::path& dir() const noexcept { return options_.dir; }
  std::filesystem::path data_dir() const { return options_.dir / "data"; }
  std::filesystem::path log_file() const { return options_.dir / "postgres.log"; }

private:
  void init_cluster();
  void shut_down(int first_signal);  // stop() and crash()
  pid_t running_pid() const;  // from postmaster.pid, 0 if none alive

  pg_server_options options_;
  pid_t child_ = 0;  // the postmaster, if we started it
};

// The directory holding initdb and postgres: $AQS_PG_BINDIR, else the newest
// /usr/lib/postgresql/<version>/bin. Throws pg_server_error if none.
std::filesystem::path find_pg_bindir();

// "exited with status 1", "killed by signal Killed": a wait status in words.
std::string describe_wait_status(int status);

// Quotes a value for a libpq key=value connection string.
std::string conninfo_quote(std::string_view value);

}  // namespace aqs::store
