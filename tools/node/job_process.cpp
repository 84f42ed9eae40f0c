// job_process: fork/exec of a job with an error pipe, as its user, pinned.
#include "job_process.hpp"

#include <dirent.h>

#include <optional>
#include <vector>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process/exec_path.hpp"
#include "unique_fd.hpp"

namespace aqs::node {

namespace {

// What failed in the child, sent to the parent through the error pipe.
struct child_failure {
  int stage;
  int err;
};

enum stage : int {
  k_setpgid = 1, k_groups, k_setgid, k_setuid, k_chdir, k_stdout, k_stderr, k_stdin, k_affinity, k_exec,
  k_cgroup,  // + the index of the cgroup.procs file that refused it
};

std::string describe(const child_failure& f, const launch_spec& spec) {
  const std::string err = std::strerror(f.err);
  switch (f.stage) {
    case k_setpgid: return "cannot create the job's process group: " + err;
    case k_groups: return "cannot set the supplementary groups of uid " + std::to_string(spec.uid.value_or(0)) + ": " + err;
    case k_setgid: return "cannot switch to gid " + std::to_string(spec.gid.value_or(0)) + ": " + err;
    case k_setuid: return "cannot switch to uid " + std::to_string(spec.uid.value_or(0)) + ": " + err;
    case k_chdir: return "cannot enter working directory " + spec.workdir + ": " + err;
    case k_stdout: return "cannot open output file " + spec.stdout_path + ": " + err;
    case k_stderr: return "cannot open error file " + spec.stderr_path + ": " + err;
    case k_stdin: return "cannot open /dev/null: " + err;
    case k_affinity: return "cannot pin the job to its processors: " + err;
    case k_exec: return "cannot execute " + spec.argv[0] + ": " + err;
    default:
      if (f.stage >= k_cgroup && static_cast<std::size_t>(f.stage - k_cgroup) < spec.cgroup_procs.size()) {
        return "cannot enter the job's cgroup (" + spec.cgroup_procs[static_cast<std::size_t>(f.stage - k_cgroup)] +
               "): " + err;
      }
      return "job start failed: " + err;
  }
}

[[noreturn]] void child_fail(int fd, int stage_id) {
  child_failure f{stage_id, errno};
  (void)!::write(fd, &f, sizeof f);
  ::_exit(127);
}

// What a child tries to execute for `program`: itself when it names a path
// (has a '/'), else PATH's directories in order ("" meaning the working
// directory, as for a shell), each joined with it. Made before fork.
std::vector<std::string> exec_candidates(const std::string& program, const std::optional<std::string>& path) {
  if (program.find('/') != std::string::npos) return {program};
  std::vector<std::string> out;
  const std::string p = path.value_or(std::string(process::k_default_exec_path));
  std::size_t start = 0;
  while (true) {
    const std::size_t end = p.find(':', start);
    const std::string dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    out.push_back(dir.empty() ? "./" + program : dir + "/" + program);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace

exit_status decode_wait_status(int status) noexcept {
  exit_status s;
  if (WIFSIGNALED(status)) {
    s.term_signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    s.exit_code = WEXITSTATUS(status);
  }
  return s;
}

report_pipe make_report_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw launch_error(std::string("pipe failed: ") + std::strerror(errno));
  return {unique_fd(fds[0]), unique_fd(fds[1])};
}

pid_t launch(const launch_spec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) throw launch_error("nothing to run: empty command");
  if (spec.stdout_path.empty() && spec.stdout_fd < 0) throw launch_error("no output file given");
  for (const auto& kv : spec.env) {
    if (kv.find('=') == std::string::npos) throw launch_error("environment entry without '=': " + kv);
  }
  // Everything the child needs is prepared here: after fork in a threaded
  // agent only async-signal-safe calls are allowed.
  // The PATH search itself happens in the child, after the switch to the
  // job's user and into its directory, so that it sees what that user may
  // see: searched as root, a program in a directory the user cannot enter
  // was found and then refused "Permission denied", telling the user that
  // the file exists (issue 28). Only the candidates' names are made here
  // (no allocation after fork).
  const std::vector<std::string> candidates = exec_candidates(spec.argv[0], process::path_variable(spec.env));
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::vector<gid_t> groups;
  if (spec.uid) {
    if (passwd* pw = ::getpwuid(*spec.uid); pw != nullptr) {
      int n = 32;
      groups.resize(static_cast<std::size_t>(n));
      gid_t primary = spec.gid.value_or(pw->pw_gid);
      while (::getgrouplist(pw->pw_name, primary, groups.data(), &n) == -1) groups.resize(static_cast<std::size_t>(n));
      groups.resize(static_cast<std::size_t>(n));
    } else {
      groups.push_back(spec.gid.value_or(*spec.uid));  // a uid with no passwd entry: just its group
    }
  }
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int c : spec.cpus) {
    if (c < 0 || c >= CPU_SETSIZE) throw launch_error("processor " + std::to_string(c) + " is out of range");
    CPU_SET(c, &mask);
  }
  auto [error_r, error_w] = make_report_pipe();

