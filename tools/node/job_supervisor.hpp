// job_supervisor: runs the jobs of one node agent: starts them, enforces time
// limits, kills on request, reaps them and reports how each one ended.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/job_state.hpp"
#include "job_process.hpp"

namespace aqs::node {

// How a job ended, as the agent reports it to aqsd.
struct job_outcome {
  std::int64_t job_id = 0;
  exit_status status;
  // COMPLETED (exit 0), FAILED (non-zero exit or killed by a signal nobody
  // sent), TIMEOUT (killed at its time limit), CANCELLED (killed on request).
  core::job_state state = core::job_state::completed;
};

// Single-threaded: construct, call and destroy it on the thread that runs
// the io_context (the agent runs one). It makes this process a child
// subreaper, so that processes a job leaves behind are reparented to us and
// reaped, never left as zombies of an init that does not reap.
class job_supervisor {
public:
  using exit_callback = std::function<void(const job_outcome&)>;

  // on_exit is called once per started job, after its main process ended
  // and every process left in its group was killed.
  job_supervisor(boost::asio::io_context& io, exit_callback on_exit);
  ~job_supervisor();
  job_supervisor(const job_supervisor&) = delete;
  job_supervisor& operator=(const job_supervisor&) = delete;

  // Starts a job. With a time limit, SIGTERM at the limit and SIGKILL
  // `grace` later. Throws launch_error (nothing started) or
  // std::invalid_argument if the job id is already running here.
  pid_t start(std::int64_t job_id, const launch_spec& spec,
              std::optional<std::chrono::milliseconds> time_limit = std::nullopt,
              std::chrono::milliseconds grace = std::chrono::seconds(10));

  // Sends sig to the job's whole process group, and SIGKILL `grace` later
  // if it is still there; the job ends CANCELLED unless it was already
  // timing out. Returns false for a job not running here.
  bool kill(std::int64_t job_id, int sig, std::chrono::milliseconds grace);

  // Ids of the jobs running here, in no particular order.
  std::vector<std::int64_t> running() const;
  bool is_running(std::int64_t job_id) const { return jobs_.count(job_id) != 0; }

private:
  struct job {
    std::int64_t id = 0;
    pid_t pgid = 0;
    std::optional<core::job_state> killed_as;  // TIMEOUT or CANCELLED once we signalled it
    std::unique_ptr<boost::asio::steady_timer> limit;
    std::unique_ptr<boost::asio::steady_timer> escalate;
  };
  void wait_for_children();
  void reap();
  void terminate(job& j, core::job_state as, int sig, std::chrono::milliseconds grace);

  boost::asio::io_context& io_;
  exit_callback on_exit_;
  boost::asio::signal_set sigchld_;
  std::unordered_map<std::int64_t, job> jobs_;
  std::unordered_map<pid_t, std::int64_t> by_pid_;
};

}  // namespace aqs::node
