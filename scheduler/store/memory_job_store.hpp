// memory_job_store: a job_store held in memory, with injectable database
// faults, for tests of the daemon without PostgreSQL.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "store/job_rules.hpp"
#include "store/job_store.hpp"

namespace aqs::store {

struct memory_job_store_options {
  // The time written into records and events (the PostgreSQL store's now());
  // tests may pass a virtual clock. Empty: the system clock.
  std::function<time_point()> clock;
};

// The job_store contracts hold, with the same checks as pg_job_store (the
// rules in job_rules) and the same numbering: job, event and node ids from 1
// in creation order, processors numbered in registration order.
//
// One mutex guards everything: every call is one "transaction". Submissions
// are applied during submit_async/submit_then, so a job's id is fixed when
// the call returns; submit_async's future is ready at once. submit_then's
// callbacks are delivered by one worker thread of the store's, in the order
// of the submissions, never on the caller's thread (the caller may hold its
// own locks, as the daemon does).
//
// Faults: a test can make writes fail the ways a PostgreSQL store's can
// (inject), or take the "database" down (set_down). stats() counts a batch
// per submission, and a reconnect each time set_down(false) ends an outage;
// in_doubt stays 0 (an injected in-doubt fault is one the store failed to
// resolve).
class memory_job_store final : public job_store {
public:
  enum class fault {
    // The write is not applied and the call throws store_unavailable: the
    // connection was lost before COMMIT and could not be re-established in
    // time.
    commit_lost,
    // The write IS applied, but the call throws store_unavailable: COMMIT's
    // answer was lost and the store could not find out whether it landed. A
    // submission so failed reports through its future/callback; retried with
    // the same submit_token it yields the stored job (created == false).
    commit_in_doubt,
  };
  // inject's count for a fault that lasts until clear_faults().
  static constexpr std::size_t always = std::numeric_limits<std::size_t>::max();

  explicit memory_job_store(memory_job_store_options options = {});
  // shutdown().
  ~memory_job_store() override;

  // The next `writes` writes fail with `f` (always: every write until
  // clear_faults()). Injections queue: inject(commit_lost, 1) then
  // inject(commit_in_doubt, 1) fails the next write one way and the write
  // after it the other. A write is a submission, a transition or a batch of
  // them, register_node, heartbeat or set_node_state; it meets its fault
  // only once it passed every check (a refused write throws its own error
  // and leaves the fault for the next one). Reads never fail this way.
  void inject(fault f, std::size_t writes = 1);
  // Forgets every injected fault not yet met (not an outage: see set_down).
  void clear_faults();
  // Writes that will still fail: the sum of the counts queued (always if
  // one is open-ended).
  std::size_t faults_pending() const;
  // down: the connection is gone; every operation (reads too) throws
  // store_unavailable, submissions through their future or callback, and
  // unreachable() is true until set_down(false). Checks that need no
  // database still come first (invalid_job is thrown at once, as ever).
  void set_down(bool down);
  // Returns once every submit_then callback queued so far has run. Not from
  // inside a callback.
  void wait_callbacks();

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
  // What a write does at its COMMIT: its fault, if one is queued.
  enum class commit_outcome { ok, lost, in_doubt };
  // Throws store_unavailable if down. Caller holds mu_.
  void check_up() const;
  // Consumes the next injected fault, if any. Caller holds mu_.
  commit_outcome next_commit();
  // Throws the store_unavailable a write that met its fault gets.
  [[noreturn]] static void fail_commit(commit_outcome outcome);
  time_point now() const;
  // Stores the job (or finds it by token). Caller holds mu_; may throw
  // store_unavailable as a submission's fault.
  std::int64_t submit_locked(job_submission& request, bool& created);
  history_event apply_locked(const job_transition& t, const planned_transition& p, time_point at);
  planned_transition plan_locked(const job_transition& t) const;
  // A write to one node's row (heartbeat, state): checks, fault, change.
  void update_node(std::string_view name, const std::function<void(node_record&)>& change);
  // Runs `done` on the callback thread.
  void deliver(std::function<void()> done);
  void callback_loop();

  memory_job_store_options options_;

  mutable std::mutex mu_;
  std::map<std::int64_t, job_record> jobs_;  // by id: listings walk it in order
  std::unordered_map<std::string, std::int64_t> by_token_;
  std::map<std::int64_t, std::vector<history_event>> events_;
  // Measurements by job and node, with the time each was recorded.
  std::map<std::pair<std::int64_t, std::string>, std::pair<job_measurement, time_point>> measurements_;
  std::vector<node_record> nodes_;  // in registration order
  const std::string cluster_id_;    // random, as a new database's (sql/007)
  std::int64_t next_job_ = 1;
  std::int64_t next_event_ = 1;
  std::int32_t next_node_ = 1;
  std::deque<std::pair<fault, std::size_t>> faults_;
  std::atomic<bool> down_{false};  // atomic: unreachable() takes no lock
  bool shut_down_ = false;
  std::once_flag shutdown_once_;
  counters stats_;

  std::mutex callbacks_mu_;
  std::condition_variable callbacks_cv_;
  std::deque<std::function<void()>> callbacks_;
  bool delivering_ = false;  // the worker is running one
  bool stopping_ = false;
  std::thread callback_thread_;
};

}  // namespace aqs::store
