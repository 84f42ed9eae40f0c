// write_pipeline: the strand, the writer and the batch (write_pipeline.hpp).
#include "daemon/write_pipeline.hpp"

#include <boost/asio/post.hpp>

#include "logging/log.hpp"

namespace aqs::daemon {

namespace asio = boost::asio;

write_pipeline::write_pipeline(asio::io_context& io, store::job_store& store)
    : io_(io), store_(store), strand_(asio::make_strand(io)) {}

void write_pipeline::watch_strand(loop_watch::options o) {
  if (watch_ || o.threshold.count() <= 0) return;
  watch_ = std::make_unique<loop_watch>("the scheduling strand", strand_, o);
  watch_->start();
}

void write_pipeline::stop() {
  if (watch_) watch_->stop();
  if (stopped_.exchange(true)) return;
  {
    std::lock_guard lock(retry_mu_);  // the writer tests stopped_ under it before it waits
  }
  // Timers and handlers already queued on the strand see stopped_ and do
  // nothing.
  retry_cv_.notify_all();
  // Before the pools: a write waiting for a dead database gives up at once,
  // and no submission callback can run once the owner is gone.
  store_.shutdown();
  writer_.join();
  readers_.join();
}

void write_pipeline::post(std::function<void()> f, const char* label) {
  asio::post(strand_, [this, f = std::move(f), label] {
    if (stopped_) return;
    const loop_watch::running_scope running(watch_.get(), label);
    try {
      f();
    } catch (const std::exception& e) {
      logging::warn("internal error while handling an event: {}", e.what());
    }
  });
}

void write_pipeline::on_readers(std::function<void()> f) { asio::post(readers_, std::move(f)); }

void write_pipeline::on_writer(std::function<void()> f) { asio::post(writer_, std::move(f)); }

void write_pipeline::fatal(const std::string& why) {
  failed_ = true;
  if (hooks_.fatal) hooks_.fatal(why);
}

void write_pipeline::transition(std::int64_t job, core::job_state to, std::optional<core::processor_set> procs,
                                std::string reason, std::optional<std::int32_t> exit_code,
                                std::optional<std::int32_t> signal) {
  store::job_transition t;
  t.job_id = job;
  t.to = to;
  t.procs = std::move(procs);
  t.reason = std::move(reason);
  t.exit_code = exit_code;
  t.term_signal = signal;
  batch_.transitions.push_back(std::move(t));
}

void write_pipeline::record_update(store::control_change u) {
  batch_.store_ops.push_back([u = std::move(u)](store::job_store& s) {
    try {
      s.update_job(u);
    } catch (const store::store_unavailable&) {
      throw;  // retried until the store is back
    } catch (const store::store_error& e) {
      // The strand checked the job first; a refusal here is a bug, and not
      // worth stopping the daemon for.
      logging::warn("job {}: update refused by the store: {}", u.job_id, e.what());
    }
  });
}

void write_pipeline::kick() {
  if (writing_ || stopped_ || held_) return;
  if (decide_needed_) {
    // One decision for everything already waiting on the strand: a burst of
    // submissions or job ends is decided once, not once per event.
    if (!decision_posted_) {
      decision_posted_ = true;
      post(
          [this] {
            decision_posted_ = false;
            decide_and_write();
          },
          "a scheduling decision");
    }
    return;
  }
  decide_and_write();
}

void write_pipeline::decide_and_write() {
  if (writing_ || stopped_ || held_) return;
  if (decide_needed_) {
    decide_needed_ = false;
    if (hooks_.decide) hooks_.decide();
  }
  if (batch_.empty()) return;
  batch b = std::move(batch_);
  batch_ = batch{};
  write_batch(std::move(b));
}

bool write_pipeline::until_stored(const std::function<void()>& op) {
  auto delay = std::chrono::milliseconds(50);
  std::optional<std::chrono::steady_clock::time_point> down_since;
  for (;;) {
    if (stopped_) return false;
    try {
      op();
      if (down_since) {
        logging::info("the job store is back after {:.1f} s; carrying on",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - *down_since).count());
      }
      return true;
    } catch (const store::store_unavailable& e) {
      if (!down_since) {
        down_since = std::chrono::steady_clock::now();
        logging::warn("the job store is unavailable ({}); holding the writes and retrying until it is back", e.what());
      }
    }
    std::unique_lock lock(retry_mu_);
    retry_cv_.wait_for(lock, delay, [this] { return stopped_.load(); });
    delay = std::min(delay * 2, std::chrono::milliseconds(2000));
  }
}

// One transition_all per step, each job at most once per step (the store
// refuses a job twice in one call): a requeue is NODE_FAIL, then PENDING,
// then maybe RUNNING again, in three steps. A step the database could not
// take is retried until it can (steps already written are not written
// again); false if the controller stopped first.
bool write_pipeline::write_transitions(const std::vector<store::job_transition>& all) {
  std::vector<std::vector<store::job_transition>> steps;
  std::unordered_map<std::int64_t, std::size_t> seen;
  for (const auto& t : all) {
    const std::size_t k = seen[t.job_id]++;
    if (steps.size() <= k) steps.resize(k + 1);
    steps[k].push_back(t);
  }
  for (const auto& step : steps) {
    const bool written = until_stored([&] {
      try {
        store_.transition_all(step);
      } catch (const store::store_unavailable&) {
        throw;
      } catch (const store::store_error& e) {
        // A bug somewhere (the core allowed what the store refuses), or a
        // retry of a step that landed in part: keep every transition that
        // is valid rather than losing the whole batch.
        logging::warn("a batch of {} transitions was refused ({}); writing them one by one", step.size(), e.what());
        for (const auto& t : step) {
          try {
            store_.transition(t);
          } catch (const store::store_unavailable&) {
            throw;
          } catch (const store::store_error& one) {
            logging::warn("job {}: transition to {} refused: {}", t.job_id, core::to_string(t.to), one.what());
          }
        }
      }
    });
    if (!written) return false;
  }
  return true;
}

void write_pipeline::write_batch(batch b) {
  writing_ = true;
  auto shared = std::make_shared<batch>(std::move(b));
  asio::post(writer_, [this, shared] {
    try {
      // Stopped before all was written: nothing of it was acted on or
      // acknowledged, so nothing is lost (agents resend their reports).
      const auto t0 = std::chrono::steady_clock::now();
      for (auto& op : shared->store_ops) {
        if (!until_stored([&] { op(store_); })) return;
      }
      if (!write_transitions(shared->transitions)) return;
      if (!shared->transitions.empty() || !shared->store_ops.empty()) {
        stats_.committed(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    } catch (const std::exception& e) {
      post([this, why = std::string(e.what())] { fatal("the job store failed: " + why); });
      return;
    }
    post([this, shared] { committed(std::move(*shared)); }, "what waited for a commit (launches, replies)");
  });
}

void write_pipeline::committed(batch b) {
  writing_ = false;
  for (auto& f : b.after) {
    try {
      f();
    } catch (const std::exception& e) {
      logging::warn("internal error after a commit: {}", e.what());
    }
  }
  kick();
}

void write_pipeline::store_task(std::function<void(store::job_store&)> op, std::function<void()> then) {
  asio::post(writer_, [this, op = std::move(op), then = std::move(then)] {
    try {
      if (!until_stored([&] { op(store_); })) return;
    } catch (const std::exception& e) {
      post([this, why = std::string(e.what())] { fatal("the job store failed: " + why); });
      return;
    }
    post(then);
  });
}

}  // namespace aqs::daemon