  const pid_t pid = ::fork();
  if (pid < 0) throw launch_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    const int fd = error_w.get();
    error_r.reset();
    // Our pid in decimal, by hand (async-signal-safe).
    char self_pid[24];
    std::size_t self_pid_len = 0;
    {
      char rev[24];
      std::size_t n = 0;
      for (long v = ::getpid(); v > 0 && n < sizeof rev; v /= 10) rev[n++] = static_cast<char>('0' + v % 10);
      while (n > 0) self_pid[self_pid_len++] = rev[--n];
    }
    // Into the job's cgroup first (as root, before the user switch): all it
    // runs from here on, and all that forks, is inside.
    for (std::size_t i = 0; i < spec.cgroup_procs.size(); ++i) {
      const int cg = ::open(spec.cgroup_procs[i].c_str(), O_WRONLY | O_CLOEXEC);
      if (cg < 0 || ::write(cg, self_pid, self_pid_len) != static_cast<ssize_t>(self_pid_len)) {
        child_fail(fd, k_cgroup + static_cast<int>(i));
      }
      ::close(cg);
    }
    if (::setpgid(0, 0) != 0) child_fail(fd, k_setpgid);
    // The agent may ignore or block signals; the job starts with defaults.
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!spec.cpus.empty() && ::sched_setaffinity(0, sizeof mask, &mask) != 0) child_fail(fd, k_affinity);
    if (spec.uid) {
      if (::setgroups(groups.size(), groups.data()) != 0) child_fail(fd, k_groups);
      if (::setgid(spec.gid.value_or(groups.front())) != 0) child_fail(fd, k_setgid);
      if (::setuid(*spec.uid) != 0) child_fail(fd, k_setuid);
    }
    // After the user switch: files are created, and the directory entered,
    // with the job user's rights, not the agent's.
    if (::chdir(spec.workdir.c_str()) != 0) child_fail(fd, k_chdir);
    ::umask(spec.umask & 0777);
    const int in = ::open("/dev/null", O_RDONLY);
    if (in < 0) child_fail(fd, k_stdin);
    const int out = spec.stdout_fd >= 0 ? spec.stdout_fd
                                        : ::open(spec.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0666);
    if (out < 0) child_fail(fd, k_stdout);
    int err = out;
    if (spec.stdout_fd >= 0) {
      if (spec.stderr_fd >= 0) err = spec.stderr_fd;
    } else if (!spec.stderr_path.empty() && spec.stderr_path != spec.stdout_path) {
      err = ::open(spec.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0666);
      if (err < 0) child_fail(fd, k_stderr);
    }
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    // Nothing else of the agent's may reach the job: above all not its
    // authenticated connection to aqsd (Asio sockets are not close-on-exec).
    // The error pipe stays until exec closes it.
    if (fd > 3) ::close_range(3, static_cast<unsigned>(fd) - 1, 0);
    ::close_range(static_cast<unsigned>(fd) + 1, ~0U, 0);
    // As a shell searches: a candidate the user cannot see (missing, or in a
    // directory it may not search) is passed over in silence; one it sees
    // but may not execute is remembered. A name with a '/' is tried alone.
    const bool searched = spec.argv[0].find('/') == std::string::npos;
    bool refused = false;
    for (const auto& c : candidates) {
      struct stat sb {};
      if (searched && (::stat(c.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode))) continue;
      ::execve(c.c_str(), argv.data(), envp.data());
      if (errno != EACCES && errno != ENOENT && errno != ENOTDIR) child_fail(fd, k_exec);
      refused = refused || errno == EACCES;
    }
    if (searched) errno = refused ? EACCES : ENOENT;
    child_fail(fd, k_exec);
  }
  error_w.reset();
  child_failure failure{};
  ssize_t got;
  do {
    got = ::read(error_r.get(), &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  error_r.reset();
  if (got == static_cast<ssize_t>(sizeof failure)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    throw launch_error(describe(failure, spec));
  }
  // EOF: exec succeeded (the pipe closed on exec), and the child made its
  // process group before that, so the caller can signal the group at once.
  return pid;
}

namespace {

struct proc_stat {
  pid_t parent = 0;
  pid_t session = 0;
  pid_t group = 0;
};

// A process's parent and session from /proc/PID/stat ("pid (comm) state ppid
// pgrp session ...": comm may hold anything, so fields are counted from its
// closing parenthesis). nullopt if it is gone.
std::optional<proc_stat> read_proc_stat(pid_t pid) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const unique_fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  char buf[512];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  char state = 0;
  long ppid = 0, pgrp = 0, sid = 0;
  if (p == nullptr || std::sscanf(p + 1, " %c %ld %ld %ld", &state, &ppid, &pgrp, &sid) != 4) return std::nullopt;
  return proc_stat{static_cast<pid_t>(ppid), static_cast<pid_t>(sid), static_cast<pid_t>(pgrp)};
}

// Whether `ancestor` is among the ancestors of `pid`.
bool descends_from(pid_t pid, pid_t ancestor) noexcept {
  for (int depth = 0; depth < 128 && pid > 1; ++depth) {
    const auto st = read_proc_stat(pid);
    if (!st) return false;
    pid = st->parent;
    if (pid == ancestor) return true;
  }
  return false;
}

}  // namespace

