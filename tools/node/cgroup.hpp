// cgroup: containment of a node's jobs in cgroups: one cgroup per job,
// created with its limits (memory, cpuset, pids) before the job starts,
// and under it one per step (job_N/step_M: what each launch of the job on
// this node runs); frozen for suspend, read for OOM kills, its cpuset
// rewritten when an adaptive job's map changes here, emptied and removed
// at its end.
// Two backends behind one interface, cgroup v1 (a hierarchy per controller)
// and v2 (the unified hierarchy), chosen at the agent's start by probing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <vector>

namespace aqs::node {

// A cgroup could not be made, set or found: one line naming the file.
class cgroup_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// What one job's cgroup limits. Zero or empty: no limit of that kind.
struct cgroup_limits {
  std::uint64_t memory_bytes = 0;  // RAM (and swap with it, where the kernel counts both)
  std::vector<int> cpus;           // exactly these processors (cpuset.cpus)
  std::int64_t pids_max = 0;       // processes and threads at once
};

// How the agent looks for cgroups (aqs-node --cgroups, --cgroup-root).
struct cgroup_options {
  enum class mode { automatic, v1, v2, off };
  mode want = mode::automatic;
  std::filesystem::path root = "/sys/fs/cgroup";  // where cgroupfs is mounted
  // Jobs go to aqs/<cluster>/<node>/job_<id>: job ids are unique within a
  // cluster only, and agents of two clusters may share a name on one host.
  // With an empty cluster only aqs/ is made (the probe at the agent's
  // start, before it knows its cluster), and no job may be created.
  std::string cluster;
  std::string node;  // the agent's --name
  std::int64_t pids_max = 0;                      // every job's pids limit (0: none)
};

// One backend: the jobs of one agent (node) under `base()`. Every method
// but the constructor-time probe is safe to call in the agent's step
// process (a fork of a single-threaded agent). Jobs are named by id only:
// the same id always maps to the same directories, so an agent restarted
// on the same node finds the cgroups of the jobs it adopts.
class cgroup_backend {
public:
  virtual ~cgroup_backend() = default;
  // 1 or 2.
  virtual int version() const = 0;
  // One line for the log and fnodes, e.g. "cgroup v1 (memory, cpuset,
  // freezer, pids) under /sys/fs/cgroup/memory/aqs/node0".
  virtual std::string describe() const = 0;
  // Makes the job's cgroup (a leftover of the same id is emptied and made
  // again) and sets its limits. Throws cgroup_error.
  virtual void create(std::int64_t job_id, const cgroup_limits& limits) = 0;
  // Makes a step of the job: a cgroup of its own under the job's,
  // job_N/step_NAME, in every hierarchy (v1) or in the unified one (v2,
  // whose job cgroup holds no process itself: every process of the job is
  // in one of its steps). The job's memory and pids limits hold for all its
  // steps together (the kernel's hierarchy); the step's cpuset is the job's.
  // Its OOM kills are counted apart (step_oom_kills). NAME: letters, digits,
  // '_' and '-' (cgroup_error otherwise, or when a file cannot be written).
  virtual void create_step(std::int64_t job_id, const std::string& step) = 0;
  // The cgroup.procs files a process writes its pid to, to enter the step's
  // cgroup (one per v1 hierarchy; one in v2).
  virtual std::vector<std::string> join_files(std::int64_t job_id, const std::string& step) const = 0;
  // The names of the job's steps here (step_NAME directories), sorted.
  std::vector<std::string> steps(std::int64_t job_id) const;
  // The OOM kills in one step of the job (0 when it cannot tell).
  virtual std::uint64_t step_oom_kills(std::int64_t job_id, const std::string& step) const = 0;
  // Rewrites the cpuset of the job and of each of its steps to exactly
  // `cpus` (an adaptive job's map changed on this node). Widened first
  // where it grows (a v1 child takes no cpu its parent lacks), narrowed
  // last where it shrinks, so that no write is refused on the way. The
  // kernel moves every task out of a processor its cpuset loses, whatever
  // affinity the task set itself. Throws cgroup_error naming the file (an
  // empty list, a job that is not here, a refused write).
  virtual void set_cpus(std::int64_t job_id, const std::vector<int>& cpus) = 0;
  // The job's cpuset as the kernel has it (its cpuset.cpus), empty if none.
  virtual std::vector<int> cpus(std::int64_t job_id) const = 0;
  // Whether the job's cgroup exists.
  virtual bool exists(std::int64_t job_id) const = 0;
  // The processes in the job's cgroup and its steps' (none if it is gone).
  virtual std::vector<pid_t> procs(std::int64_t job_id) const = 0;
  // Freezes (true) or thaws the whole cgroup: the job cannot catch or undo
  // it. Waits (bounded) until the kernel says it is frozen. False if the
  // cgroup is gone or the kernel refused.
  bool freeze(std::int64_t job_id, bool frozen);
  // Asks the kernel to freeze (true) or thaw the cgroup, without waiting
  // for it. False if the cgroup is gone or the kernel refused.
  virtual bool request_freeze(std::int64_t job_id, bool frozen) = 0;
  // Whether it is frozen now.
  virtual bool frozen(std::int64_t job_id) const = 0;
  // How many processes the kernel's OOM killer has killed in it (its steps
  // included) at its memory limit (0 when it cannot tell).
  virtual std::uint64_t oom_kills(std::int64_t job_id) const = 0;
  // CPU time the job's processes used (its steps' included), user and
  // system in microseconds, as the kernel counted it for the cgroup: v1
  // cpuacct.usage_user/usage_sys (or cpuacct.stat's ticks), v2 cpu.stat's
  // user_usec/system_usec. Nullopt when the cgroup or the counter is not
  // there (v1 without the cpuacct hierarchy). Read it once the job's
  // processes are gone: the counts are final then.
  virtual std::optional<std::pair<std::uint64_t, std::uint64_t>> cpu_usage_us(std::int64_t job_id) const = 0;
  // The job's directories, its steps' before its own (rmdir order).
  virtual std::vector<std::filesystem::path> dirs(std::int64_t job_id) const = 0;
  // The directory above every job's (aqs/<cluster>/<node>, in the first
  // hierarchy; aqs/ without a cluster).
  virtual std::filesystem::path base() const = 0;

