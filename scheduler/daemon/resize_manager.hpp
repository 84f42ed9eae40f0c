// resize_manager: the resize part of aqsd: two-phase resizes of adaptive
// jobs. A resized job is RESIZING with its new map sent to its shim until
// the shim acknowledges or refuses it, or the resize times out (then it
// keeps its old processors); a map the shim has claimed (resize_begin) has
// the longer claim timeout to be acknowledged, or the job, on uncertain
// processors, is killed. An expand the shim gives up (resize_refused after
// its claim) is undone: the job keeps its map, and after a few in a row it
// is offered no more growth. An --adaptive job with no shim is made rigid. It owns the per-job resize state (resize_tracker:
// the shim's connection, map epochs, the timers).
//
// The job's cpusets follow its map (job_cpus to the agents of the nodes of
// its old and new maps): widened to both maps' cpus before the new map goes
// to the shim, narrowed to the new map's once the shim acknowledges it, set
// back to the old map's when the resize is not applied (refused, abandoned,
// timed out); an agent that registers is told the cpus of the adaptive jobs
// it keeps.
//
// Rule: on the scheduling strand only; its timers fire there. The controller
// wires it and the routing table sends it `resize_begin`, `resize_ack` and
// `resize_refused` from role=job peers (each checked here to speak for its
// job). It reads the core and applies the core's resize events; it writes
// through the `pipeline`, reads hosts and cpus from the node part and sends
// agents job_cpus through it (hooked to its registrations), and asks
// `resize_jobs` about jobs (live or not; killing one).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>

#include "core/scheduler.hpp"
#include "daemon/clock.hpp"
#include "daemon/metrics.hpp"
#include "daemon/node_manager.hpp"
#include "daemon/pipeline.hpp"
#include "daemon/resize_tracker.hpp"

namespace aqs::daemon {

// What the resize part asks of the jobs' side (the controller implements it).
class resize_jobs {
public:
  // Whether the job is live (not ended).
  virtual bool is_live(std::int64_t job) const = 0;
  // Kills the job everywhere (SIGKILL, no grace) and ends it FAILED with
  // `reason`: its ranks may run on either map.
  virtual void kill_uncertain(std::int64_t job, std::string reason) = 0;

protected:
  ~resize_jobs() = default;
};

struct resize_timeouts {
  // An adaptive job that has not applied a new map by then keeps its old one.
  std::chrono::milliseconds resize{30'000};
  // A claimed map not acknowledged by then: the job is killed (the last
  // resort: the shim gives an expand it cannot finish up by itself, after
  // its own bound, $AQS_EXPAND_TIMEOUT, 20 s by default, and refuses it).
  std::chrono::milliseconds claim{300'000};
};

// An --adaptive job whose shim has not connected this long after it started
// (and after aqsd started: shims reconnect to a restarted aqsd) is a plain
// program that cannot apply maps: it is made rigid at its size instead of
// being resized (docs/user-guide.md, "When a resize cannot be done").
inline constexpr std::chrono::milliseconds k_no_shim_grace{10'000};
// Expands given up one after the other before aqsd stops offering the job
// growth (it lowers its maximum to its size; fctl update --max raises it).
inline constexpr int k_abandoned_expands_limit = 3;

class resize_manager {
public:
  // Timers run on `strand` through `time`.
  resize_manager(core::scheduler& core, clock& time, boost::asio::any_io_executor strand, pipeline& out,
                 resize_jobs& jobs, node_manager& nodes, metrics& stats, resize_timeouts timeouts);

  // A decision resizes job `id` to `to`: RESIZING, then (after the commit)
  // the map goes to its shim and its timeout starts.
  void begin(std::int64_t id, const core::processor_set& to);
  // The job's shim connected (again: aqsd or its connection restarted),
  // having seen maps up to `seen`; a resize under way is sent to it.
  void attach_shim(std::int64_t id, const std::shared_ptr<connection>& c, std::int64_t seen);
  // `c` closed: if it was the job's shim, the job has none now.
  void detach_shim(std::int64_t id, const connection& c) { tracker_.detach_shim(id, c); }
  // Recovery: the job's shim had claimed map `epoch` (to `target`) when aqsd
  // stopped; it is RESIZING again until the job says how it went. Throws
  // what core::scheduler::restore_resize throws.
  void resume_claimed(std::int64_t id, std::int64_t epoch, const core::processor_set& target);
  // Recovery: the job's maps went up to `seen` before aqsd restarted.
  void raise_epoch(std::int64_t id, std::int64_t seen) { tracker_.raise_epoch(id, seen); }
  // The resize ended some other way (suspended, requeued, held back): no
  // timeout fires for it.
  void disarm(std::int64_t id) { tracker_.disarm(id); }
  // The job ended: nothing of it is kept.
  void forget(std::int64_t id) { tracker_.forget(id); }
  // The epoch of the job's newest map, 0 before the first.
  std::int64_t epoch(std::int64_t id) const { return tracker_.epoch(id); }

  // role=job messages.
  void handle_resize_begin(const std::shared_ptr<connection>& c, const protocol::resize_begin& m);
  void handle_resize_ack(const std::shared_ptr<connection>& c, const protocol::resize_ack& m);
  void handle_resize_refused(const std::shared_ptr<connection>& c, const protocol::resize_refused& m);

private:
  void send_map(std::int64_t id);
  // job_cpus to the agent of each UP node holding processors of `where`:
  // job `id` may use there the cpus of its processors in `use`.
  void tell_cpus(std::int64_t id, const core::processor_set& where, const core::processor_set& use);
  // Node `index`'s agent registered keeping jobs `kept`: each adaptive one
  // with processors there is told its cpus now (the agent or aqsd may have
  // restarted since the last job_cpus; repeating one changes nothing).
  void agent_registered(std::size_t index, const std::vector<std::int64_t>& kept);
  // The job if `c` speaks for it and `epoch` is its resize under way; else
  // replies the error to request `rid` and returns null.
  const core::job* current_resize(const std::shared_ptr<connection>& c, std::int64_t rid, std::int64_t job_id,
                                  std::int64_t epoch);
  // The resize of `id` ends without a change: it keeps its processors.
  void keep_old_processors(std::int64_t id, const std::string& note);
  // Whether job `j` should have shown a shim by now and has not.
  bool shim_overdue(const core::job& j) const;
  // The resize the core began for `id` is withdrawn and the job's range
  // becomes [min, max] (stored, with `note` in its history).
  void withdraw_and_limit(std::int64_t id, std::size_t min, std::size_t max, const std::string& note);
  // The job's range becomes [min, max] in the core and the store.
  void limit_range(std::int64_t id, std::size_t min, std::size_t max, const std::string& note);
  void arm(std::int64_t id, std::int64_t epoch);
  void arm_claim(std::int64_t id, std::int64_t epoch);
  void expired(std::int64_t id, std::int64_t epoch);
  void claim_expired(std::int64_t id, std::int64_t epoch);

  core::scheduler& core_;
  clock& clock_;
  pipeline& out_;
  resize_jobs& jobs_;
  node_manager& nodes_;
  metrics& stats_;
  resize_timeouts timeouts_;
  resize_tracker tracker_;
};

}  // namespace aqs::daemon
