// write_pipeline: the part of aqsd that owns the scheduling strand, the
// store's writer thread and read pool, the batch of changes being
// gathered, and aqsd's counters (metrics, which it counts its commits in and
// every part counts its own events in); the one implementation of
// `pipeline` (pipeline.hpp).
//
// The pipeline of a scheduling event (the crash-safety argument):
//   1. the event is applied to the core and its store transitions are
//      queued in the current batch (nothing is acted on yet);
//   2. when no batch is being written, the decider runs (the core decides
//      and its decisions' transitions join the batch), and the batch is
//      written in one transaction per step (group commit of everything that
//      piled up);
//   3. only after that COMMIT are launches, kills, maps, replies and
//      notifications sent (after_commit).
// A crash before 3 loses no acknowledged fact: agents resend unacknowledged
// reports, and nothing was launched that the store does not know about.
//
// Rule: the batch, the decision flags and the hold are touched on the strand
// only; the writer thread runs store operations in order; the read pool runs
// reads that answer clients and posts their results back to the strand.
// While the store is unavailable, the writer waits and retries, so nothing
// queued is lost; stop() abandons what was never acknowledged.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include "daemon/metrics.hpp"
#include "daemon_base/loop_watch.hpp"
#include "daemon/pipeline.hpp"
#include "store/job_store.hpp"

namespace aqs::daemon {

class write_pipeline final : public pipeline {
public:
  using strand_type = boost::asio::strand<boost::asio::io_context::executor_type>;
  // What the pipeline asks of its owner, set before start: `decide` runs the
  // core and queues its decisions (on the strand); `notify` tells watchers
  // of a committed change; `fatal` stops the daemon.
  struct hooks {
    std::function<void()> decide;
    std::function<void(std::int64_t, core::job_state, std::optional<std::int32_t>, std::optional<std::int32_t>,
                       const core::processor_set*)>
        notify;
    std::function<void(const std::string&)> fatal;
  };

  write_pipeline(boost::asio::io_context& io, store::job_store& store);
  ~write_pipeline() { stop(); }

  void set_hooks(hooks h) { hooks_ = std::move(h); }
  // aqsd's counters and latencies (/metrics): the pipeline counts its
  // commits in them, the parts their own events; thread-safe.
  metrics& stats() noexcept { return stats_; }
  const metrics& stats() const noexcept { return stats_; }
  strand_type& strand() noexcept { return strand_; }
  boost::asio::io_context& io() noexcept { return io_; }
  store::job_store& store() noexcept { return store_; }

  // Runs `f` on the strand (nothing once stopped; an exception is logged).
  // `label` (a static string: a message type) names it in the loop watch's
  // report if it holds the strand too long.
  void post(std::function<void()> f, const char* label = nullptr);
  // Logs every stall of the strand longer than `o.threshold` with what held
  // it (loop_watch.hpp); off until called, and with a threshold of 0.
  void watch_strand(loop_watch::options o);
  // Runs `f` on the read pool (store reads that answer clients).
  void on_readers(std::function<void()> f);
  // Runs `f` on the writer thread, in order with the batches' writes.
  void on_writer(std::function<void()> f);
  // Recovery: no decision and no write while held.
  void hold(bool on) { held_ = on; }
  // Marks that the core must decide again at the next kick (no kick now).
  void want_decision() { decide_needed_ = true; }
  // Stops the strand's work and the pools; bounded even when the database
  // is down (a write waiting for it is abandoned: it was never acknowledged).
  void stop();
  // A fatal store error stopped the daemon.
  bool failed() const noexcept { return failed_; }

  // pipeline
  void transition(std::int64_t job, core::job_state to, std::optional<core::processor_set> procs, std::string reason,
                  std::optional<std::int32_t> exit_code = std::nullopt,
                  std::optional<std::int32_t> signal = std::nullopt) override;
  void record_update(store::control_change u) override;
  void store_op(std::function<void(store::job_store&)> op) override { batch_.store_ops.push_back(std::move(op)); }
  void store_task(std::function<void(store::job_store&)> op, std::function<void()> then) override;
  void after_commit(std::function<void()> f) override { batch_.after.push_back(std::move(f)); }
  void kick() override;
  void decide() override {
    decide_needed_ = true;
    kick();
  }
  void notify(std::int64_t id, core::job_state state, std::optional<std::int32_t> code,
              std::optional<std::int32_t> signal, const core::processor_set* procs) override {
    if (hooks_.notify) hooks_.notify(id, state, code, signal, procs);
  }
  void fatal(const std::string& why) override;
  bool stopped() const noexcept override { return stopped_; }

private:
  struct batch {
    std::vector<store::job_transition> transitions;
    std::vector<std::function<void(store::job_store&)>> store_ops;  // before the transitions
    std::vector<std::function<void()>> after;                       // on the strand, after COMMIT
    bool empty() const { return transitions.empty() && store_ops.empty() && after.empty(); }
  };
  void decide_and_write();
  void write_batch(batch b);
  void committed(batch b);
  // On the writer thread: runs op until it succeeds, waiting while the store
  // is unavailable; false if stopped first. Other errors propagate.
  bool until_stored(const std::function<void()>& op);
  bool write_transitions(const std::vector<store::job_transition>& all);

  boost::asio::io_context& io_;
  store::job_store& store_;
  metrics stats_;
  hooks hooks_;
  strand_type strand_;
  boost::asio::thread_pool writer_{1};
  boost::asio::thread_pool readers_{2};
  std::unique_ptr<loop_watch> watch_;  // set before the strand runs work
  std::atomic<bool> stopped_{false};
  std::atomic<bool> failed_{false};
  std::mutex retry_mu_;  // wakes the writer from its wait for the store on stop()
  std::condition_variable retry_cv_;
  // On the strand:
  batch batch_;
  bool writing_ = false;
  bool held_ = false;
  bool decide_needed_ = false;
  bool decision_posted_ = false;
};

}  // namespace aqs::daemon
