// job_supervisor: SIGCHLD-driven reaping, time limits and kill escalation.
#include "job_supervisor.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <thread>
#include <sstream>
#include <stdexcept>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

namespace aqs::node {

job_supervisor::job_supervisor(boost::asio::io_context& io, exit_callback on_exit, std::filesystem::path spool,
                               std::optional<fencing> fence)
    : io_(io), on_exit_(std::move(on_exit)), spool_(std::move(spool)), sigchld_(io, SIGCHLD), fence_(fence) {
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

std::filesystem::path job_supervisor::record(std::int64_t id, const char* what) const {
  return spool_ / ("job-" + std::to_string(id) + "." + what);
}

namespace {

// Field 22 of /proc/PID/stat: when the process started, in clock ticks
// since boot. With the pid it names one process for good (pids are reused).
unsigned long long start_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; i < 22 && rest >> field; ++i) {
  }
  unsigned long long ticks = 0;
  rest >> ticks;
  return ticks;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Writes `text` to `path` through a temporary file and rename, so a reader
// sees all of it or nothing. Only async-signal-safe calls: the step uses it.
// No fsync: the records must outlive the agent, not the machine (whose
// crash ends the jobs too), and a flush per job would cost more than the job.
bool write_atomically(const char* path, const char* tmp, const char* text, std::size_t len) {
  unique_fd fd(::open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return false;
  const bool ok = ::write(fd.get(), text, len) == static_cast<ssize_t>(len);
  fd.reset();
  return ok && ::rename(tmp, path) == 0;
}

// Closes every descriptor >= 3 except those in `keep`.
void close_all_but(std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  unsigned from = 3;
  for (int fd : keep) {
    if (fd < 3) continue;
    if (static_cast<unsigned>(fd) > from) ::close_range(from, static_cast<unsigned>(fd) - 1, 0);
    from = static_cast<unsigned>(fd) + 1;
  }
  ::close_range(from, ~0U, 0);
}

std::int64_t monotonic_ms() { return job_supervisor::monotonic_ms(); }

// Reads the lease FIFO: the agent's renewals, 8-byte CLOCK_MONOTONIC stamps
// (job_supervisor::renew; written whole, so reads of a multiple of 8 bytes
// see whole ones), the newest kept in `renewed`. Returns whether every
// writer is gone (the agent died and no new one adopted the job): Linux
// reports POLLHUP on a FIFO's read end once the last writer closed, until a
// writer opens it again.
bool lease_lost(int lease, std::int64_t& renewed) {
  pollfd p{lease, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & POLLIN) {
    std::int64_t stamps[64];
    for (ssize_t n; (n = ::read(lease, stamps, sizeof stamps)) > 0;) {
      for (ssize_t i = 0; i < n / 8; ++i) renewed = std::max(renewed, stamps[i]);
    }
  }
  return (p.revents & (POLLHUP | POLLERR)) != 0;
}

// The step's fencing: everything of the job goes, in its group, and the
// step's descendants tagged with the job's id (what left the group or made
// itself a session leader; the step is their subreaper, so they stay its
// descendants). The step has no session of its own to signal (start_async).
void fence_job(pid_t pgid, std::int64_t job_id, int sig, cgroup_backend* cg) {
  signal_job(pgid, 0, sig);
  signal_tagged(job_id, sig);
  if (cg != nullptr) {
    // And everything in its cgroup, wherever it went.
    if (sig == SIGKILL) {
      cg->kill_all(job_id);
    } else {
      cg->signal_all(job_id, sig);
      if (cg->frozen(job_id)) cg->freeze(job_id, false);  // a suspended job must see it
    }
  }
}

// The step reaps its children (what its final kills hit) until none is
// left or `most` has passed, so that their usage is in RUSAGE_CHILDREN.
void reap_for(std::chrono::milliseconds most) {
  const std::int64_t until = monotonic_ms() + most.count();
  while (true) {
    int ignored = 0;
    const pid_t p = ::waitpid(-1, &ignored, WNOHANG);
    if (p < 0) return;  // no children left
    if (p == 0) {
      if (monotonic_ms() >= until) return;
      ::usleep(5000);
    }
  }
}

// The step's wait for its job: the job's main process ends (its wait status
// is returned), reaping whatever else ends meanwhile (the step is a
// subreaper). With a lease and a fencing schedule: once the agent is gone
// for term_after, SIGTERM to the job, at kill_after SIGKILL; an agent that
// adopts the job before term_after (the lease has a writer again) stops the
// count. Once the agent has renewed the lease, the same schedule runs from
// its newest renewal while it lives (a hung agent, or one aqsd no longer
// hears): a renewal before term_after stops that count. SIGCHLD must be
// blocked (it is read through a signalfd). `fenced` is set to how long the
// agent had been gone or unrenewed when the SIGTERM went out (0: never
// fenced), so that the job's end can say why it came.
int step_wait(pid_t pgid, std::int64_t job_id, int lease, const std::optional<fencing>& fence, cgroup_backend* cg,
              std::int64_t& fenced) {
  fenced = 0;
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  unique_fd sfd(::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fence) lease = -1;
  std::int64_t lost_at = -1;  // when the lease was found lost; -1: it is held
  std::int64_t renewed = -1;  // the agent's newest renewal; -1: none yet
  std::int64_t termed_since = -1;  // what the count ran from when SIGTERM went out
  bool termed = false, killed = false;
  while (true) {
    int status = 0;
    for (pid_t p; (p = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      if (p == pgid) {
        sfd.reset();
        if (killed || termed) {
          // Fenced: no agent is there to reap what dies now; wait (a
          // moment, bounded) for what the SIGKILL hit.
          fence_job(pgid, job_id, SIGKILL, cg);
          const std::int64_t until = monotonic_ms() + 1000;
          int ignored = 0;
          while (monotonic_ms() < until) {
            const pid_t q = ::waitpid(-1, &ignored, WNOHANG);
            if (q < 0) break;  // no children left
            if (q == 0) ::usleep(10000);
          }
        }
        return status;
      }
    }
    int timeout = -1;
    if (lease >= 0 && !killed) {
      const bool lost = lease_lost(lease, renewed);
      const std::int64_t now = monotonic_ms();
      if (lost && lost_at < 0) lost_at = now;
      if (!lost && lost_at >= 0 && !termed) {
        // Adopted in time: nothing happens. The new agent has the schedule
        // over again to reach aqsd and renew: as if renewed at its adoption.
        renewed = std::max(renewed, now);
        lost_at = -1;
      }
      // Counted from the agent's death while it is gone, else from its
      // newest renewal; once the SIGTERM went out, the count goes on to the
      // SIGKILL whatever comes.
      const std::int64_t since = termed ? termed_since : lost_at >= 0 ? lost_at : renewed;
      if (since >= 0) {
        const std::int64_t gone = now - since;
        if (!termed && gone >= fence->term_after.count()) {
          fence_job(pgid, job_id, SIGTERM, cg);
          fenced = std::max<std::int64_t>(gone, 1) * (lost_at >= 0 ? -1 : 1);  // negative: the agent was gone
          termed = true;
          termed_since = since;
        }
        if (gone >= fence->kill_after.count()) {
          fence_job(pgid, job_id, SIGKILL, cg);
          killed = true;
        } else {
          // Be on time for the next step of the schedule; with the lease
          // lost (no POLLIN to wake us), look for an adopting agent now and then.
          const std::int64_t next = termed ? fence->kill_after.count() : fence->term_after.count();
          timeout = static_cast<int>(std::clamp<std::int64_t>(next - gone, 1, lost_at >= 0 ? 100 : next - gone));
        }
      }
    }
    if (!sfd && (timeout < 0 || timeout > 100)) timeout = 100;  // no signalfd: poll for the job's end
    pollfd fds[2] = {{sfd.get(), POLLIN, 0}, {lease >= 0 && lost_at < 0 && !killed ? lease : -1, POLLIN, 0}};
    if (::poll(fds, 2, timeout) > 0 && (fds[0].revents & POLLIN)) {
      signalfd_siginfo info[8];
      while (::read(sfd.get(), info, sizeof info) > 0) {
      }
    }
  }
}

}  // namespace

void job_supervisor::start_async(std::int64_t job_id, const launch_spec& spec,
                                 std::optional<std::chrono::milliseconds> time_limit, std::chrono::milliseconds grace,
                                 started_callback started) {
  if (jobs_.count(job_id) != 0) {
    throw std::invalid_argument("job " + std::to_string(job_id) + " is already running on this node");
  }
  const std::string status_path = record(job_id, "status").string();
  const std::string status_tmp = status_path + ".tmp";
  const std::string step_path = record(job_id, "step").string();
  const std::string step_tmp = step_path + ".tmp";
  ::unlink(status_path.c_str());
  ::unlink(record(job_id, "warn").c_str());  // of an earlier run of the job here (requeued)
  // The lease: the step reads, we write; opened on both ends before the
  // fork (a FIFO open for writing needs a reader), close-on-exec so that no
  // job inherits the write end. Without it the job is not fenced.
  const std::string lease_path = record(job_id, "lease").string();
  ::unlink(lease_path.c_str());
  unique_fd lease_r, lease_w;
  if (fence_ && ::mkfifo(lease_path.c_str(), 0600) == 0) {
    lease_r.reset(::open(lease_path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
    if (lease_r) lease_w.reset(::open(lease_path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
    if (!lease_w) lease_r.reset();
    // The step starts from the newest renewal: a job started by an agent
    // that is then cut off is fenced like the others.
    if (lease_w && renewed_) (void)!::write(lease_w.get(), &*renewed_, sizeof *renewed_);
  }
  // The job's cgroup, made here with its limits; its first process enters
  // it before exec (launch), so nothing of the job runs outside it.
  launch_spec contained_spec;
  const launch_spec* run_spec = &spec;
  if (cgroups_) {
    cgroup_limits limits;
    limits.memory_bytes = spec.memory_mb * 1024 * 1024;
    limits.cpus = spec.cpus;
    try {
      cgroups_->create(job_id, limits);
      cgroups_->create_step(job_id, spec.cgroup_step);
    } catch (const std::exception& e) {
      release_cgroup(job_id);
      throw launch_error(std::string("cannot make the job's cgroup: ") + e.what());
    }
    contained_spec = spec;
    contained_spec.cgroup_procs = cgroups_->join_files(job_id, spec.cgroup_step);
    run_spec = &contained_spec;
  }
  auto [report_r, report_w] = make_report_pipe();
  const pid_t step = ::fork();
  if (step < 0) {
    const int err = errno;
    release_cgroup(job_id);
    throw launch_error(std::string("fork failed: ") + std::strerror(err));
  }
  if (step == 0) {
    // The step: a single-threaded copy of the agent that outlives it. It
    // keeps nothing of the agent's (above all not its connection to aqsd).
    report_r.reset();
    // A process group of its own (out of the agent's: a signal to the
    // agent's group leaves the job alone), but not a session of its own.
    // With kernel autogroups (sched_autogroup_enabled, the default of most
    // distributions) a new session is a new CPU scheduling group: a step per
    // host each holding dozens of ranks spinning in MPI_Init stalled the
    // whole machine for 10-30 s (millions of context switches a second, no
    // heartbeat sent) until the steps fenced their jobs; in the agent's
    // session the same 128-rank job ran (docs/admin-guide.md, "Job steps and
    // the CPU scheduler"). What leaves the job's group is still found: by
    // its cgroup, or by its AQS_JOB_ID among the step's descendants.
    ::setpgid(0, 0);
    // Nor the agent's controlling terminal, if it was started from one: no
    // job may write to (or read from) an administrator's terminal.
    if (const int tty = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC); tty >= 0) {
      (void)::ioctl(tty, TIOCNOTTY);
      ::close(tty);
    }
    // Orphans of the job (an MPI daemon whose mpirun died) stay ours, so a
    // fencing kill still finds them by descent when the agent is gone.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE}) ::signal(sig, SIG_IGN);
    ::signal(SIGCHLD, SIG_DFL);
    sigset_t only_chld;
    sigemptyset(&only_chld);
    sigaddset(&only_chld, SIGCHLD);  // read through a signalfd (step_wait); the job unblocks it
    ::sigprocmask(SIG_SETMASK, &only_chld, nullptr);
    lease_w.reset();
    close_all_but({report_w.get(), spec.stdout_fd, spec.stderr_fd, lease_r.get()});
    std::string said;
    pid_t pgid = 0;
    // The record a new agent adopts the job by, written here and not by the
    // agent: aqsd counts the job RUNNING from dispatch, and an agent killed
    // before it reads this step's report must not leave a job that runs
    // unrecorded (neither adopted nor set aside by the next one, which would
    // even remove its script as stale). First "starting" (process group 0),
    // before the job exists; then with its group once it runs.
    const auto write_record = [&](pid_t group) {
      const std::string rec = std::to_string(::getpid()) + " " + std::to_string(start_ticks(::getpid())) + " " +
                              std::to_string(group) + " " + std::to_string(now_ms()) + " " +
                              std::to_string(time_limit ? time_limit->count() : 0) + " " +
                              std::to_string(grace.count()) + "\n";
      write_atomically(step_path.c_str(), step_tmp.c_str(), rec.data(), rec.size());
    };
    write_record(0);
    try {
      pgid = launch(*run_spec);
      said = "O" + std::to_string(pgid);
      write_record(pgid);
    } catch (const std::exception& e) {
      said = std::string("E") + e.what();
      ::unlink(step_path.c_str());
    }
    (void)!::write(report_w.get(), said.data(), said.size());
    report_w.reset();
    if (spec.stdout_fd >= 0) ::close(spec.stdout_fd);
    if (spec.stderr_fd >= 0) ::close(spec.stderr_fd);
    if (pgid <= 0) ::_exit(0);
    std::int64_t fenced = 0;
    const int status = step_wait(pgid, job_id, lease_r.get(), fence_, cgroups_.get(), fenced);
    ::kill(-pgid, SIGKILL);  // what the job left in its group
    signal_tagged(job_id, SIGKILL);  // and what left both (still ours: we are its subreaper)
    // In a cgroup: everything in it, wherever it went, and then the cgroup,
    // once its OOM kills are counted for the record.
    unsigned long long oom = 0;
    if (cgroups_) cgroups_->kill_all(job_id);
    // What the job used (issue 32): once what the kills hit is reaped, our
    // children's rusage holds every process of it that ended, and the
    // cgroup's counters are final.
    reap_for(std::chrono::milliseconds(1000));
    job_measure used;
    rusage ru{};
    if (::getrusage(RUSAGE_CHILDREN, &ru) == 0) {
      used.user_cpu_us = static_cast<std::int64_t>(ru.ru_utime.tv_sec) * 1'000'000 + ru.ru_utime.tv_usec;
      used.system_cpu_us = static_cast<std::int64_t>(ru.ru_stime.tv_sec) * 1'000'000 + ru.ru_stime.tv_usec;
      used.max_rss_kb = ru.ru_maxrss;  // KiB on Linux
    }
    if (cgroups_) {
      if (const auto cpu = cgroups_->cpu_usage_us(job_id)) {
        used.user_cpu_us = static_cast<std::int64_t>(cpu->first);
        used.system_cpu_us = static_cast<std::int64_t>(cpu->second);
      }
      oom = cgroups_->oom_kills(job_id);
      cgroups_->remove(job_id);
    }
    char text[80];
    const int len = std::snprintf(text, sizeof text, "%d %llu %lld", status, oom, static_cast<long long>(fenced));
    const std::string record = std::string(text, static_cast<std::size_t>(len)) + format_measure(used) + "\n";
    write_atomically(status_path.c_str(), status_tmp.c_str(), record.data(), record.size());
    ::_exit(0);
  }
  report_w.reset();
  lease_r.reset();
  job& j = jobs_[job_id];
  j.id = job_id;
  j.step = step;
  j.starting = true;
  j.lease = std::move(lease_w);
  if (j.lease) j.lease_drain.reset(::open(lease_path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
  j.report = std::make_unique<boost::asio::posix::stream_descriptor>(io_, report_r.release());
  j.limit_ms = time_limit;
  j.grace = grace;
  j.started = std::move(started);
  j.cgroup_step = spec.cgroup_step;
  by_pid_[step] = job_id;
  read_report(job_id);
}

void job_supervisor::read_report(std::int64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !it->second.report) return;
  auto buf = std::make_shared<std::array<char, 4096>>();
  it->second.report->async_read_some(boost::asio::buffer(*buf), [this, job_id, buf](boost::system::error_code ec,
                                                                                     std::size_t n) {
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return;
    it->second.said.append(buf->data(), n);
    if (ec) {
      reported(job_id);  // EOF: the step said all it will
    } else {
      read_report(job_id);
    }
  });
}

void job_supervisor::reported(std::int64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  job& j = it->second;
  j.report.reset();
  j.starting = false;
  started_callback started = std::move(j.started);
  if (j.said.empty() || j.said[0] != 'O') {
    const std::string error = j.said.size() > 1 ? j.said.substr(1) : "the job's step process died before starting it";
    by_pid_.erase(j.step);  // reaped as an orphan if it is still there
    jobs_.erase(it);
    release_cgroup(job_id);
    std::error_code ec;
    std::filesystem::remove(record(job_id, "lease"), ec);
    std::filesystem::remove(record(job_id, "warn"), ec);
    if (started) started(error);
    return;
  }
  j.pgid = static_cast<pid_t>(std::stol(j.said.substr(1)));
  j.cgroup = cgroups_ != nullptr;
  // Its adoption record (job-N.step) the step wrote before it said so.
  if (j.limit_ms) arm_limit(j, *j.limit_ms, j.grace);
  const auto deferred = std::move(j.deferred);
  const auto step_exited = j.step_exited;
  if (started) started(std::nullopt);
  for (const auto& [sig, grace] : deferred) {
    if (sig == SIGSTOP || sig == SIGCONT) {
      pause(job_id, sig == SIGSTOP);
    } else {
      kill(job_id, sig, grace);
    }
  }
  if (step_exited) step_ended(job_id, *step_exited);
}

pid_t job_supervisor::start(std::int64_t job_id, const launch_spec& spec,
                            std::optional<std::chrono::milliseconds> time_limit, std::chrono::milliseconds grace) {
  std::optional<std::optional<std::string>> outcome;
  start_async(job_id, spec, time_limit, grace, [&](std::optional<std::string> error) { outcome = std::move(error); });
  while (!outcome) {
    if (io_.stopped()) io_.restart();
    io_.run_one();
  }
  if (*outcome) throw launch_error(**outcome);
  return jobs_.count(job_id) != 0 ? jobs_.at(job_id).pgid : 0;
}

void job_supervisor::arm_limit(job& j, std::chrono::milliseconds left, std::chrono::milliseconds grace) {
  left = std::max(left, std::chrono::milliseconds(0));
  j.deadline = std::chrono::steady_clock::now() + left;
  j.limit = std::make_unique<boost::asio::steady_timer>(io_, left);
  const std::int64_t job_id = j.id;
  j.limit->async_wait([this, job_id, grace](boost::system::error_code ec) {
    if (ec) return;
    auto it = jobs_.find(job_id);
    if (it != jobs_.end()) terminate(it->second, core::job_state::timeout, SIGTERM, grace);
  });
  arm_warning(j, left);
}

void job_supervisor::arm_warning(job& j, std::chrono::milliseconds left) {
  if (!j.warning) return;
  const auto at = std::max(left - std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::seconds(j.warning->before_s)),
                           std::chrono::milliseconds(0));
  j.warn = std::make_unique<boost::asio::steady_timer>(io_, at);
  const std::int64_t job_id = j.id;
  j.warn->async_wait([this, job_id](boost::system::error_code ec) {
    if (ec) return;
    auto it = jobs_.find(job_id);
    if (it == jobs_.end() || !it->second.warning || it->second.killed_as) return;
    job& jj = it->second;
    const core::signal_spec s = *jj.warning;
    jj.warning.reset();  // once
    // Marked sent before it goes out: an agent killed in between and
    // restarted must not send it a second time (a lost warning is the
    // lesser harm).
    write_warning(job_id, s, true);
    if (s.batch_only) {
      ::kill(jj.pgid, s.signal);  // the batch shell leads the job's group
    } else {
      signal_job_steps(jj.pgid, 0, s.signal);
      signal_tagged(job_id, s.signal, jj.pgid);  // what left the job's group (steps have no session of their own)
      if (on_warning_) on_warning_(job_id, s.signal);
    }
  });
}

void job_supervisor::write_warning(std::int64_t id, const core::signal_spec& s, bool sent) const {
  const std::string text = std::to_string(s.signal) + " " + std::to_string(s.before_s) + " " +
                           (s.batch_only ? "1" : "0") + " " + (sent ? "1" : "0") + "\n";
  const std::string path = record(id, "warn").string();
  write_atomically(path.c_str(), (path + ".tmp").c_str(), text.data(), text.size());
}

bool job_supervisor::signal_steps(std::int64_t job_id, int sig) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.starting) return it != jobs_.end();
  signal_job_steps(it->second.pgid, 0, sig);
  signal_tagged(job_id, sig, it->second.pgid);  // what left the job's group (steps have no session of their own)
  return true;
}

bool job_supervisor::signal_before_limit(std::int64_t job_id, const core::signal_spec& s) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return false;
  job& j = it->second;
  j.warning = s;
  write_warning(job_id, s, false);
  // Armed with the limit (arm_limit), or now when the limit already runs.
  if (j.limit && !j.paused_left) {
    arm_warning(j, std::chrono::duration_cast<std::chrono::milliseconds>(j.deadline - std::chrono::steady_clock::now()));
  }
  return true;
}

void job_supervisor::set_spool(std::filesystem::path spool) {
  if (!jobs_.empty()) throw std::logic_error("job_supervisor::set_spool with jobs running");
  spool_ = std::move(spool);
}

std::vector<std::int64_t> job_supervisor::adopt() {
  std::vector<std::int64_t> adopted;
  std::error_code ec;
  std::vector<std::filesystem::path> records;
  for (const auto& e : std::filesystem::directory_iterator(spool_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("job-", 0) == 0 && e.path().extension() == ".step") records.push_back(e.path());
  }
  for (const auto& path : records) {
    std::int64_t id = 0;
    try {
      id = std::stoll(path.stem().string().substr(4));
    } catch (const std::exception&) {
      std::filesystem::remove(path, ec);
      continue;
    }
    long long step = 0, pgid = 0, started = 0, limit = 0, grace = 0;
    unsigned long long ticks = 0;
    const auto read_record = [&] {
      std::ifstream in(path);
      return static_cast<bool>(in >> step >> ticks >> pgid >> started >> limit >> grace);
    };
    bool read = read_record();
    // A step still starting its job (process group 0): it rewrites the
    // record once the job runs. Wait for that while the step lives.
    for (int i = 0; read && pgid == 0 && step > 0 && i < 200; ++i) {
      if (::kill(static_cast<pid_t>(step), 0) != 0 || start_ticks(static_cast<pid_t>(step)) != ticks) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      read = read_record();
    }
    if (!read || step <= 0 || pgid <= 0 || jobs_.count(id)) {
      std::filesystem::remove(path, ec);
      continue;
    }
    job_outcome out;
    out.job_id = id;
    std::ifstream status_in(record(id, "status"));
    int status = 0;
    if (status_in >> status) {
      // Ended while no agent ran: report it now.
      std::uint64_t oom = 0;
      std::int64_t fenced = 0;
      status_in >> oom >> fenced;
      out.measured = parse_measure(status_in);
      out.status = decode_wait_status(status);
      out.state = (!out.status.signaled() && out.status.exit_code == 0) ? core::job_state::completed
                                                                          : core::job_state::failed;
      if (fenced != 0) out.reason = fencing_reason(fenced);
      if (oom > 0) {
        out.state = core::job_state::out_of_memory;
        out.reason = oom_reason(oom, 0, "");
      }
      release_cgroup(id);  // a step killed between its status and its rmdir
      if (on_exit_) on_exit_(out);
      continue;
    }
    const bool step_alive = ::kill(static_cast<pid_t>(step), 0) == 0 && start_ticks(static_cast<pid_t>(step)) == ticks;
    // pidfd_open(2) by number: glibc 2.36's <sys/pidfd.h> is not usable from C++.
    unique_fd pidfd(step_alive ? static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(step), 0)) : -1);
    if (!pidfd) {
      // The step is gone without a word (killed with its agent): the job
      // cannot be trusted to be whole; end what is left of it.
      signal_job(static_cast<pid_t>(pgid), static_cast<pid_t>(step), SIGKILL);
      release_cgroup(id);
      out.status.term_signal = SIGKILL;
      out.state = core::job_state::failed;
      if (on_exit_) on_exit_(out);
      continue;
    }
    job& j = jobs_[id];
    j.id = id;
    j.pgid = static_cast<pid_t>(pgid);
    j.step = static_cast<pid_t>(step);
    // Its cgroup, found again by its id: still limited, frozen if it was
    // suspended, and its OOM kills watched.
    if (cgroups_ && cgroups_->exists(id)) {
      j.cgroup = true;
      if (const auto steps = cgroups_->steps(id); !steps.empty()) j.cgroup_step = steps.front();
      j.watch_oom = true;
      if (!memory_timer_) watch_memory();
    }
    // Holding the lease again tells the step its job is adopted: it is not
    // fenced. A step of an agent without leases has no FIFO: nothing to do.
    j.lease = unique_fd(::open(record(id, "lease").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
    if (j.lease) j.lease_drain.reset(::open(record(id, "lease").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
    j.pidfd = std::make_unique<boost::asio::posix::stream_descriptor>(io_, pidfd.release());
    j.pidfd->async_wait(boost::asio::posix::stream_descriptor::wait_read, [this, id](boost::system::error_code e) {
      if (!e) step_ended(id, 0);
    });
    // Its --signal warning, unless it went out already: armed with the limit.
    std::ifstream warn_in(record(id, "warn"));
    core::signal_spec w;
    int batch_only = 0, sent = 0;
    if (warn_in >> w.signal >> w.before_s >> batch_only >> sent && sent == 0 && w.signal > 0) {
      w.batch_only = batch_only != 0;
      j.warning = w;
    }
    if (limit > 0) {
      arm_limit(j, std::chrono::milliseconds(limit - (now_ms() - started)), std::chrono::milliseconds(grace));
    }
    adopted.push_back(id);
  }
  return adopted;
}

std::int64_t job_supervisor::monotonic_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void job_supervisor::renew(std::int64_t stamp_ms) {
  if (!fence_ || (renewed_ && stamp_ms <= *renewed_)) return;
  renewed_ = stamp_ms;
  for (auto& [id, j] : jobs_) {
    if (!j.lease) continue;
    if (::write(j.lease.get(), &stamp_ms, sizeof stamp_ms) < 0 && errno == EAGAIN && j.lease_drain) {
      // Full: the step is stopped (a suspended job) and reads nothing. Only
      // the newest stamp matters to it when it runs again.
      char junk[4096];
      while (::read(j.lease_drain.get(), junk, sizeof junk) > 0) {
      }
      (void)!::write(j.lease.get(), &stamp_ms, sizeof stamp_ms);
    }
  }
}

void job_supervisor::forget(std::int64_t job_id) {
  if (jobs_.count(job_id) != 0) return;
  std::error_code ec;
  std::filesystem::remove(record(job_id, "step"), ec);
  std::filesystem::remove(record(job_id, "status"), ec);
  std::filesystem::remove(record(job_id, "lease"), ec);
  std::filesystem::remove(record(job_id, "warn"), ec);
}

bool job_supervisor::kill(std::int64_t job_id, int sig, std::chrono::milliseconds grace) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return false;
  if (it->second.starting) {
    it->second.deferred.emplace_back(sig, grace);  // once its process group exists
    return true;
  }
  terminate(it->second, it->second.killed_as.value_or(core::job_state::cancelled), sig, grace);
  return true;
}

bool job_supervisor::signal(std::int64_t job_id, int sig) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.starting) return it != jobs_.end();
  signal_job(it->second.pgid, 0, sig);  // a signal for the job's own processes only
  if (it->second.cgroup) cgroups_->signal_all(job_id, sig);  // (in a cgroup: all of them)
  return true;
}

bool job_supervisor::pause(std::int64_t job_id, bool stop) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return false;
  job& j = it->second;
  if (j.starting) {
    j.deferred.emplace_back(stop ? SIGSTOP : SIGCONT, std::chrono::milliseconds(0));
    return true;
  }
  // In a cgroup the freezer: the job cannot catch it, and no process of
  // it escapes it; else SIGSTOP/SIGCONT to its group.
  if (!j.cgroup || !cgroups_->freeze(job_id, stop)) signal_job(j.pgid, 0, stop ? SIGSTOP : SIGCONT);
  if (stop) {
    if (j.limit && !j.paused_left) {
      j.paused_left = std::chrono::duration_cast<std::chrono::milliseconds>(j.deadline - std::chrono::steady_clock::now());
      j.limit->cancel();
      j.limit.reset();
      if (j.warn) {
        j.warn->cancel();
        j.warn.reset();
      }
    }
  } else if (j.paused_left) {
    arm_limit(j, *j.paused_left, j.grace);
    j.paused_left.reset();
  }
  return true;
}

void job_supervisor::terminate(job& j, core::job_state as, int sig, std::chrono::milliseconds grace) {
  if (!j.killed_as) j.killed_as = as;
  signal_job(j.pgid, j.step, sig);
  if (j.cgroup) {
    if (sig == SIGKILL) {
      cgroups_->kill_all(j.id);
    } else {
      cgroups_->signal_all(j.id, sig);
      if (cgroups_->frozen(j.id)) cgroups_->freeze(j.id, false);  // a suspended job must see it
    }
  }
  if (sig == SIGKILL) return;
  j.escalate = std::make_unique<boost::asio::steady_timer>(io_, grace);
  const std::int64_t id = j.id;
  j.escalate->async_wait([this, id](boost::system::error_code ec) {
    if (ec) return;
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return;
    signal_job(it->second.pgid, it->second.step, SIGKILL);
    if (it->second.cgroup) cgroups_->kill_all(id);
  });
}

bool job_supervisor::limit_memory(std::int64_t job_id, std::uint64_t mb, std::chrono::milliseconds every) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return false;
  it->second.memory_limit_mb = mb;
  // In a cgroup the kernel holds the limit; its OOM kills are watched often.
  it->second.watch_oom = cgroups_ != nullptr;
  memory_every_ = cgroups_ ? std::min(every, std::chrono::milliseconds(100)) : every;
  if (!memory_timer_) watch_memory();
  return true;
}

