// records: the plain structs the job store reads and writes.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster.hpp"
#include "core/job_state.hpp"
#include "core/processor_set.hpp"

namespace aqs::store {

// All times are wall-clock times of the database server (its now() at the
// commit that wrote them), microsecond resolution.
using time_point = std::chrono::time_point<std::chrono::system_clock, std::chrono::microseconds>;

// What a user submits. Every string must be valid UTF-8 without NUL bytes
// (PostgreSQL text cannot hold NUL): job_store::submit rejects anything else
// with invalid_job before it reaches the database.
struct job_submission {
  // Client idempotency key: submitting the same token twice yields the same
  // job id and one job. Empty: the store makes a random one.
  std::string submit_token{};
  std::string user_name{};
  std::int32_t uid = 0;
  std::int32_t gid = 0;
  std::string name{};
  std::string script{};               // batch script text, or empty for argv-only jobs
  std::vector<std::string> argv{};    // script arguments, or the command for --wrap/frun
  std::string workdir{};
  std::vector<std::string> environment{};  // "NAME=value" entries, order kept
  std::string stdout_pattern = "aqs-%j.out";
  std::string stderr_pattern{};
  std::int32_t min_pe = 1;
  std::int32_t max_pe = 1;
  bool adaptive = false;
  std::optional<std::int32_t> walltime_s{};
  std::int32_t priority = 0;
  bool requeue = false;             // go back to PENDING after NODE_FAIL
  std::vector<std::int64_t> dependencies{};  // afterok job ids
  std::int32_t umask = 022;         // the submitter's, applied to the job's files and processes
  // The protocol's job geometry as compact JSON text (tasks, nodes, memory,
  // GPUs, partition); empty: none asked. The store keeps it, the daemon reads it.
  std::string geometry{};

