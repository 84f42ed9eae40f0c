// job_process: starts one job's process tree the way aqs-node runs jobs (as
// its user, in its own process group, pinned, with its files and
// environment), signals the whole tree, and decodes how it ended.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <vector>

#include "unique_fd.hpp"

namespace aqs::node {

// What the agent needs to start a job. Paths are absolute or relative to
// workdir; output patterns are already expanded (%j, %x).
struct launch_spec {
  std::vector<std::string> argv;         // argv[0] is looked up in PATH of env
  std::string workdir;                   // must exist and be a directory
  std::vector<std::string> env;          // the complete environment, KEY=VALUE
  std::string stdout_path;               // created (0666 less umask) or appended to
  std::string stderr_path;               // empty: stderr goes with stdout
  std::optional<uid_t> uid;              // run as this user (needs root), else as we are
  std::optional<gid_t> gid;              // primary group with uid
  std::vector<int> cpus;                 // pin every process to these cores; empty: no pinning
  // Interactive jobs: descriptors (e.g. pipe write ends) to use as stdout
  // and stderr instead of the files; -1: the files. stderr_fd -1 with
  // stdout_fd set: stderr goes with stdout.
  int stdout_fd = -1;
  int stderr_fd = -1;
  // The submitter's umask: set before the output files are created, and
  // what the job's processes start with.
  mode_t umask = 022;
  // --mem on this node in MB (0: none): with cgroups the kernel's limit of
  // the job's cgroup, else what the agent's polling allows it.
  std::uint64_t memory_mb = 0;
  // The cgroup.procs files of the job's cgroup (job_supervisor fills them
  // when the node has cgroups): the job's first process writes its pid to
  // each before it does anything else, so that no process of the job ever
  // runs outside its cgroup.
  std::vector<std::string> cgroup_procs;
  // Which step of the job this launch is, on this node (job_supervisor
  // runs it in the job's cgroup under job_N/step_<this>): "batch" for the
  // job's batch script or command on its first node, a number for a step
  // it starts on another node (aqs-rsh: an MPI daemon and its ranks).
  std::string cgroup_step = "batch";
};

// The job could not be started: the message is one line naming the step
// (e.g. "cannot enter working directory /x: No such file or directory"), meant
// for the job's record and the user.
class launch_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A close-on-exec pipe over which a forked child reports to the agent (what
// failed before exec, or what the step says). Throws launch_error ("pipe
// failed: ...").
struct report_pipe {
  unique_fd reader, writer;
};
report_pipe make_report_pipe();

// How a job's main process ended.
struct exit_status {
  int exit_code = 0;    // valid when !signaled
  int term_signal = 0;  // the signal that killed it, 0 if it exited
  bool signaled() const noexcept { return term_signal != 0; }
  // 0..255 for an exit, 128 + signal for a kill (the shell's convention, and
  // what frun exits with).
  int shell_code() const noexcept { return signaled() ? 128 + term_signal : exit_code; }
};

// Starts the job; returns the pid of its main process, which is also the
// process group id of the whole job. Failures anywhere before exec (user
// switch, working directory, output files, affinity, exec itself) are
// reported from the child through a close-on-exec pipe and thrown here as
// launch_error, with the child already reaped. Only async-signal-safe calls
// run in the child.
pid_t launch(const launch_spec& spec);

// Sends sig to every process of the job's group, and, when `session` is not
// 0, to every other process of that session (the step's: it catches what
// left the job's group, such as MPI ranks that orted put in groups of their
// own). Returns false if the group no longer exists.
bool signal_job(pid_t pgid, pid_t session, int sig) noexcept;
// Sends sig to what the job started (Slurm's steps): every process of the
// job's group and of the step's `session` (0: none) except the job's main
// process, the batch shell (pid == pgid), and the step itself. Returns how
// many were signalled.
int signal_job_steps(pid_t pgid, pid_t session, int sig) noexcept;
// Sends sig to every process of `session` except `except` (and never to
// pid 1); used by the step once its job is over.
void signal_session(pid_t session, pid_t except, int sig) noexcept;
// Sends sig to every descendant of this process (the agent, a child
// subreaper: orphans come back to it) whose environment has
// AQS_JOB_ID=job_id: what a job started that left its group and session,
// such as an MPI daemon that made itself a session leader. With
// except_group, not to that process group nor its leader (what
// signal_job_steps reached already, and the batch shell). Returns how many.
int signal_tagged(std::int64_t job_id, int sig, pid_t except_group = 0) noexcept;
// True while any process of the group is alive (zombies included until
// reaped by their parent).
bool job_alive(pid_t pgid) noexcept;

// Decodes a waitpid status.
exit_status decode_wait_status(int status) noexcept;

}  // namespace aqs::node