void signal_session(pid_t session, pid_t except, int sig) noexcept {
  if (session <= 1) return;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 1 || pid == except) continue;
    const auto st = read_proc_stat(static_cast<pid_t>(pid));
    if (st && st->session == session) ::kill(static_cast<pid_t>(pid), sig);
  }
  ::closedir(d);
}

int signal_tagged(std::int64_t job_id, int sig, pid_t except_group) noexcept {
  char tag[48];
  const int tag_len = std::snprintf(tag, sizeof tag, "AQS_JOB_ID=%lld", static_cast<long long>(job_id));
  const pid_t self = ::getpid();
  int n = 0;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return 0;
  std::vector<char> env(1 << 16);
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 1 || pid == self) continue;
    if (except_group > 0) {
      const auto st = read_proc_stat(static_cast<pid_t>(pid));
      if (!st || pid == except_group || st->group == except_group) continue;
    }
    // Only our own descendants: other agents on this machine (virtual
    // nodes) may run another part, or a new instance, of the same job.
    // Asked first, from stat files alone: reading a process's environ
    // waits for its memory-map lock, which a busy process may hold for
    // seconds (issue 30), so no other process's environment is read.
    if (!descends_from(static_cast<pid_t>(pid), self)) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    const unique_fd fd(::open(path, O_RDONLY | O_CLOEXEC));
    if (!fd) continue;
    std::size_t len = 0;
    for (ssize_t r; len < env.size() && (r = ::read(fd.get(), env.data() + len, env.size() - len)) > 0;) {
      len += static_cast<std::size_t>(r);
    }
    // Entries are NUL-terminated: look for a whole "AQS_JOB_ID=N" entry.
    for (std::size_t at = 0; at < len;) {
      const char* entry = env.data() + at;
      const std::size_t elen = ::strnlen(entry, len - at);
      if (elen == static_cast<std::size_t>(tag_len) && std::memcmp(entry, tag, elen) == 0) {
        if (::kill(static_cast<pid_t>(pid), sig) == 0) ++n;
        break;
      }
      at += elen + 1;
    }
  }
  ::closedir(d);
  return n;
}

int signal_job_steps(pid_t pgid, pid_t session, int sig) noexcept {
  if (pgid <= 1) return 0;
  int n = 0;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return 0;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 1 || pid == pgid || pid == session) continue;
    const auto st = read_proc_stat(static_cast<pid_t>(pid));
    if (!st || (st->group != pgid && (session <= 1 || st->session != session))) continue;
    if (::kill(static_cast<pid_t>(pid), sig) == 0) ++n;
  }
  ::closedir(d);
  return n;
}

bool signal_job(pid_t pgid, pid_t session, int sig) noexcept {
  const bool group = pgid > 0 && ::kill(-pgid, sig) == 0;
  if (session > 0) signal_session(session, session, sig);
  return group;
}

bool job_alive(pid_t pgid) noexcept {
  return pgid > 0 && (::kill(-pgid, 0) == 0 || errno == EPERM);
}

}  // namespace aqs::node
