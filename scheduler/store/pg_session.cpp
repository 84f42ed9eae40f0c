// pg_session: connecting with backoff, and the counters the sessions share.
#include "store/pg_session.hpp"

#include <algorithm>
#include <thread>

#include "store/migrations.hpp"
#include "store/pg_statements.hpp"

namespace aqs::store {

namespace {

// PostgreSQL notices and libpqxx's own warnings (e.g. "connection lost while
// committing") are handled by the store itself; keep them off stderr.
class quiet_errorhandler final : public pqxx::errorhandler {
public:
  using pqxx::errorhandler::errorhandler;
  bool operator()(const char*) noexcept override { return false; }
};

}  // namespace

bool is_connection_state(const std::string& sqlstate) {
  return sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03";
}

void pg_shared::check_retry(std::chrono::steady_clock::time_point deadline) const {
  if (giving_up) throw store_unavailable("the job database is unreachable and the store is shutting down");
  if (std::chrono::steady_clock::now() > deadline) {
    throw store_unavailable("the job database stayed unreachable for " +
                            std::to_string(options.reconnect_timeout.count()) + " ms");
  }
}

void pg_shared::count_reconnect() {
  std::lock_guard lk(stats_mu_);
  ++stats_.reconnects;
}

void pg_shared::count_in_doubt() {
  std::lock_guard lk(stats_mu_);
  ++stats_.in_doubt;
}

void pg_shared::count_batch(std::size_t submissions) {
  std::lock_guard lk(stats_mu_);
  ++stats_.batches;
  stats_.submissions += submissions;
}

job_store::counters pg_shared::stats() const {
  std::lock_guard lk(stats_mu_);
  return stats_;
}

pqxx::connection& pg_session::connect(std::chrono::steady_clock::time_point deadline) {
  if (conn_) return *conn_;
  auto delay = shared_.options.backoff_initial;
  for (;;) {
    try {
      auto c = std::make_unique<pqxx::connection>(shared_.options.conninfo);
      auto handler = std::make_unique<quiet_errorhandler>(*c);
      check_schema_version(*c);
      // What parse_utc_timestamp reads.
      c->set_variable("TimeZone", "'UTC'");
      c->set_variable("DateStyle", "'ISO, YMD'");
      prepare_statements(*c);
      handler_ = std::move(handler);
      conn_ = std::move(c);
      shared_.unreachable = false;
      if (ever_connected_) shared_.count_reconnect();
      ever_connected_ = true;
      return *conn_;
    } catch (const pqxx::broken_connection& e) {
      last_error_ = e.what();
    } catch (const pqxx::sql_error& e) {
      if (!is_connection_state(e.sqlstate())) throw;
      last_error_ = e.what();
    }
    shared_.unreachable = true;
    if (shared_.giving_up || std::chrono::steady_clock::now() + delay > deadline) {
      std::string msg = last_error_;
      while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
      throw store_unavailable("cannot reach the job database: " + msg);
    }
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, shared_.options.backoff_max);
  }
}

void pg_session::drop() noexcept {
  handler_.reset();
  conn_.reset();
}

}  // namespace aqs::store
