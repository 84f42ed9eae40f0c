// job_supervisor: runs the jobs of one node agent: starts them, enforces time
// limits, kills on request, reaps them and reports how each one ended.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <filesystem>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/job_state.hpp"
#include "cgroup.hpp"
#include "core/signal_spec.hpp"
#include "job_process.hpp"
#include "unique_fd.hpp"

namespace aqs::node {

// Fencing: what a job's step does when its agent is gone (killed, crashed)
// and no new agent adopts the job in time, or when its agent lives but has
// not been heard by aqsd for too long (hung, or cut off by the network).
// aqsd declares the node DOWN and may start the job again elsewhere, so the
// old instance must be gone first. Counted from the moment the step notices
// its agent is gone, or from the agent's last renewal (renew()).
struct fencing {
  std::chrono::milliseconds term_after{6000};  // SIGTERM to the whole job
  std::chrono::milliseconds kill_after{8000};  // SIGKILL to whatever is left (>= term_after)
};

// What a job's processes used here (issue 32), measured by its step once
// they were gone: CPU time from the job's cgroup (every process that ran in
// it) where the kernel counts it, else from the rusage of the processes the
// step reaped (it is their subreaper: the job's main process and every
// orphan); the peak resident memory of the largest of those processes
// (rusage ru_maxrss, KiB).
struct job_measure {
  std::int64_t user_cpu_us = 0;
  std::int64_t system_cpu_us = 0;
  std::int64_t max_rss_kb = 0;
  friend bool operator==(const job_measure&, const job_measure&) = default;
};
// The step's record of it: " USER_US SYS_US RSS_KB" after the status
// fields in job-N.status, and back (nullopt: the record has none, as a
// step killed before it could write, or one of an older agent).
std::string format_measure(const job_measure& m);
std::optional<job_measure> parse_measure(std::istream& in);

// How a job ended, as the agent reports it to aqsd.
struct job_outcome {
  std::int64_t job_id = 0;
  exit_status status;
  // COMPLETED (exit 0), FAILED (non-zero exit or killed by a signal nobody
  // sent), TIMEOUT (killed at its time limit), CANCELLED (killed on request).
  core::job_state state = core::job_state::completed;
  // Why, when the agent knows more than the state says (the kernel's OOM
  // kill in the job's cgroup); "" otherwise.
  std::string reason;
  // Its step in its cgroup here (launch_spec::cgroup_step), "" without cgroups.
  std::string step;
  // What it used here; nullopt when its step could not measure it.
  std::optional<job_measure> measured;
};

// Single-threaded: construct, call and destroy it on the thread that runs
// the io_context (the agent runs one). It makes this process a child
// subreaper, so that processes a job leaves behind are reparented to us and
// reaped, never left as zombies of an init that does not reap.
//
// Each job runs under a step process of its own (like Slurm's slurmstepd):
// a fork of the agent, in a session of its own, that starts the job, waits
// for it, and writes its wait status to `spool/job-N.status` before it exits.
// The agent records every step in `spool/job-N.step`. So an agent killed
// with SIGKILL loses nothing: its jobs keep running under their steps, and a
// new agent on the same spool adopts them (adopt()), learns their exit
// status, and can still signal them, time them out and kill them.
class job_supervisor {
public:
  using exit_callback = std::function<void(const job_outcome&)>;

  // on_exit is called once per started (or adopted) job, after its main
  // process ended and every process left in its group was killed. `spool`
  // must be a directory only this agent's user can write (the agent checks).
  // With `fence`, each step holds a lease on this supervisor (a FIFO in the
  // spool, `job-N.lease`, whose write end only the supervisor holds): when
  // every writer is gone (this process died) and none comes back (adopt()
  // opens it again), the step kills its job on the fencing schedule. The
  // same when the lease is held but not renewed (renew()) for that long.
  job_supervisor(boost::asio::io_context& io, exit_callback on_exit, std::filesystem::path spool,
                 std::optional<fencing> fence = std::nullopt);
  ~job_supervisor();
  job_supervisor(const job_supervisor&) = delete;
  job_supervisor& operator=(const job_supervisor&) = delete;

  // Starts a job without waiting for it: forks its step and returns. When
  // the step has started the job (its exec succeeded) or failed to,
  // `started` gets nullopt or the one-line launch error (then the job is
  // forgotten and on_exit is never called). With a time limit, SIGTERM at
  // the limit and SIGKILL `grace` later. Throws launch_error (nothing
  // started) or std::invalid_argument if the job id is already here.
  using started_callback = std::function<void(std::optional<std::string> error)>;
  void start_async(std::int64_t job_id, const launch_spec& spec, std::optional<std::chrono::milliseconds> time_limit,
                   std::chrono::milliseconds grace, started_callback started);
  // start_async, waiting (running the io_context) until the job runs;
  // returns its process group. Throws launch_error if it could not start.
  pid_t start(std::int64_t job_id, const launch_spec& spec,
              std::optional<std::chrono::milliseconds> time_limit = std::nullopt,
              std::chrono::milliseconds grace = std::chrono::seconds(10));

