// aqs_cluster: end-to-end test harness: a real aqsd and real aqs-node agents
// (virtual nodes on this machine), the real commands run as processes, and
// teardown that leaves no process behind even when a test fails.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "netns_hosts.hpp"
#include "protocol/results.hpp"

namespace aqs::test {

// What a finished command did.
struct run_result {
  int status = -1;  // exit status, or 128 + signal
  std::string out;
  std::string err;
};

// Runs argv (argv[0] a path) with `env` added to ours, optionally as another
// user (uid/gid, with that user's groups) and in `cwd`, feeding nothing on
// stdin; kills it after `timeout`.
run_result run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
               std::optional<uid_t> uid = std::nullopt, std::optional<gid_t> gid = std::nullopt,
               const std::string& cwd = "", std::chrono::milliseconds timeout = std::chrono::seconds(60));

// fork + exec of argv in a process group of its own, `env` added, as
// uid/gid if given, in `cwd`; stdout and stderr to the descriptors. With
// own_session, in a session of its own (and so, with kernel autogroups, its
// own share of the CPU), as a daemon started by a service manager is.
pid_t spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            std::optional<uid_t> uid, std::optional<gid_t> gid, const std::string& cwd, int out_fd, int err_fd,
            bool own_session = false);
// SIGTERM, then SIGKILL to its group after `grace`; reaps; sets pid to -1.
void stop_process(pid_t& pid, std::chrono::milliseconds grace);

// An unprivileged system user made for the tests (created if missing).
struct test_user {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::filesystem::path home;  // a private (0700) directory of theirs under the cluster's directory
};

// An unprivileged system user (useradd --system) made if missing, and then
// removed when the test program exits (run_users.hpp); its home is "/".
test_user system_user(const std::string& name);

// The paths of the binaries under test (from the build).
struct binaries {
  std::string aqsd, aqs_node, fsub, frun, fkill, fjobs, fnodes, fctl;
};
const binaries& bin();

class cluster {
public:
  struct options {
    int nodes = 4;
    int procs_per_node = 4;
    // Empty: aqsd's private PostgreSQL in its state directory (initdb at
    // first start: a few seconds); else a libpq connection string.
    std::string db;
    double heartbeat_timeout_s = 10;
    double agent_heartbeat_s = 0.5;
    double resize_timeout_s = 30;  // aqsd --resize-timeout
    // Each agent on a host of its own (testbed::netns_hosts: node<i> on host<i>),
    // talking to aqsd over TCP on the hosts' bridge. Needs root.
    bool netns = false;
    std::string policy = "equipartition";
    std::vector<std::string> aqsd_args;  // more aqsd flags (e.g. --idle-timeout 1)
    std::vector<std::string> agent_args;  // more flags for every agent (e.g. --memory 64G --gpus 4)
  };
  explicit cluster(options o);
  ~cluster();  // stops everything; kills what is left, by process group
  cluster(const cluster&) = delete;
  cluster& operator=(const cluster&) = delete;

  const std::filesystem::path& dir() const noexcept { return dir_; }
  std::string socket() const { return (dir_ / "state" / "aqsd.sock").string(); }
  // The port aqsd's HTTP listener got when started with `--http HOST:0`
  // (aqsd writes HOST:PORT to STATE/aqsd.http).
  unsigned short http_port() const;

  // aqsd: (re)start and wait until it answers; kill -9; SIGTERM and wait.
  void start_aqsd();
  void kill_aqsd();
  void stop_aqsd();
  // SIGTERM and wait up to `limit`: aqsd's exit status (128 + signal if a
  // signal ended it), or -1 if it was still there (it is then killed).
  int terminate_aqsd(std::chrono::milliseconds limit);
  pid_t aqsd_pid() const noexcept { return aqsd_; }
  // Agent i ("node<i>"): start, kill -9, SIGSTOP/SIGCONT.
  void start_agent(int i);
  void kill_agent(int i, int sig = 9);
  pid_t agent_pid(int i) const { return agents_.at(static_cast<std::size_t>(i)); }
  // Waits until `n` nodes are UP (fnodes --json).
  void wait_nodes_up(int n, std::chrono::seconds limit = std::chrono::seconds(30));

  // A command (fsub, fjobs, ...) against this cluster, optionally as a user.
  run_result cmd(const std::string& path, std::vector<std::string> args, const test_user* as = nullptr,
                 const std::string& cwd = "");
  // fsub ... and the id it printed (fails the test otherwise).
  std::int64_t submit(std::vector<std::string> args, const test_user* as = nullptr, const std::string& cwd = "");
  std::vector<protocol::job_info> jobs(bool all = true);
  std::vector<protocol::node_info> nodes();
  std::optional<protocol::job_info> job(std::int64_t id);
  // Polls until the job is in one of `states`; returns the last seen job.
  protocol::job_info wait_state(std::int64_t id, std::vector<core::job_state> states,
                                std::chrono::seconds limit = std::chrono::seconds(60));
  // Polls until no job is PENDING/RUNNING/RESIZING.
  void wait_idle(std::chrono::seconds limit = std::chrono::seconds(120));

  // A test user with a private working directory of theirs.
  test_user user(const std::string& name);
  // A working directory for root's jobs.
  std::filesystem::path workdir() const { return dir_ / "work"; }

  // Pids of processes whose command line mentions this cluster's directory
  // (what must be gone at the end).
  std::vector<pid_t> leftovers() const;

  // The namespace hosts (options.netns), else null.
  testbed::netns_hosts* hosts() const noexcept { return hosts_.get(); }

private:
  // Stops everything and removes the directory and the hosts (destructor,
  // or a constructor that failed half-way).
  void tear_down() noexcept;
  void print_logs() const noexcept;
  options o_;
  std::unique_ptr<testbed::netns_hosts> hosts_;
  int tcp_port_ = 0;
  std::filesystem::path dir_;
  pid_t aqsd_ = -1;
  std::vector<pid_t> agents_;
};

// True while the process exists (zombies excluded).
bool alive(pid_t pid);

// Live processes whose command line mentions `needle` (a job's file, say).
std::vector<pid_t> processes_mentioning(const std::string& needle);

// Whether pid runs as part of an AQS job (the agent tags every job process
// with AQS_JOB_ID in its environment): tests running at the same time
// (ctest -j) start the same MPI programs by hand, untagged.
bool in_a_job(pid_t pid);
// processes_mentioning(needle) that are part of an AQS job.
std::vector<pid_t> job_processes_mentioning(const std::string& needle);

// What aqsd answered a submit of `true` carrying `token`, sent straight
// over its socket by a child process that has become `u` (as fsub run by
// them would send it): the job id, or the error.
struct token_submit {
  std::int64_t job_id = -1;
  std::string error;
};
token_submit submit_with_token(const cluster& c, const test_user& u, const std::string& token);

}  // namespace aqs::test
