// pipeline: the narrow interface a part of aqsd uses to have its changes
// written and acted on: the controller's write pipeline (controller.hpp).
//
// Rule: called on the scheduling strand only, by the parts the controller
// wires (node_manager, resize_manager, ...). A part queues what it changed
// (transitions, job updates, store operations) and what to do once that is
// committed; it never writes to the store or decides by itself, so the
// crash-safety argument of the pipeline holds for every part.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/job_state.hpp"
#include "core/processor_set.hpp"
#include "daemon_base/dispatcher.hpp"
#include "store/job_store.hpp"

namespace aqs::daemon {

class pipeline {
public:
  // Queues a state change of `job` in the current batch.
  virtual void transition(std::int64_t job, core::job_state to, std::optional<core::processor_set> procs,
                          std::string reason, std::optional<std::int32_t> exit_code = std::nullopt,
                          std::optional<std::int32_t> signal = std::nullopt) = 0;
  // Queues a store::control_change (control field, history note) in the batch.
  virtual void record_update(store::control_change u) = 0;
  // Queues a store operation in the batch, before its transitions.
  virtual void store_op(std::function<void(store::job_store&)> op) = 0;
  // Runs `op` on the writer thread (retried while the store is away), then
  // `then` on the strand; a store failure that is not an outage is fatal.
  virtual void store_task(std::function<void(store::job_store&)> op, std::function<void()> then) = 0;
  // Runs `f` on the strand once the current batch is committed.
  virtual void after_commit(std::function<void()> f) = 0;
  // Writes the batch if nothing is being written (no new decision).
  virtual void kick() = 0;
  // The state changed in a way that may free or need processors: decide
  // again (coalesced), then write.
  virtual void decide() = 0;
  // Tells watchers and change sinks of a committed change of a job.
  virtual void notify(std::int64_t id, core::job_state state, std::optional<std::int32_t> code,
                      std::optional<std::int32_t> signal, const core::processor_set* procs) = 0;
  // Something aqsd cannot go on from: it stops (a restart recovers).
  virtual void fatal(const std::string& why) = 0;
  // stop() was called: timers that fire now do nothing.
  virtual bool stopped() const noexcept = 0;

protected:
  ~pipeline() = default;
};

// The error reply to request `id`.
inline void reply_error(const std::shared_ptr<connection>& c, std::int64_t id, protocol::error_code code,
                        std::string message) {
  c->send(protocol::error{id, code, std::move(message)});
}

}  // namespace aqs::daemon