  // Sends sig to the job's whole process group, and SIGKILL `grace` later
  // if it is still there; the job ends CANCELLED unless it was already
  // timing out. Returns false for a job not running here.
  bool kill(std::int64_t job_id, int sig, std::chrono::milliseconds grace);
  // Sends sig to the job's process group and nothing more (no escalation,
  // no change to how the job is reported). False for a job not running here.
  bool signal(std::int64_t job_id, int sig);
  // --signal: `s.signal` to the job `s.before_s` seconds before its time
  // limit (at once when less is left), once: to its batch shell alone
  // (B:), else to every process it started but not the shell (Slurm's "all
  // steps"). Time suspended does not count, as for the limit. Nothing for
  // a job without a time limit. Kept in the spool (`job-N.warn`: the spec,
  // and whether it was sent): an agent that adopts the job arms it again
  // from the job's start and limit, at once when its time has passed, and
  // never sends it twice (it is marked sent before it goes out). False for
  // a job not here.
  bool signal_before_limit(std::int64_t job_id, const core::signal_spec& s);
  // Called when a warning without B: has gone out here (the job's steps on
  // its other nodes must get it too: the agent asks aqsd to send it there).
  using warning_callback = std::function<void(std::int64_t job_id, int sig)>;
  void on_warning(warning_callback cb) { on_warning_ = std::move(cb); }
  // Sends sig to every process of the job here but its first one (what it
  // started: on another node of the job, the ranks an MPI daemon started,
  // not the daemon). False for a job not running here.
  bool signal_steps(std::int64_t job_id, int sig);
  // fctl suspend/resume: SIGSTOP (stop) or SIGCONT to the job's process
  // group, and its time limit stops running while it is stopped. False for
  // a job not running here. (A job adopted by a restarted agent while
  // stopped counts its stopped time from its spool record.)
  bool pause(std::int64_t job_id, bool stop);

  // Takes over the jobs a previous agent on this spool started: running
  // steps are watched again (time limits re-armed from their start), and
  // jobs that ended while no agent ran are reported through on_exit.
  // Returns the ids adopted while running. Unreadable or stale records are
  // removed.
  std::vector<std::int64_t> adopt();
  // Where the job records go from now on (the agent's spool directory of
  // the cluster it registered with). Throws std::logic_error while any job
  // is here: its records would be looked for in the wrong place.
  void set_spool(std::filesystem::path spool);
  const std::filesystem::path& spool() const noexcept { return spool_; }
  // The job's end has been reported and acknowledged: its spool records go.
  void forget(std::int64_t job_id);

  // Renews every step's lease: `stamp_ms` (CLOCK_MONOTONIC, ms) is a moment
  // by which aqsd had heard from this agent (the send time of a heartbeat
  // aqsd acknowledged) or could not have declared the node DOWN (its socket
  // refused us: no aqsd ran). A step whose newest stamp gets older than the
  // fencing schedule kills its job, as when the agent died: a hung agent
  // renews nothing, and one cut off from aqsd hears no acknowledgement.
  // Steps started later get the newest stamp at once. Without fencing, or
  // before the first renewal, steps only watch for their agent's death.
  void renew(std::int64_t stamp_ms);
  // CLOCK_MONOTONIC in milliseconds: the clock of renew()'s stamps.
  static std::int64_t monotonic_ms();

  // Kills the job (it ends OUT_OF_MEMORY) when it goes over `mb` megabytes.
  // In a cgroup (contain()) the kernel enforces the limit (set at start
  // from launch_spec::memory_mb) and this watches its OOM kills, every
  // 100 ms at most. Without cgroups, the fallback: every `every` the agent
  // reads /proc/PID/stat of the processes in the job's process group and
  // adds their RSS, so a spike shorter than that, or a process that left
  // the group, passes unseen. False for a job not running here.
  bool limit_memory(std::int64_t job_id, std::uint64_t mb,
                    std::chrono::milliseconds every = std::chrono::milliseconds(250));
  // The resident memory of a process group, in bytes (0 if it has none).
  static std::uint64_t resident_bytes(pid_t pgid);
  // Every process group's resident memory, from one pass over /proc.
  static std::unordered_map<pid_t, std::uint64_t> resident_by_group();

  // Containment: from now on every job runs in a cgroup of its own made by
  // `cgroups` (its memory limit, cpuset and pids limit; suspend freezes
  // it; its end, a kill or a cancel kill everything in it, wherever it
  // moved its session or group; then it is removed). What a launch runs
  // is in the step of it named by launch_spec::cgroup_step, under the
  // job's cgroup (job_N/step_M), and an OOM kill names that step in the
  // job's outcome. Call before the first start or adopt. Without it: process groups, SIGSTOP and the polling
  // of limit_memory().
  void contain(std::shared_ptr<cgroup_backend> cgroups) { cgroups_ = std::move(cgroups); }
  const cgroup_backend* containment() const noexcept { return cgroups_.get(); }
  // Whether the job runs here in a cgroup of its own.
  bool contained(std::int64_t job_id) const {
    const auto it = jobs_.find(job_id);
    return it != jobs_.end() && it->second.cgroup;
  }