std::unordered_map<pid_t, std::uint64_t> job_supervisor::resident_by_group() {
  static const long page = ::sysconf(_SC_PAGESIZE);
  std::unordered_map<pid_t, std::uint64_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    std::ifstream in(e.path() / "stat");
    std::string text;
    if (!std::getline(in, text)) continue;
    // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
    // majflt cmajflt utime stime cutime cstime priority nice threads
    // itrealvalue starttime vsize rss: fields after the last ')'.
    const auto close = text.rfind(')');
    if (close == std::string::npos || close + 2 > text.size()) continue;
    std::istringstream fields(text.substr(close + 2));
    std::string state;
    long long ppid = 0, pgrp = 0;
    if (!(fields >> state >> ppid >> pgrp)) continue;
    std::string skip;
    for (int i = 0; i < 18; ++i) fields >> skip;  // session .. vsize (fields 6-23)
    long long rss = 0;
    if (fields >> rss && rss > 0) {
      out[static_cast<pid_t>(pgrp)] += static_cast<std::uint64_t>(rss) * static_cast<std::uint64_t>(page);
    }
  }
  return out;
}

std::uint64_t job_supervisor::resident_bytes(pid_t pgid) {
  const auto all = resident_by_group();
  const auto it = all.find(pgid);
  return it == all.end() ? 0 : it->second;
}