  friend bool operator==(const job_submission&, const job_submission&) = default;
};

// Where a job is now.
struct job_status {
  core::job_state state = core::job_state::pending;
  time_point submit_time{};
  std::optional<time_point> start_time{};  // first RUNNING of the current attempt
  std::optional<time_point> end_time{};    // set exactly in final states
  std::optional<std::int32_t> exit_code{};
  std::optional<std::int32_t> term_signal{};
  core::processor_set procs{};             // processors held; empty unless RUNNING/RESIZING/SUSPENDED
  std::optional<core::processor_set> resize_procs{};  // RESIZING only: the map asked for
  // fctl's mark on a live job: "" (none), "held-user", "held-admin" (a held
  // PENDING job) or "resume" (a SUSPENDED job waiting to run again); or
  // "claimed:N" on a RESIZING job whose shim has begun to apply map N
  // (claim_control). Any state change clears it.
  std::string control{};
};

// A job in full: what get_job returns.
struct job_record {
  std::int64_t id = 0;
  job_submission request{};
  job_status status{};
};

// A job without its bulky parts (script, argv, environment, output
// patterns): what recovery and the fjobs listing return, so that 100,000 jobs
// load fast whatever their scripts hold. get_job has the rest.
struct job_summary {
  std::int64_t id = 0;
  std::string user_name{};
  std::int32_t uid = 0;
  std::string name{};
  std::int32_t min_pe = 1;
  std::int32_t max_pe = 1;
  bool adaptive = false;
  std::optional<std::int32_t> walltime_s{};
  std::int32_t priority = 0;
  bool requeue = false;
  std::vector<std::int64_t> dependencies{};
  std::string geometry{};  // as job_submission::geometry: recovery places the job by it
  // As job_submission::submit_token: "faucets:..." marks a job a Faucets
  // server placed here (daemon/faucets_uplink), which recovery holds until
  // the server has said which of them are still its.
  std::string submit_token{};
  job_status status{};
};

// One line of a job's history: a state change or a resize.
struct history_event {
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  time_point time{};
  std::optional<core::job_state> old_state{};  // none for the submission
  core::job_state new_state = core::job_state::pending;
  core::processor_set old_procs{};
  core::processor_set new_procs{};
  std::string reason{};
  std::optional<std::int32_t> exit_code{};
  std::optional<std::int32_t> term_signal{};
};

// A state change asked of job_store::transition.
struct job_transition {
  std::int64_t job_id = 0;
  // If set, the job must be in this state now, else unexpected_state.
  std::optional<core::job_state> from{};
  core::job_state to = core::job_state::running;
  // The new map. Required to enter RUNNING from PENDING/NODE_FAIL and to
  // enter RESIZING (the map asked for). On RESIZING -> RUNNING it is the map
  // the job acknowledged; none means the map it was asked for. Ignored
  // (must be none) for states that hold no processors: their map is empty.
  std::optional<core::processor_set> procs{};
  std::string reason{};
  std::optional<std::int32_t> exit_code{};    // final states only
  std::optional<std::int32_t> term_signal{};  // final states only
};

// A change to a live job that is not a state change (fctl hold, release,
// resume, update; a job's own range request): the fields set are written
// and one event is appended with the job's state as both old and new state.
struct control_change {
  std::int64_t job_id = 0;
  std::optional<std::string> control{};    // "" clears it
  std::optional<std::int32_t> min_pe{}, max_pe{};
  std::optional<std::int32_t> walltime_s{};  // 0: no limit
  std::string reason{};                    // the event's text (required)
  // The task count of the job's geometry ("ntasks"): a rigid job sized with
  // -n N that is given a new size keeps its tasks in step; unset: unchanged.
  std::optional<std::int32_t> ntasks{};
};

// Tasks split off a job array's compact record (issue 28): an array whose
// tasks are not yet eligible is one PENDING row whose geometry holds the
// pending indices ("array": "5-99999%10"); as tasks become eligible they are
// split off into ordinary job rows, a bounded number at a time.
struct array_split {
  std::int64_t array_id = 0;                // the compact record split from
  std::vector<std::int64_t> tasks{};        // indices split off, in order
  std::vector<std::string> task_geometry{}; // each one's geometry (compact JSON), as tasks
  std::string rest_geometry{};              // the record's geometry afterwards
  // Also a new compact record for the indices left (when the record itself
  // becomes a task): its geometry; its token is "<record's token>#rest".
  std::optional<std::string> new_record_geometry{};
};

// A node's state is the core's (UP, DRAINED, DOWN: the same spellings in the
// nodes table).
using core::node_state;
using core::parse_node_state;

// What a node agent registers.
struct node_request {
  std::string name{};
  std::string address{};
  std::int32_t nprocs = 1;
  std::string cpus{};  // the machine cores advertised, e.g. "0-3"
  std::int64_t memory_mb = 0;
  std::int32_t gpus = 0;
};

struct node_record {
  std::int32_t id = 0;
  std::string name{};
  std::string address{};
  std::int32_t first_proc = 0;  // global number of its first processor
  std::int32_t nprocs = 1;
  std::string cpus{};
  std::int64_t memory_mb = 0;
  std::int32_t gpus = 0;
  node_state state = node_state::up;
  time_point registered_at{};
  std::optional<time_point> last_heartbeat{};
};

// Everything the scheduler needs to rebuild its view after a restart.
struct live_state {
  std::vector<job_summary> jobs{};   // PENDING, RUNNING, RESIZING, SUSPENDED, by id
  std::vector<node_record> nodes{};  // by first_proc (registration order)
  // The cluster's id (sql/007_cluster_identity): 32 hex digits, made once
  // with the database; agents and job tokens carry it.
  std::string cluster_id{};
};

// What a job's processes used on one node, as its agent measured them at
// their end (job_exited; sql/010_job_measurements.sql).
struct job_measurement {
  std::int64_t job_id = 0;
  std::string node{};
  std::int64_t user_cpu_us = 0;
  std::int64_t system_cpu_us = 0;
  std::int64_t max_rss_kb = 0;
};

// A job's usage as sacct and fjobs --efficiency show it: its usage record
// (the account charged and the processor-seconds it held: the integral of
// its maps) and its measurements of its latest run summed over its nodes
// (CPU) or the largest (memory). Each part absent when there is none.
struct job_usage {
  std::int64_t job_id = 0;
  std::optional<std::string> account{};
  std::optional<double> alloc_cpu_seconds{};
  std::optional<std::int64_t> user_cpu_us{};
  std::optional<std::int64_t> system_cpu_us{};
  std::optional<std::int64_t> max_rss_kb{};
  std::int64_t measured_nodes = 0;
};

// What fjobs asks for.
struct job_filter {
  std::optional<std::string> user_name{};
  // Only jobs in these states (finished ones too, if listed); empty: any
  // live state, and finished ones as include_finished says.
  std::vector<core::job_state> states{};
  bool include_finished = false;
  std::optional<std::int64_t> limit{};    // none: all
  std::optional<std::int64_t> after_id{}; // only ids greater than this (paging)
  // Only these jobs (the other filters still apply); empty: any.
  std::vector<std::int64_t> job_ids{};
  // The last `limit` matching jobs with ids below before_id (when set)
  // instead of the first ones after after_id; returned by increasing id
  // all the same (fjobs --limit: the newest jobs).
  bool newest = false;
  std::optional<std::int64_t> before_id{};
};

// A listing's view of a job (what job_summary holds of its record), and back:
// a record holding only those fields. The one place that knows which fields
// the two share.
// The control of a RESIZING job whose shim claimed map `epoch`
// (resize_begin), and back: aqsd restarted mid-resize resumes waiting for
// that map's outcome instead of guessing which map the job runs on.
std::string claim_control(std::int64_t epoch);
std::optional<std::int64_t> claimed_epoch(std::string_view control);

job_summary summary_of(const job_record& r);
job_record record_of(job_summary s);

}  // namespace aqs::store
