// job_store: the interface to AQS's durable record of jobs, their state
// machine and history, and nodes; pg_job_store is the real one (PostgreSQL),
// memory_job_store an in-memory one for tests.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <optional>
#include <string_view>
#include <vector>

#include "store/records.hpp"
#include "store/store_errors.hpp"

namespace aqs::store {

// Thread-safe: any thread may call any method.
//
// An implementation that loses its database retries while that is safe and
// throws store_unavailable when it gives up, or when it cannot tell whether a
// write landed (the caller must then read the state back before acting on it;
// a submission can be retried with the same submit_token).
class job_store {
public:
  // Implementations stop in their destructor as shutdown() does.
  virtual ~job_store() = default;
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
  virtual void shutdown() noexcept = 0;
  // Whether the last attempt to reach the database failed (it is down and
  // being reconnected); false again after the next success.
  virtual bool unreachable() const noexcept = 0;

  // Queues a job; the future yields its id once the transaction holding it
  // has committed (synchronous_commit on: it is on disk). A submit_token
  // already in the database yields that job's id and adds nothing.
  // Throws invalid_job at once for a request the database could never
  // accept; the future throws store_unavailable if the database stays away,
  // or store_error if the database refused the job.
  virtual std::future<std::int64_t> submit_async(job_submission request) = 0;
  // submit_async(request).get().
  virtual std::int64_t submit(job_submission request) = 0;
  // Like submit_async, but calls done(id, created, nullptr) once committed,
  // or done(0, false, error) with the exception submit_async's future would
  // throw. `created` is false when the submit_token was already there (a
  // client's retry: the id is the earlier job's). After a COMMIT whose
  // outcome had to be resolved, jobs found by their tokens count as created.
  // It runs on a thread of the store's (never the caller's, so the caller
  // may hold its own locks): it must be quick and must not wait for the
  // store. Throws invalid_job at once, as submit_async does (done is then
  // never called).
  using submit_callback = std::function<void(std::int64_t id, bool created, std::exception_ptr error)>;
  virtual void submit_then(job_submission request, submit_callback done) = 0;

  // Moves a job to t.to and appends the event, in one transaction. Sets
  // start_time on entering RUNNING (first time per attempt), end_time and
  // the exit status on final states, clears the map when the job stops
  // holding processors; RUNNING -> RESIZING keeps the old map and records
  // the asked-for one (both reserved) until RESIZING -> RUNNING. Returns the
  // event written. Throws not_found, unexpected_state (t.from given and
  // different), illegal_transition (not in core::is_legal_transition),
  // invalid_job (a map where none belongs, or missing where one is needed,
  // or exit status on a non-final state); on any of these nothing is written.
  virtual history_event transition(const job_transition& t) = 0;
  // Several transitions (of different jobs) in one transaction, e.g. every
  // resize of one scheduling decision: all are written or, if any fails
  // (same errors as transition, or invalid_job for a job listed twice),
  // none is. Returns the events in the order given.
  virtual std::vector<history_event> transition_all(const std::vector<job_transition>& ts) = 0;

  // Writes a control_change and appends its event, in one transaction. Throws
  // not_found, or invalid_job (a final job; an empty reason; min > max; a
  // rigid job given min != max; a control that does not fit the job's
  // state) and writes nothing.
  virtual history_event update_job(const control_change& u) = 0;

  // Splits s.tasks off the compact array record s.array_id, in one
  // transaction: one PENDING job per index (a copy of the record's script,
  // arguments, environment, sizes and fctl mark, with task_geometry[i] and
  // the token "<record's token>#<index>", each with its "submitted" event),
  // and the record's geometry becomes s.rest_geometry. Returns the tasks'
  // ids in the order of s.tasks, then the new record's if one was asked
  // (s.new_record_geometry: a copy like the tasks', token "<token>#rest").
  // Idempotent: a task whose token exists
  // already is not inserted again (its id is returned). Throws not_found (no
  // such job), invalid_job (sizes differ, or the record is not PENDING or
  // not compact, e.g. cancelled meanwhile: nothing is written),
  // store_unavailable.
  virtual std::vector<std::int64_t> split_array(const array_split& s) = 0;

  // The job in full, or nullopt.
  virtual std::optional<job_record> get_job(std::int64_t id) = 0;
  // The job's events, oldest first (empty for an unknown job).
  virtual std::vector<history_event> job_history(std::int64_t id) = 0;
  // fjobs: jobs matching the filter, by id.
  virtual std::vector<job_summary> list_jobs(const job_filter& filter = {}) = 0;
  // Stores what a node measured of a job (replacing an earlier report of the
  // same job from the same node). Throws std::invalid_argument for negative
  // amounts or an empty node name; store_unavailable.
  virtual void record_measurement(const job_measurement& m) = 0;
  // The usage of each listed job that has any (a usage record or a
  // measurement of its latest run), in no particular order.
  virtual std::vector<job_usage> job_usage_of(const std::vector<std::int64_t>& ids) = 0;
  // Recovery: every live job (PENDING, RUNNING, RESIZING, SUSPENDED) and
  // every node, from one snapshot.
  virtual live_state load_live_state() = 0;

  // Registers a node, numbering its processors after the last node's. A
  // node registering again under its name keeps its numbers and comes back
  // UP; with a different processor count it is invalid_job (renumbering
  // would move running jobs' processors).
  virtual node_record register_node(const node_request& request) = 0;
  // Records a heartbeat now. Throws not_found.
  virtual void heartbeat(std::string_view name) = 0;
  // Throws not_found.
  virtual void set_node_state(std::string_view name, node_state state) = 0;
  virtual std::vector<node_record> list_nodes() = 0;

  struct counters {
    std::uint64_t batches = 0;      // submission transactions committed
    std::uint64_t submissions = 0;  // submissions acknowledged
    std::uint64_t reconnects = 0;   // connections re-established
    std::uint64_t in_doubt = 0;     // COMMITs with unknown outcome, resolved
  };
  virtual counters stats() const = 0;

protected:
  job_store() = default;
};

}  // namespace aqs::store