void job_supervisor::watch_memory() {
  memory_timer_ = std::make_unique<boost::asio::steady_timer>(io_, memory_every_);
  memory_timer_->async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    bool any = false;
    std::optional<std::unordered_map<pid_t, std::uint64_t>> rss;  // one pass over /proc per tick
    for (auto& [id, j] : jobs_) {
      if (j.memory_limit_mb == 0 && !j.watch_oom) continue;
      any = true;
      if (j.starting || j.pgid <= 0 || j.killed_as) continue;
      if (j.cgroup) {
        // The kernel killed a process of the job at its limit: the job ends.
        if (const std::uint64_t kills = cgroups_->oom_kills(id); kills > 0) {
          terminate(j, core::job_state::out_of_memory, SIGKILL, std::chrono::milliseconds(0));
          j.oom_reason = oom_reason(kills, j.memory_limit_mb, j.cgroup_step);
        }
        continue;
      }
      if (!rss) rss = resident_by_group();
      const auto found = rss->find(j.pgid);
      const std::uint64_t used = found == rss->end() ? 0 : found->second;
      if (used > j.memory_limit_mb * 1024 * 1024) {
        terminate(j, core::job_state::out_of_memory, SIGKILL, std::chrono::milliseconds(0));
      }
    }
    if (any) {
      watch_memory();
    } else {
      memory_timer_.reset();
    }
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
    const std::int64_t id = p->second;
    auto j = jobs_.find(id);
    if (j != jobs_.end() && j->second.starting) {
      j->second.step_exited = status;  // its report comes first
      continue;
    }
    by_pid_.erase(p);
    step_ended(id, status);
  }
}

