// Durability of the job store: a submitting process killed with SIGKILL at
// random moments, and a PostgreSQL restart in the middle of a load run. In
// both, every acknowledged job must be there exactly once, with its event.
#include <doctest/doctest.h>

#include <atomic>
#include <csignal>
#include <map>
#include <mutex>
#include <poll.h>
#include <random>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <pqxx/pqxx>

#include "store/pg_job_store.hpp"
#include "store/migrations.hpp"
#include "store/pg_server.hpp"
#include "store_test_util.hpp"
#include "test_pg.hpp"

using namespace aqs::store;
using aqs::test::options_for;
using aqs::test::simple_request;
using aqs::test::temp_dir;
using aqs::test::test_database;

namespace {

// Jobs whose submission event is missing or doubled: must be none.
long long half_written_jobs(pqxx::transaction_base& tx) {
  return tx
      .exec1("SELECT count(*) FROM jobs j WHERE (SELECT count(*) FROM job_events e"
             " WHERE e.job_id = j.id AND e.old_state IS NULL AND e.new_state = 'PENDING') <> 1")[0]
      .as<long long>();
}

// Every acknowledged (id, token) is in the database, once, under its token.
void check_acknowledged(const std::string& conninfo, const std::map<std::int64_t, std::string>& acked) {
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  std::map<std::int64_t, std::string> present;
  for (const auto& row : tx.exec("SELECT id, submit_token FROM jobs")) {
    present.emplace(row[0].as<std::int64_t>(), row[1].as<std::string>());
  }
  std::size_t missing = 0;
  for (const auto& [id, token] : acked) {
    auto it = present.find(id);
    if (it == present.end() || it->second != token) ++missing;
  }
  CHECK(missing == 0);
  CHECK(half_written_jobs(tx) == 0);
  CHECK(tx.exec1("SELECT count(*) - count(DISTINCT submit_token) FROM jobs")[0].as<long long>() == 0);
}

// The child: a store, several threads submitting as fast as they can, each
// acknowledged id written to `fd` right after the acknowledgement. Never
// returns; the parent kills it.
[[noreturn]] void submit_until_killed(const std::string& conninfo, int cycle, int fd) {
  try {
    pg_job_store_options o = options_for(conninfo);
    pg_job_store store(o);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (long n = 0;; ++n) {
          job_submission q = simple_request("crash");
          q.submit_token = "c" + std::to_string(cycle) + "-" + std::to_string(t) + "-" + std::to_string(n);
          q.script = std::string(static_cast<std::size_t>(n % 4) * 1000, 'x');
          const auto id = store.submit(q);
          const std::string line = std::to_string(id) + " " + q.submit_token + "\n";
          // One write() below PIPE_BUF is atomic: the parent sees whole lines.
          if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) ::_exit(3);
        }
      });
    }
    for (auto& t : threads) t.join();
  } catch (...) {
    ::_exit(2);
  }
  ::_exit(0);
}

// Reads whole lines "id token" from fd until EOF or until `until`.
void read_acks(int fd, std::string& buffer, std::map<std::int64_t, std::string>& acked,
               std::chrono::steady_clock::time_point until, bool to_eof) {
  char chunk[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (!to_eof && left.count() <= 0) return;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, to_eof ? 5000 : static_cast<int>(left.count()));
    if (r <= 0) {
      if (to_eof) return;
      continue;
    }
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0) return;
    buffer.append(chunk, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = buffer.find('\n')) != std::string::npos) {
      const std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      const auto sp = line.find(' ');
      acked.emplace(std::stoll(line.substr(0, sp)), line.substr(sp + 1));
    }
  }
}

}  // namespace