  // An adaptive job's map changed on this node: its cgroup's cpuset (and
  // its steps') becomes exactly `cpus` (cgroup_backend::set_cpus: call it
  // after the ranks on lost processors have left, and before ranks start
  // on gained ones). The cpus it already has write nothing. False for a job
  // not running here in a cgroup; throws cgroup_error when the kernel refuses.
  bool set_cpus(std::int64_t job_id, const std::vector<int>& cpus);

  // Ids of the jobs running here, in no particular order.
  std::vector<std::int64_t> running() const;
  bool is_running(std::int64_t job_id) const { return jobs_.count(job_id) != 0; }
  // The job's step process (the root of its session) and its process
  // group, for sstat's measurements (job_stats); nullopt for a job not
  // running here.
  std::optional<std::pair<pid_t, pid_t>> step_and_group(std::int64_t job_id) const {
    const auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return std::nullopt;
    return std::pair<pid_t, pid_t>{it->second.step, it->second.pgid};
  }

private:
  struct job {
    std::int64_t id = 0;
    pid_t pgid = 0;
    pid_t step = 0;  // the step process (our child, or adopted and watched by pidfd)
    std::unique_ptr<boost::asio::posix::stream_descriptor> pidfd;  // adopted steps only
    std::optional<core::job_state> killed_as;  // TIMEOUT or CANCELLED once we signalled it
    // Until the step reports: the report pipe, and what happened meanwhile.
    bool starting = false;
    std::unique_ptr<boost::asio::posix::stream_descriptor> report;
    std::string said;
    std::optional<int> step_exited;           // the step's wait status, if it was reaped first
    std::vector<std::pair<int, std::chrono::milliseconds>> deferred;  // kills asked for while starting
    std::optional<std::chrono::milliseconds> limit_ms;
    std::chrono::milliseconds grace{0};
    started_callback started;
    std::unique_ptr<boost::asio::steady_timer> limit;
    std::chrono::steady_clock::time_point deadline{};         // while `limit` is armed
    std::optional<std::chrono::milliseconds> paused_left;     // stopped: what was left of its limit
    std::unique_ptr<boost::asio::steady_timer> escalate;
    unique_fd lease;  // while we hold it, the step knows its agent lives
    unique_fd lease_drain;  // our read end: stale stamps go when the FIFO is full (a stopped step)
    std::uint64_t memory_limit_mb = 0;  // 0: none
    bool cgroup = false;     // runs in its cgroup (cgroups_)
    bool watch_oom = false;  // in a cgroup, with a memory limit: its OOM kills end it
    std::string oom_reason;  // once they did
    std::string cgroup_step;  // its step's name in its cgroup (launch_spec::cgroup_step)
    std::optional<core::signal_spec> warning;  // --signal, until sent
    std::unique_ptr<boost::asio::steady_timer> warn;
  };
  void watch_memory();
  void wait_for_children();
  void reap();
  // The step ended (wait status of the step itself): read the job's status
  // from the spool and report.
  void step_ended(std::int64_t job_id, int step_status);
  void read_report(std::int64_t job_id);
  void reported(std::int64_t job_id);
  void arm_limit(job& j, std::chrono::milliseconds left, std::chrono::milliseconds grace);
  void arm_warning(job& j, std::chrono::milliseconds left);
  std::filesystem::path record(std::int64_t id, const char* what) const;
  void terminate(job& j, core::job_state as, int sig, std::chrono::milliseconds grace);

  // The job's --signal record in the spool: "SIG BEFORE_S BATCH_ONLY SENT".
  void write_warning(std::int64_t id, const core::signal_spec& s, bool sent) const;

  boost::asio::io_context& io_;
  exit_callback on_exit_;
  warning_callback on_warning_;
  std::filesystem::path spool_;
  boost::asio::signal_set sigchld_;
  std::unordered_map<std::int64_t, job> jobs_;
  std::unordered_map<pid_t, std::int64_t> by_pid_;
  std::optional<fencing> fence_;
  std::optional<std::int64_t> renewed_;  // the newest renew() stamp
  std::unique_ptr<boost::asio::steady_timer> memory_timer_;
  std::chrono::milliseconds memory_every_{250};
  std::shared_ptr<cgroup_backend> cgroups_;  // null: no containment
  // The reason of an OUT_OF_MEMORY end seen in the job's cgroup.
  std::string oom_reason(std::uint64_t kills, std::uint64_t limit_mb, const std::string& step) const;
  // Why a step fenced its job: it went `fenced_ms` without a renewal of its
  // lease (negative: that long with its agent gone).
  static std::string fencing_reason(std::int64_t fenced_ms);
  // Empties and removes a job's cgroup (contained jobs; nothing otherwise).
  void release_cgroup(std::int64_t job_id);
};

}  // namespace aqs::node