void job_supervisor::step_ended(std::int64_t job_id, int step_status) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  job j = std::move(it->second);
  jobs_.erase(it);
  by_pid_.erase(j.step);
  // The job is over; whatever it left in its group goes too.
  signal_job(j.pgid, j.step, SIGKILL);
  job_outcome out;
  out.job_id = j.id;
  std::ifstream in(record(j.id, "status"));
  int status = 0;
  std::uint64_t oom = 0;
  if (j.cgroup && cgroups_->exists(j.id)) {
    // The step died before it emptied the cgroup (SIGKILL): we do.
    oom = cgroups_->oom_kills(j.id);
    release_cgroup(j.id);
  }
  std::int64_t fenced = 0;
  if (in >> status) {
    std::uint64_t recorded = 0;
    if (in >> recorded) oom = std::max(oom, recorded);
    in >> fenced;  // absent in a record of an older step: 0
    out.measured = parse_measure(in);
    out.status = decode_wait_status(status);
  } else {
    // The step died before it could write (SIGKILL): the job with it.
    out.status = decode_wait_status(step_status);
    if (!out.status.signaled()) out.status.term_signal = SIGKILL;
  }
  if (j.killed_as) {
    out.state = *j.killed_as;
  } else {
    out.state = (!out.status.signaled() && out.status.exit_code == 0) ? core::job_state::completed
                                                                        : core::job_state::failed;
  }
  if (fenced != 0 && !j.killed_as) out.reason = fencing_reason(fenced);
  // An OOM kill in its cgroup ends it OUT_OF_MEMORY, unless it was already
  // being cancelled or timed out; the kernel's count is the reason.
  if (j.cgroup) out.step = j.cgroup_step;
  if (oom > 0 && (!j.killed_as || *j.killed_as == core::job_state::out_of_memory)) {
    out.state = core::job_state::out_of_memory;
    out.reason = j.oom_reason.empty() ? oom_reason(oom, j.memory_limit_mb, j.cgroup_step) : j.oom_reason;
  }
  if (on_exit_) on_exit_(out);
}

}  // namespace aqs::node

