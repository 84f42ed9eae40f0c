// pg_job_store: the PostgreSQL job store, the one class that owns AQS's SQL:
// jobs, their state machine and history, nodes, recovery, and
// group-committed durable submission.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/job_store.hpp"
#include "store/records.hpp"
#include "store/store_errors.hpp"

namespace aqs::store {

class pg_session;
class pg_shared;
class pg_submit_batcher;

struct pg_job_store_options {
  // libpq connection string of a database migrated to this build's schema.
  std::string conninfo;
  // Connections that commit submission batches. A batch forms while the
  // busy committers wait for their WAL flush; several waiting at once are
  // flushed by PostgreSQL together. 8 measured better than 4 and as good as
  // 16 on a 2-core VM (docs/benchmarks.md).
  unsigned committers = 8;
  // Most submissions in one transaction.
  std::size_t max_batch = 1000;
  // How long one operation keeps trying to reach the database before
  // store_unavailable; reconnects back off from backoff_initial, doubling up
  // to backoff_max.
  std::chrono::milliseconds reconnect_timeout{30'000};
  std::chrono::milliseconds backoff_initial{5};
  std::chrono::milliseconds backoff_max{500};
};

// The job_store contracts hold; what follows is how this one keeps them.
//
// Submissions go through a queue to the committer connections; reads
// (get_job, job_history, list_jobs, list_nodes) run on a reader connection,
// writes and recovery on a control connection, each one call at a time.
// submit_then's callback runs on a committer thread.
//
// Connection loss: every operation reconnects with exponential backoff and
// retries when that is safe: a transaction that failed before COMMIT is
// retried; one whose COMMIT outcome is unknown (in_doubt_error, connection
// lost during COMMIT) is first checked (submissions by submit_token,
// transitions by the job's state) and only retried if it did not land. After
// reconnect_timeout the operation throws store_unavailable.
class pg_job_store final : public job_store {
public:
  // Fault injection, for tests only. before_commit runs right before a
  // write is committed (a committer sending a batch, whose statement is its
  // own COMMIT; the control connection before COMMIT of a transition or a
  // node update), with that connection's backend pid: a test may terminate
  // it. fake_in_doubt_after_commit, when it returns true after a write
  // committed, makes the store treat the outcome as unknown.
  struct test_hooks {
    std::function<void(int backend_pid)> before_commit;
    std::function<bool()> fake_in_doubt_after_commit;
  };

  // Connects and checks the schema version (schema_mismatch if the database
  // is not at latest_schema_version(); it does not migrate). Throws
  // store_unavailable if the database cannot be reached within
  // reconnect_timeout.
  explicit pg_job_store(pg_job_store_options options);
  // The same, with faults injected: tests only.
  pg_job_store(pg_job_store_options options, test_hooks hooks);
  // shutdown(), then closes the connections.
  ~pg_job_store() override;

  void shutdown() noexcept override;
  bool unreachable() const noexcept override;
  std::future<std::int64_t> submit_async(job_submission request) override;
  std::int64_t submit(job_submission request) override;
  void submit_then(job_submission request, submit_callback done) override;
  history_event transition(const job_transition& t) override;
  std::vector<history_event> transition_all(const std::vector<job_transition>& ts) override;
  history_event update_job(const control_change& u) override;
  std::vector<std::int64_t> split_array(const array_split& s) override;
  std::optional<job_record> get_job(std::int64_t id) override;
  std::vector<history_event> job_history(std::int64_t id) override;
  std::vector<job_summary> list_jobs(const job_filter& filter = {}) override;
  void record_measurement(const job_measurement& m) override;
  std::vector<job_usage> job_usage_of(const std::vector<std::int64_t>& ids) override;
  live_state load_live_state() override;
  node_record register_node(const node_request& request) override;
  void heartbeat(std::string_view name) override;
  void set_node_state(std::string_view name, node_state state) override;
  std::vector<node_record> list_nodes() override;
  counters stats() const override;

private:
  std::unique_ptr<pg_shared> shared_;  // options, hooks, flags and counters of every session
  std::unique_ptr<pg_session> control_;  // writes and recovery
  std::mutex control_mu_;
  // Listings and lookups (fjobs, fnodes, job history) have a connection of
  // their own, so a long listing never holds up a transition.
  std::unique_ptr<pg_session> reader_;
  std::mutex reader_mu_;
  std::unique_ptr<pg_submit_batcher> batcher_;
  std::once_flag shutdown_once_;
};

}  // namespace aqs::store