TEST_CASE("a submitting process killed with SIGKILL at random moments loses no acknowledged job and leaves no half-written one") {
  test_database db;
  std::map<std::int64_t, std::string> acked;
  std::mt19937 rng(std::random_device{}());
  constexpr int k_cycles = 25;
  int cycles_with_acks = 0;
  for (int cycle = 0; cycle < k_cycles; ++cycle) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::close(fds[0]);
      submit_until_killed(db.conninfo(), cycle, fds[1]);
    }
    ::close(fds[1]);
    std::string buffer;
    const std::size_t before = acked.size();
    // Kill at a random moment: counted from the fork in odd cycles (which
    // may hit start-up), from the first acknowledgement in even ones (which
    // is then certainly under load, however slow the machine).
    if (cycle % 2 == 0) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (acked.size() == before && std::chrono::steady_clock::now() < give_up) {
        read_acks(fds[0], buffer, acked, std::chrono::steady_clock::now() + std::chrono::milliseconds(5), false);
      }
    }
    const auto delay = std::chrono::milliseconds(rng() % 250);
    read_acks(fds[0], buffer, acked, std::chrono::steady_clock::now() + delay, false);
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    read_acks(fds[0], buffer, acked, {}, true);  // what it wrote before dying
    ::close(fds[0]);
    CHECK_MESSAGE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL), "child exited by itself: ", status);
    if (acked.size() > before) ++cycles_with_acks;
  }
  MESSAGE(acked.size() << " jobs acknowledged over " << k_cycles << " kills");
  CHECK(cycles_with_acks >= k_cycles / 2);  // the kills did land under load
  check_acknowledged(db.conninfo(), acked);
}

TEST_CASE("a PostgreSQL restart and a PostgreSQL crash in the middle of a load run: the run carries on and loses nothing acknowledged") {
  temp_dir dir;  // declared first: removed after the server is stopped
  pg_server server({.dir = dir.path(), .durable = true});
  server.start();
  {
    pqxx::connection c(server.connection_string());
    apply_migrations(c);
  }
  pg_job_store_options o = options_for(server.connection_string());
  o.reconnect_timeout = std::chrono::seconds(60);
  pg_job_store store(o);
  const auto running = store.submit(simple_request());
  store.transition({.job_id = running, .to = aqs::core::job_state::running,
                    .procs = aqs::core::processor_set::from_string("11")});

  std::mutex mu;
  std::map<std::int64_t, std::string> acked;
  std::atomic<bool> stop{false};
  std::atomic<long> failures{0};
  std::vector<std::thread> load;
  for (int t = 0; t < 4; ++t) {
    load.emplace_back([&, t] {
      for (long n = 0; !stop; ++n) {
        job_submission q = simple_request("restart");
        q.submit_token = "r" + std::to_string(t) + "-" + std::to_string(n);
        try {
          const auto id = store.submit(q);
          std::lock_guard lk(mu);
          acked.emplace(id, q.submit_token);
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  }
  auto acked_count = [&] {
    std::lock_guard lk(mu);
    return acked.size();
  };
  auto wait_for = [&](std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (acked_count() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  wait_for(300);
  server.stop();  // fast shutdown: in-flight transactions are cut off
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::size_t at_restart = acked_count();
  server.start();
  wait_for(at_restart + 300);
  const std::size_t after_restart = acked_count() - at_restart;
  server.crash();  // immediate shutdown: committed work survives only through the WAL
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::size_t at_crash = acked_count();
  server.start();  // crash recovery
  wait_for(at_crash + 300);
  const std::size_t after_crash = acked_count() - at_crash;
  stop = true;
  for (auto& t : load) t.join();

  MESSAGE(acked.size() << " acknowledged, " << after_restart << " after the restart, " << after_crash
                       << " after the crash, "
                       << store.stats().reconnects << " reconnects, " << store.stats().in_doubt << " in doubt");
  CHECK(failures == 0);
  CHECK(after_restart >= 300);
  CHECK(after_crash >= 300);
  CHECK(store.stats().reconnects >= 1);
  // The control connection reconnects too.
  store.transition({.job_id = running, .to = aqs::core::job_state::completed, .exit_code = 0});
  CHECK(store.get_job(running)->status.state == aqs::core::job_state::completed);
  check_acknowledged(server.connection_string(), acked);

  // A database away for longer than the reconnect budget: the submission
  // fails with store_unavailable (not acknowledged, not lost silently), and
  // the store works again once the database is back.
  pg_job_store_options quick = options_for(server.connection_string());
  quick.reconnect_timeout = std::chrono::milliseconds(500);
  pg_job_store impatient(quick);
  server.stop();
  job_submission late = simple_request();
  late.submit_token = "late";
  CHECK_THROWS_AS(impatient.submit(late), store_unavailable);
  server.start();
  const auto late_id = impatient.submit(late);  // same token: retried safely
  CHECK(late_id > 0);
  CHECK(impatient.submit(late) == late_id);
}
