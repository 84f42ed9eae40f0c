// job_supervisor: SIGCHLD-driven reaping, time limits and kill escalation.
#include "job_supervisor.hpp"

#include <csignal>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/wait.h>

namespace aqs::node {

job_supervisor::job_supervisor(boost::asio::io_context& io, exit_callback on_exit)
    : io_(io), on_exit_(std::move(on_exit)), sigchld_(io, SIGCHLD) {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  wait_for_children();
}

job_supervisor::~job_supervisor() {
  boost::system::error_code ec;
  sigchld_.cancel(ec);
}

void job_supervisor::wait_for_children() {
  sigchld_.async_wait([this](boost::system::error_code ec, int) {
    if (ec) return;  // cancelled: we are being destroyed
    reap();
    wait_for_children();
  });
}

pid_t job_supervisor::start(std::int64_t job_id, const launch_spec& spec,
                            std::optional<std::chrono::milliseconds> time_limit,
                            std::chrono::milliseconds grace) {
  if (jobs_.count(job_id) != 0) {
    throw std::invalid_argument("job " + std::to_string(job_id) + " is already running on this node");
  }
  const pid_t pgid = launch(spec);
  job& j = jobs_[job_id];
  j.id = job_id;
  j.pgid = pgid;
  by_pid_[pgid] = job_id;
  if (time_limit) {
    j.limit = std::make_unique<boost::asio::steady_timer>(io_, *time_limit);
    j.limit->async_wait([this, job_id, grace](boost::system::error_code ec) {
      if (ec) return;
      auto it = jobs_.find(job_id);
      if (it != jobs_.end()) terminate(it->second, core::job_state::timeout, SIGTERM, grace);
    });
  }
  // A child may have exited before we were listening for its SIGCHLD.
  reap();
  return pgid;
}

bool job_supervisor::kill(std::int64_t job_id, int sig, std::chrono::milliseconds grace) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return false;
  terminate(it->second, it->second.killed_as.value_or(core::job_state::cancelled), sig, grace);
  return true;
}

void job_supervisor::terminate(job& j, core::job_state as, int sig, std::chrono::milliseconds grace) {
  if (!j.killed_as) j.killed_as = as;
  signal_job(j.pgid, sig);
  if (sig == SIGKILL) return;
  j.escalate = std::make_unique<boost::asio::steady_timer>(io_, grace);
  const std::int64_t id = j.id;
  j.escalate->async_wait([this, id](boost::system::error_code ec) {
    if (ec) return;
    auto it = jobs_.find(id);
    if (it != jobs_.end()) signal_job(it->second.pgid, SIGKILL);
  });
}

std::vector<std::int64_t> job_supervisor::running() const {
  std::vector<std::int64_t> ids;
  ids.reserve(jobs_.size());
  for (const auto& [id, j] : jobs_) ids.push_back(id);
  return ids;
}

void job_supervisor::reap() {
  while (true) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;  // none exited (0) or no children at all (-1)
    auto p = by_pid_.find(pid);
    if (p == by_pid_.end()) continue;  // an orphan handed to us as subreaper
    auto it = jobs_.find(p->second);
    by_pid_.erase(p);
    if (it == jobs_.end()) continue;
    job j = std::move(it->second);
    jobs_.erase(it);
    // The main process is gone; whatever it left in its group goes too.
    signal_job(j.pgid, SIGKILL);
    job_outcome out;
    out.job_id = j.id;
    out.status = decode_wait_status(status);
    if (j.killed_as) {
      out.state = *j.killed_as;
    } else {
      out.state = (!out.status.signaled() && out.status.exit_code == 0) ? core::job_state::completed
                                                                          : core::job_state::failed;
    }
    if (on_exit_) on_exit_(out);
  }
}

}  // namespace aqs::node
