// pg_session: one connection of the PostgreSQL job store, reconnected with
// backoff, and the retry rules every transaction runs under (in-doubt COMMITs
// resolved before anything is sent again).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <pqxx/pqxx>

#include "store/pg_job_store.hpp"

namespace aqs::store {

// What every session of one store shares: how to connect and how long to
// retry, the test hooks, and the counters stats() reports.
class pg_shared {
public:
  pg_shared(pg_job_store_options o, pg_job_store::test_hooks h) : options(std::move(o)), hooks(std::move(h)) {}

  const pg_job_store_options options;
  const pg_job_store::test_hooks hooks;
  // shutdown() was called: retry loops give up at once.
  std::atomic<bool> giving_up{false};
  // The last attempt to reach the database failed.
  std::atomic<bool> unreachable{false};

  // Throws store_unavailable when an operation must stop retrying: the store
  // is shutting down, or `deadline` (now + reconnect_timeout at its start)
  // has passed.
  void check_retry(std::chrono::steady_clock::time_point deadline) const;

  void count_reconnect();
  void count_in_doubt();
  void count_batch(std::size_t submissions);
  job_store::counters stats() const;

private:
  mutable std::mutex stats_mu_;
  job_store::counters stats_;
};

// A COMMIT whose outcome we cannot know.
struct commit_unknown {};

// SQLSTATEs that mean the connection, not the statement, failed.
bool is_connection_state(const std::string& sqlstate);

// One connection with its prepared statements. Not thread-safe: its owner
// runs one call at a time on it.
class pg_session {
public:
  explicit pg_session(pg_shared& shared) : shared_(shared) {}
  ~pg_session() { drop(); }
  pg_session(const pg_session&) = delete;
  pg_session& operator=(const pg_session&) = delete;

  // The connection, (re)connecting with backoff until `deadline` if there is
  // none. Throws store_unavailable at the deadline, schema_mismatch from the
  // schema check.
  pqxx::connection& connect(std::chrono::steady_clock::time_point deadline);
  void drop() noexcept;
  bool is_open() const noexcept { return conn_ && conn_->is_open(); }
  int backend_pid() const noexcept { return conn_ ? conn_->backendpid() : 0; }
  pg_shared& shared() const noexcept { return shared_; }

  // Runs body(tx) in a transaction and commits it; see the definition for
  // the retry rules. Returns body's result, or resolve_in_doubt's.
  template <class R, class Body, class Resolve>
  R run(Body&& body, Resolve&& resolve_in_doubt, bool read_only);

private:
  pg_shared& shared_;
  std::unique_ptr<pqxx::connection> conn_;
  std::unique_ptr<pqxx::errorhandler> handler_;  // destroyed before conn_
  bool ever_connected_ = false;
  std::string last_error_;
};

// For run(): work whose COMMIT outcome never needs resolving (reads, and
// writes that are safe to run again).
template <class R>
std::optional<R> no_resolve(pqxx::work&) {
  return std::nullopt;
}

// Runs body(tx) in a transaction and commits it, retrying when that is safe:
// - connection lost before COMMIT: reconnect, run again;
// - serialization failure or deadlock: run again (bounded);
// - COMMIT outcome unknown: reconnect, ask resolve_in_doubt(tx) whether it
//   landed (it returns the result if so) and run again only if not. For
//   read-only work the outcome does not matter: run again.
template <class R, class Body, class Resolve>
R pg_session::run(Body&& body, Resolve&& resolve_in_doubt, bool read_only) {
  const auto deadline = std::chrono::steady_clock::now() + shared_.options.reconnect_timeout;
  int rollbacks = 0;
  bool in_doubt = false;
  for (;;) {
    try {
      pqxx::connection& c = connect(deadline);
      if (in_doubt) {
        pqxx::work check(c);
        std::optional<R> landed = resolve_in_doubt(check);
        check.commit();
        in_doubt = false;
        shared_.count_in_doubt();
        if (landed) return std::move(*landed);
      }
      pqxx::work tx(c);
      R result = body(tx);
      if (!read_only && shared_.hooks.before_commit) shared_.hooks.before_commit(backend_pid());
      try {
        tx.commit();
      } catch (const pqxx::in_doubt_error&) {
        throw commit_unknown{};
      } catch (const pqxx::broken_connection&) {
        throw commit_unknown{};
      } catch (const pqxx::transaction_rollback&) {
        throw;  // definitely rolled back
      } catch (const pqxx::sql_error& e) {
        if (!is_open() || is_connection_state(e.sqlstate())) throw commit_unknown{};
        throw;
      }
      if (!read_only && shared_.hooks.fake_in_doubt_after_commit && shared_.hooks.fake_in_doubt_after_commit()) {
        throw commit_unknown{};
      }
      return result;
    } catch (const commit_unknown&) {
      drop();
      in_doubt = !read_only;
    } catch (const pqxx::broken_connection&) {
      drop();
    } catch (const pqxx::transaction_rollback&) {
      if (!is_open()) {
        drop();
      } else if (++rollbacks > 20) {
        throw;
      }
    } catch (const pqxx::sql_error& e) {
      if (is_open() && !is_connection_state(e.sqlstate())) throw;
      drop();
    }
    shared_.check_retry(deadline);
  }
}

}  // namespace aqs::store
