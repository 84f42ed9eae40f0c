// job_store: the one class that owns AQS's SQL: jobs, their state machine
// and history, nodes, recovery, and group-committed durable submission.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "store/records.hpp"
#include "store/store_errors.hpp"

namespace aqs::store {

struct job_store_options {
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

  // Fault injection, for tests only. before_commit runs right before a
  // write is committed (a committer sending a batch, whose statement is its
  // own COMMIT; the control connection before COMMIT of a transition or a
  // node update), with that connection's backend pid: a test may terminate
  // it. fake_in_doubt_after_commit, when it returns true after a write
  // committed, makes the store treat the outcome as unknown.
  std::function<void(int backend_pid)> before_commit;
  std::function<bool()> fake_in_doubt_after_commit;
};

// Thread-safe: any thread may call any method. Submissions go through a queue
// to the committer connections; reads (get_job, job_history, list_jobs,
// list_nodes) run on a reader connection, writes and recovery on a control
// connection, each one call at a time.
//
// Connection loss: every operation reconnects with exponential backoff and
// retries when that is safe: a transaction that failed before COMMIT is
// retried; one whose COMMIT outcome is unknown (in_doubt_error, connection
// lost during COMMIT) is first checked (submissions by submit_token,
// transitions by the job's state) and only retried if it did not land. After
// reconnect_timeout the operation throws store_unavailable.
class job_store {
public:
  // Connects and checks the schema version (schema_mismatch if the database
  // is not at latest_schema_version(); it does not migrate). Throws
  // store_unavailable if the database cannot be reached within
  // reconnect_timeout.
  explicit job_store(job_store_options options);
  // shutdown(), then closes the connections.
  ~job_store();
  job_store(const job_store&) = delete;
  job_store& operator=(const job_store&) = delete;

  // For a daemon that stops: no submission is taken any more (submit_async
  // and submit_then throw store_unavailable); those queued and not yet sent
  // fail with store_unavailable (none was acknowledged, a client retries with
  // its submit_token); a batch being committed finishes its current attempt.
  // From now on every operation that cannot reach the database gives up at
  // once instead of retrying for reconnect_timeout, so a dead database holds
  // nobody up. Returns when every committer thread has finished, hence when
  // no submit callback runs or will run. Idempotent; never throws.
  void shutdown() noexcept;
  // Whether the last attempt to reach the database failed (it is down and
  // being reconnected); false again after the next success.
  bool unreachable() const noexcept { return unreachable_; }

  // Queues a job; the future yields its id once the transaction holding it
  // has committed (synchronous_commit on: it is on disk). A submit_token
  // already in the database yields that job's id and adds nothing.
  // Throws invalid_job at once for a request the database could never
  // accept; the future throws store_unavailable if the database stays away,
  // or store_error if the database refused the job.
  std::future<std::int64_t> submit_async(job_request request);
  // submit_async(request).get().
  std::int64_t submit(job_request request);
  // Like submit_async, but calls done(id, created, nullptr) once committed,
  // or done(0, false, error) with the exception submit_async's future would
  // throw. `created` is false when the submit_token was already there (a
  // client's retry: the id is the earlier job's). After a COMMIT whose
  // outcome had to be resolved, jobs found by their tokens count as created.
  // It runs on a committer thread: it must be quick and must not wait for
  // the store. Throws invalid_job at once, as submit_async does (done is
  // then never called).
  using submit_callback = std::function<void(std::int64_t id, bool created, std::exception_ptr error)>;
  void submit_then(job_request request, submit_callback done);

  // Moves a job to t.to and appends the event, in one transaction. Sets
  // start_time on entering RUNNING (first time per attempt), end_time and
  // the exit status on final states, clears the map when the job stops
  // holding processors; RUNNING -> RESIZING keeps the old map and records
  // the asked-for one (both reserved) until RESIZING -> RUNNING. Returns the
  // event written. Throws not_found, unexpected_state (t.from given and
  // different), illegal_transition (not in core::is_legal_transition),
  // invalid_job (a map where none belongs, or missing where one is needed,
  // or exit status on a non-final state); on any of these nothing is written.
  job_event transition(const job_transition& t);
  // Several transitions (of different jobs) in one transaction, e.g. every
  // resize of one scheduling decision: all are written or, if any fails
  // (same errors as transition, or invalid_job for a job listed twice),
  // none is. Returns the events in the order given.
  std::vector<job_event> transition_all(const std::vector<job_transition>& ts);

  // The job in full, or nullopt.
  std::optional<job_record> get_job(std::int64_t id);
  // The job's events, oldest first (empty for an unknown job).
  std::vector<job_event> job_history(std::int64_t id);
  // fjobs: jobs matching the filter, by id.
  std::vector<job_summary> list_jobs(const job_filter& filter = {});
  // Recovery: every live job (PENDING, RUNNING, RESIZING, SUSPENDED) and
  // every node, from one snapshot.
  live_state load_live_state();

  // Registers a node, numbering its processors after the last node's. A
  // node registering again under its name keeps its numbers and comes back
  // UP; with a different processor count it is invalid_job (renumbering
  // would move running jobs' processors).
  node_record register_node(const node_request& request);
  // Records a heartbeat now. Throws not_found.
  void heartbeat(std::string_view name);
  // Throws not_found.
  void set_node_state(std::string_view name, node_state state);
  std::vector<node_record> list_nodes();

  struct counters {
    std::uint64_t batches = 0;      // submission transactions committed
    std::uint64_t submissions = 0;  // submissions acknowledged
    std::uint64_t reconnects = 0;   // connections re-established
    std::uint64_t in_doubt = 0;     // COMMITs with unknown outcome, resolved
  };
  counters stats() const;

  class session;  // one connection with its prepared statements (internal)

private:
  struct pending_submit {
    job_request request;
    std::promise<std::int64_t> promise;
    submit_callback done;  // set: report here instead of through the promise
    void resolve(std::int64_t id, bool created);
    void reject(std::exception_ptr e);
  };
  void enqueue(pending_submit p);
  void committer_loop(unsigned index);
  void commit_batch(session& s, std::vector<pending_submit>& batch);
  // Ids in the batch's order; created[i] tells whether job i was inserted
  // by this batch (false: its token was already there).
  std::vector<std::int64_t> insert_batch(session& s, const std::vector<pending_submit>& batch,
                                         std::vector<bool>& created);
  template <class R, class Body, class Resolve>
  R run(session& s, Body&& body, Resolve&& resolve_in_doubt, bool read_only);

  job_store_options options_;
  std::unique_ptr<session> control_;
  std::mutex control_mu_;
  // Listings and lookups (fjobs, fnodes, job history) have a connection of
  // their own, so a long listing never holds up a transition.
  std::unique_ptr<session> reader_;
  std::mutex reader_mu_;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<pending_submit> queue_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<session>> committer_sessions_;
  std::vector<std::thread> committers_;
  std::once_flag shutdown_once_;
  // shutdown() was called: retry loops give up at once.
  std::atomic<bool> giving_up_{false};
  std::atomic<bool> unreachable_{false};

  mutable std::mutex stats_mu_;
  counters stats_;
};

}  // namespace aqs::store
