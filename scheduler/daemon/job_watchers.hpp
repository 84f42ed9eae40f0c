// job_watchers: the part of aqsd that tells who listens of a job's changes:
// frun's watches (state events and the job's output, kept for an
// interactive job until its frun attaches) and the change sinks (the HTTP
// front's event stream, the Faucets uplink).
//
// Rule: on the scheduling strand only; the routing table sends it
// `watch_job` (clients) and `output` (agents: only from the node that runs
// the job's script or a step of it). The pipeline tells it every committed
// change (notify). It owns the watch list and the sinks, reads the core, the
// job table, the nodes and the steps, and reads a finished job's state from
// the store on the read pool; it changes no job.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/scheduler.hpp"
#include "daemon/clock.hpp"
#include "daemon/job_table.hpp"
#include "daemon/node_manager.hpp"
#include "daemon/observe.hpp"
#include "daemon/step_manager.hpp"
#include "daemon/watch_list.hpp"
#include "daemon/write_pipeline.hpp"

namespace aqs::daemon {

class job_watchers {
public:
  job_watchers(const core::scheduler& core, const job_table& jobs, const node_manager& nodes, const step_manager& steps,
               write_pipeline& pipe, clock& time)
      : core_(core), jobs_(jobs), nodes_(nodes), steps_(steps), pipe_(pipe), clock_(time) {}

  // Called with every committed state or map change; add before start.
  // Must not block. Every sink added is called.
  void on_change(change_sink sink) { sinks_.push_back(std::move(sink)); }

  void handle_watch(const std::shared_ptr<connection>& c, const protocol::watch_job& m);
  // Output from the node that runs the job's script or a step of it; what
  // another node says about a job that is not its own is dropped.
  void handle_output(const std::shared_ptr<connection>& c, const protocol::output& m);
  // A committed change of job `id`, to its watchers and every sink.
  void notify(std::int64_t id, core::job_state state, std::optional<std::int32_t> code,
              std::optional<std::int32_t> signal, const core::processor_set* procs);
  // `gone` closed: its watches end; the jobs it watched, to see whether an
  // interactive one lost its frun.
  std::vector<std::int64_t> drop(const connection& gone) { return watches_.drop(gone); }
  // The job ended: its watches and kept output go.
  void forget(std::int64_t id) { watches_.forget(id); }

private:
  const core::scheduler& core_;
  const job_table& jobs_;
  const node_manager& nodes_;
  const step_manager& steps_;
  write_pipeline& pipe_;
  clock& clock_;
  watch_list watches_;
  std::vector<change_sink> sinks_;
};

}  // namespace aqs::daemon
