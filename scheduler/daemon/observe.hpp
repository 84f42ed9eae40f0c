// observe: what the controller shows of its state to a read-only front (the
// HTTP API, the dashboard, /metrics): a snapshot of nodes, processors and
// live jobs taken on the strand, and job changes as they are committed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/job_state.hpp"

namespace aqs::daemon {

struct snapshot_node {
  std::string name;
  std::string state;  // UP, DRAIN, DOWN
  std::int64_t first_proc = 0;
  std::int64_t nprocs = 0;
  bool connected = false;
  double heartbeat_age_s = 0;  // since its agent was last heard from
  // For each of its processors: the job holding it (0: none), and whether
  // it is reserved (given up by a resizing job, not yet acknowledged).
  std::vector<std::int64_t> holder;
  std::vector<bool> reserved;
};

struct snapshot_job {
  std::int64_t id = 0;
  std::string user;
  core::job_state state = core::job_state::pending;
  bool adaptive = false;
  std::int64_t min_pe = 1;
  std::int64_t max_pe = 1;
  std::string procs;   // 0/1 map it holds ("" when none)
  std::string target;  // while RESIZING: the map it was sent
};

struct cluster_snapshot {
  std::vector<snapshot_node> nodes;
  // The jobs holding processors (running, resizing, suspended), by id: a
  // queue of 10,000 pending jobs is listed by the job list, not here.
  std::vector<snapshot_job> jobs;
  // Live jobs by state (pending includes those held on dependencies).
  std::int64_t jobs_pending = 0, jobs_running = 0, jobs_resizing = 0, jobs_suspended = 0;
  std::int64_t cpus_total = 0, cpus_alloc = 0, cpus_idle = 0, cpus_reserved = 0, cpus_unavailable = 0;
  double taken_at = 0;  // Unix seconds
};

// A job changed state or map (committed to the store).
struct job_change {
  std::int64_t job_id = 0;
  core::job_state state = core::job_state::pending;
  std::optional<std::int32_t> exit_code;
  std::optional<std::int32_t> signal;
  std::string procs;   // the map it holds now ("" when none)
  std::string target;  // RESIZING: the map it was sent
  double time = 0;     // Unix seconds
};

using change_sink = std::function<void(const job_change&)>;

// What a Faucets server is told about this cluster (daemon/faucets_uplink):
// room now, room adaptive jobs could give up, the queue, the largest job.
struct capacity_summary {
  std::int64_t procs_total = 0, procs_free = 0;  // usable processors (nodes UP), free of any job
  std::int64_t gpus_total = 0, gpus_free = 0;
  std::int64_t shrinkable = 0;  // processors adaptive jobs hold above their minimum
  std::int64_t running_jobs = 0, pending_jobs = 0, pending_procs = 0;
  std::map<std::string, std::int64_t> pending_by_partition;
  std::int64_t max_job_procs = 0, max_job_gpus = 0;
  std::int64_t nodes_up = 0;
};

// A live job a Faucets server placed here that the server did not list as
// its own when it came back (faucets_gate::follow).
struct faucets_copy {
  std::int64_t job_id = 0;
  std::string submit_token;  // "faucets:CLUSTER:FID.ATTEMPT"
  core::job_state state = core::job_state::pending;
  std::int64_t nprocs = 0;
  bool waiting = false;  // behind the gate: it runs only once released
};

}  // namespace aqs::daemon
