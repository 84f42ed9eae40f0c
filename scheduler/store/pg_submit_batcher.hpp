// pg_submit_batcher: durable submission for the PostgreSQL job store: a queue
// drained by committer threads, each committing whole batches at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "store/pg_session.hpp"

namespace aqs::store {

// A batch forms while the busy committers wait for their WAL flush; several
// waiting at once are flushed by PostgreSQL together. Thread-safe.
class pg_submit_batcher {
public:
  // Starts shared.options.committers threads, each with a connection of its
  // own (made on its first batch).
  explicit pg_submit_batcher(pg_shared& shared);
  // stop().
  ~pg_submit_batcher();
  pg_submit_batcher(const pg_submit_batcher&) = delete;
  pg_submit_batcher& operator=(const pg_submit_batcher&) = delete;

  // job_store::submit_async and submit_then: invalid_job at once for a bad
  // request, store_unavailable at once after stop(); a request without a
  // submit_token gets one.
  std::future<std::int64_t> submit_async(job_submission request);
  void submit_then(job_submission request, job_store::submit_callback done);

  // Takes no more submissions, fails those queued and not sent with
  // store_unavailable, and returns once every committer thread has finished
  // (a batch being committed finishes its current attempt). Idempotent.
  void stop() noexcept;

private:
  struct pending_submit {
    job_submission request;
    std::promise<std::int64_t> promise;
    job_store::submit_callback done;  // set: report here instead of through the promise
    void resolve(std::int64_t id, bool created);
    void reject(std::exception_ptr e);
  };
  void enqueue(pending_submit p);
  void committer_loop(unsigned index);
  void commit_batch(pg_session& s, std::vector<pending_submit>& batch);
  // Ids in the batch's order; created[i] tells whether job i was inserted
  // by this batch (false: its token was already there).
  std::vector<std::int64_t> insert_batch(pg_session& s, const std::vector<pending_submit>& batch,
                                         std::vector<bool>& created);

  pg_shared& shared_;
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<pending_submit> queue_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<pg_session>> sessions_;  // one per committer
  std::vector<std::thread> committers_;
  std::once_flag stop_once_;
};

}  // namespace aqs::store