  // Sends sig to every process in the job's cgroup; returns how many.
  int signal_all(std::int64_t job_id, int sig) const;
  // Kills every process in the job's cgroup wherever it moved its session
  // or process group: freeze, SIGKILL each one in cgroup.procs, thaw,
  // again until it is empty (bounded: about 2 s). True when it is empty.
  bool kill_all(std::int64_t job_id);
  // Removes the job's cgroup (rmdir, deepest first). False if some part
  // stays (processes still in it).
  bool remove(std::int64_t job_id) const;
  // Removes the node's and the cluster's directories where they are empty
  // (an agent's orderly end, its jobs gone); a busy one stays.
  void remove_empty_levels() const;
};

// The v1 backend: memory, cpuset and freezer hierarchies (and pids,
// cpuacct where mounted) under root/<controller>/<the agent's own cgroup
// there>/aqs/<cluster>/<node>. Throws cgroup_error naming what is missing.
std::unique_ptr<cgroup_backend> make_cgroup_v1(const cgroup_options& o);
// The v2 backend: root/aqs/<cluster>/<node>, with the memory, cpuset and
// pids controllers enabled down to it. Throws cgroup_error naming what is missing.
std::unique_ptr<cgroup_backend> make_cgroup_v2(const cgroup_options& o);

// The backend o.want asks for: with automatic, v2 where root has the
// controllers in its unified hierarchy, else v1, else none. Returns null
// with `why` set (one line) when none is usable (or o.want is off).
std::unique_ptr<cgroup_backend> probe_cgroups(const cgroup_options& o, std::string& why);

// "auto", "v1", "v2", "off" (aqs-node --cgroups); throws
// std::invalid_argument naming the known ones.
cgroup_options::mode parse_cgroup_mode(const std::string& text);

}  // namespace aqs::node