namespace aqs::node {

std::string job_supervisor::fencing_reason(std::int64_t fenced_ms) {
  if (fenced_ms < 0) {
    return "fenced: its node agent had been gone for " + std::to_string(-fenced_ms) +
           " ms, so the job ended itself before aqsd could start it elsewhere";
  }
  return "fenced: aqsd had acknowledged none of its node agent's heartbeats for " + std::to_string(fenced_ms) +
         " ms (the agent's --node-down-timeout less a heartbeat and 2 s), so the job ended itself before aqsd could "
         "declare the node DOWN and start it elsewhere";
}

std::string job_supervisor::oom_reason(std::uint64_t kills, std::uint64_t limit_mb, const std::string& step) const {
  std::string text = "the kernel's OOM killer killed " + std::to_string(kills) +
                     (kills == 1 ? " process" : " processes") + " in the job's cgroup";
  if (!step.empty()) text += " (step " + step + ")";
  if (limit_mb > 0) text += " at its memory limit of " + std::to_string(limit_mb) + " MB";
  if (cgroups_) text += cgroups_->version() == 1 ? " (cgroup v1 memory.oom_control oom_kill)" : " (cgroup v2 memory.events oom_kill)";
  return text;
}

bool job_supervisor::set_cpus(std::int64_t job_id, const std::vector<int>& cpus) {
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !it->second.cgroup) return false;
  // The same cpus again (a repeated job_cpus, a node whose share a resize
  // left as it was): no write. Before Linux 6.2 a write of cpuset.cpus,
  // even an unchanged one, resets the affinity of every task in it to the
  // whole cpuset, undoing the pinning of the job's ranks.
  std::vector<int> now = cgroups_->cpus(job_id), want = cpus;
  std::sort(now.begin(), now.end());
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  if (now == want) return true;
  cgroups_->set_cpus(job_id, cpus);
  return true;
}

void job_supervisor::release_cgroup(std::int64_t job_id) {
  if (!cgroups_ || !cgroups_->exists(job_id)) return;
  cgroups_->kill_all(job_id);
  cgroups_->remove(job_id);
}

}  // namespace aqs::node

namespace aqs::node {

std::string format_measure(const job_measure& m) {
  return " " + std::to_string(m.user_cpu_us) + " " + std::to_string(m.system_cpu_us) + " " +
         std::to_string(m.max_rss_kb);
}

std::optional<job_measure> parse_measure(std::istream& in) {
  job_measure m;
  if (!(in >> m.user_cpu_us >> m.system_cpu_us >> m.max_rss_kb)) return std::nullopt;
  if (m.user_cpu_us < 0 || m.system_cpu_us < 0 || m.max_rss_kb < 0) return std::nullopt;
  return m;
}

}  // namespace aqs::node
