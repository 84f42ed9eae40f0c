// job_stats: what sstat shows of a running job, measured on this node: each
// step's tasks (their processes' resident and virtual memory, now and at
// their peak, and CPU time), read from /proc, sampled every few seconds,
// and served to the job's owner (or root) on a local socket.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include "job_supervisor.hpp"
#include "protocol/stat_socket.hpp"

namespace aqs::node {

// One process of a job, as /proc shows it now.
struct proc_usage {
  pid_t pid = 0;
  pid_t pgid = 0;
  pid_t sid = 0;
  uid_t uid = 0;              // real uid
  std::uint64_t rss_kb = 0;
  std::uint64_t vsize_kb = 0;
  std::uint64_t hwm_kb = 0;   // VmHWM: the kernel's peak resident memory of this process
  std::uint64_t cpu_ms = 0;   // user + system, its own and its waited-for children's
  std::string step = "batch";  // SLURM_STEP_ID of its environment, else the batch step
  std::int64_t task = 0;       // SLURM_PROCID of its environment (0 without)
};
// Reads /proc/PID (stat, status, environ). Nullopt when it is gone or
// unreadable. `proc` is the /proc mount (tests give a fake tree).
std::optional<proc_usage> read_proc_usage(pid_t pid, const std::string& proc = "/proc");
// proc_usage's fields from the text of /proc/PID/stat, status and environ.
// Nullopt for a stat line that does not parse. `page_kb`, `ticks_per_s`:
// the machine's page size in KiB and clock ticks per second.
std::optional<proc_usage> parse_proc_usage(std::string_view stat, std::string_view status, std::string_view environ,
                                           std::uint64_t page_kb, std::uint64_t ticks_per_s);

// One task of a step on this node: the sums over its processes.
struct task_usage {
  std::int64_t task = 0;
  std::uint64_t rss_kb = 0, max_rss_kb = 0;
  std::uint64_t vsize_kb = 0, max_vsize_kb = 0;
  std::uint64_t cpu_ms = 0;
  std::vector<pid_t> pids;
};
struct step_usage {
  std::string step;  // "batch", "0", "1", ...
  std::vector<task_usage> tasks;
};
// The job's processes grouped by step and task, sorted (numbered steps
// first, then batch; tasks by number); `peaks` (step, task) -> (rss, vsize)
// sampled earlier raise the maxima, and are raised by these.
using peak_table = std::map<std::pair<std::string, std::int64_t>, std::pair<std::uint64_t, std::uint64_t>>;
std::vector<step_usage> group_usage(const std::vector<proc_usage>& procs, peak_table& peaks);


// The request, one line: {"job_id":N}. The reply, one line: {"node":NAME,
// "job_id":N,"steps":[{"step":"0","tasks":[{"task":0,"rss_kb":..,
// "max_rss_kb":..,"vsize_kb":..,"max_vsize_kb":..,"cpu_ms":..,"pids":[..]}]}]}
// or {"error":"not_found"|"permission_denied"|"bad_request","message":..}.
// Only the job's owner, root and the agent's own user are answered about
// a job (SO_PEERCRED); anyone else gets permission_denied.
class job_stats_server {
public:
  job_stats_server(boost::asio::io_context& io, std::string node, const job_supervisor& supervisor);
  ~job_stats_server();
  // Binds `name` (stat_socket_name) and starts answering and sampling.
  // Throws std::system_error if the name is taken.
  void start(const std::string& name);
  // The owner of a job launched here (the launch's uid).
  void owner(std::int64_t job_id, uid_t uid) { owners_[job_id] = uid; }
  // What the reply to a request from `caller` about `job_id` is (the JSON
  // line), read from /proc on the calling thread.
  std::string answer(std::int64_t job_id, uid_t caller);

private:
  // What says which processes are a job's, taken on the io thread (the
  // supervisor is not shared with the worker).
  struct job_view {
    std::int64_t id = 0;
    pid_t step = 0, group = 0;
    std::set<pid_t> in_cgroup;
  };
  void accept();
  void sample();
  job_view view_of(std::int64_t job_id) const;
  // One pass over /proc for these jobs: their processes by job id. Runs on
  // the worker: reading a process's /proc files waits for its memory map
  // lock (seen for 3 s on a loaded node while ranks start), and on the io
  // thread that wait held back the agent's heartbeats until aqsd and the
  // steps' fencing took the node for dead.
  std::map<std::int64_t, std::vector<proc_usage>> scan(const std::vector<job_view>& jobs);
  std::string reply_for(std::int64_t job_id, uid_t caller, const std::vector<proc_usage>& procs);

  boost::asio::io_context& io_;
  std::string node_;
  const job_supervisor& supervisor_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  boost::asio::steady_timer timer_;
  std::map<std::int64_t, uid_t> owners_;
  std::map<std::int64_t, peak_table> peaks_;
  // A process's step and task, from its environment, read once per
  // process (pid, start time and name: an exec renames it) and not every
  // sample. Worker side, under its mutex (answer() may scan too).
  struct tag {
    std::uint64_t start = 0;
    std::string comm;
    std::string step;
    std::int64_t task = 0;
  };
  std::mutex tags_mutex_;
  std::map<pid_t, tag> tags_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // expired once destroyed: late io handlers return
  boost::asio::thread_pool worker_{1};
};

}  // namespace aqs::node
