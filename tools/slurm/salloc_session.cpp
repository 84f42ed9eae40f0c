// salloc_session: salloc's interactive shell in an allocation, the holder
// that keeps the allocation and runs srun's steps in it, and srun's side
// in the shell (see salloc_session.hpp).
#include "slurm/salloc_session.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "client/client_connection.hpp"
#include "slurm/slurm_client.hpp"
#include "slurm/slurm_commands.hpp"
#include "client/submit.hpp"

extern char** environ;

namespace aqs::slurm {

namespace {

using namespace std::chrono_literals;

constexpr const char* k_tag = "AQS-SALLOC ";

volatile std::sig_atomic_t g_signal = 0;  // the last signal salloc or srun caught
void on_signal(int sig) { g_signal = sig; }

void catch_signals(std::initializer_list<int> sigs) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int s : sigs) ::sigaction(s, &sa, nullptr);
}

std::vector<std::string> environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

std::string key_of(const std::string& kv) { return kv.substr(0, kv.find('=')); }

bool write_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// One line from fd (without its '\n'), at most `limit` bytes, waiting at
// most `wait`; nullopt on EOF, error or timeout.
std::optional<std::string> read_line(int fd, std::size_t limit, std::chrono::milliseconds wait) {
  std::string line;
  const auto until = std::chrono::steady_clock::now() + wait;
  char c = 0;
  while (line.size() < limit) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    if (c == '\n') return line;
    line += c;
  }
  return std::nullopt;
}

int connect_unix(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

// Sends one byte `what` with `fds` attached.
bool send_with_fds(int sock, char what, const std::vector<int>& fds) {
  iovec iov{&what, 1};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    m.msg_control = control.data();
    m.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  return ::sendmsg(sock, &m, MSG_NOSIGNAL) == 1;
}

// Receives the one byte and up to 3 descriptors.
std::optional<char> receive_with_fds(int sock, std::vector<int>& fds) {
  char what = 0;
  iovec iov{&what, 1};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 3)];
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  pollfd p{sock, POLLIN, 0};
  if (::poll(&p, 1, 10000) <= 0) return std::nullopt;
  if (::recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1) return std::nullopt;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < n; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.push_back(fd);
    }
  }
  if ((m.msg_flags & MSG_CTRUNC) != 0) return std::nullopt;
  return what;
}

int status_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// ---- the holder ----

// The job's variables salloc's shell gets (Slurm's salloc sets the job's,
// not a task's).
bool for_the_shell(const std::string& key) {
  if (!key.starts_with("SLURM_")) return false;
  for (const char* k : {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_CPUS_ON_NODE", "SLURM_STEP_ID",
                        "SLURM_STEPID", "SLURM_TASK_PID", "SLURM_GTIDS"}) {
    if (key == k) return false;
  }
  return !key.starts_with("SLURM_STEP_");
}

// A step request: run srun (inside the job) with the requester's command
// line, directory, environment and descriptors; forward its signals;
// answer "exit N".
[[noreturn]] void serve_step(int conn, const std::vector<int>& fds, const std::string& srun_path) {
  ::signal(SIGCHLD, SIG_DFL);
  const auto line = read_line(conn, 8u << 20, 10s);
  if (!line || fds.size() != 3) _exit(1);
  std::vector<std::string> argv{"srun"}, env;
  std::string cwd;
  try {
    const auto j = nlohmann::json::parse(*line);
    for (const auto& a : j.at("argv")) argv.push_back(a.get<std::string>());
    for (const auto& e : j.at("env")) env.push_back(e.get<std::string>());
    cwd = j.at("cwd").get<std::string>();
  } catch (const std::exception&) {
    write_all(conn, "exit 1\n");
    _exit(1);
  }
  // The requester's environment, but the job's placement, Slurm variables
  // and PATH head (its slurm-bin) win: srun runs inside the job.
  const auto job_env = environment();
  auto ours = [](const std::string& k) {
    return k.starts_with("AQS_") || k.starts_with("OMPI_") || k.starts_with("SLURM_") || k.starts_with("SLURMD_") ||
           k.starts_with("PMIX_") || k == "PATH";
  };
  std::vector<std::string> run_env;
  std::string path_tail = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& kv : env) {
    if (kv.starts_with("PATH=")) path_tail = kv.substr(5);
    if (!ours(key_of(kv))) run_env.push_back(kv);
  }
  std::string head;
  for (const auto& kv : job_env) {
    if (kv.starts_with("PATH=")) head = kv.substr(5, kv.find(':') == std::string::npos ? std::string::npos : kv.find(':') - 5);
    else if (ours(key_of(kv))) run_env.push_back(kv);
  }
  run_env.push_back("PATH=" + (head.empty() ? path_tail : head + ":" + path_tail));
  const pid_t step = ::fork();
  if (step == 0) {
    ::setpgid(0, 0);
    for (int i = 0; i < 3; ++i) ::dup2(fds[static_cast<std::size_t>(i)], i);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) {
      std::fprintf(stderr, "srun: warning: cannot change to %s on the allocation's node: %s\n", cwd.c_str(),
                   std::strerror(errno));
    }
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2}) ::signal(s, SIG_DFL);
    std::vector<char*> a, e;
    for (auto& w : argv) a.push_back(w.data());
    a.push_back(nullptr);
    for (auto& w : run_env) e.push_back(w.data());
    e.push_back(nullptr);
    ::execve(srun_path.c_str(), a.data(), e.data());
    std::fprintf(stderr, "srun: error: cannot run %s: %s\n", srun_path.c_str(), std::strerror(errno));
    _exit(127);
  }
  for (int fd : fds) ::close(fd);
  if (step < 0) {
    write_all(conn, "exit 1\n");
    _exit(1);
  }
  std::string pending;
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(step, &status, WNOHANG);
    if (r == step) {
      write_all(conn, "exit " + std::to_string(status_code(status)) + "\n");
      _exit(0);
    }
    pollfd p{conn, POLLIN, 0};
    if (::poll(&p, 1, 200) > 0) {
      char buf[256];
      const ssize_t n = ::read(conn, buf, sizeof buf);
      if (n <= 0) {
        // srun went away (killed): so does its step.
        ::killpg(step, SIGKILL);
        ::waitpid(step, &status, 0);
        _exit(0);
      }
      pending.append(buf, static_cast<std::size_t>(n));
      for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
        const std::string cmd = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        if (cmd.starts_with("signal ")) {
          const int sig = std::atoi(cmd.c_str() + 7);
          if (sig > 0 && sig < 65) ::killpg(step, sig);
        }
      }
      if (pending.size() > 4096) pending.clear();
    }
  }
}

}  // namespace

void read_announcement(const std::string& line, holder_announcement& a) {
  if (!line.starts_with(k_tag)) return;
  const std::string rest = line.substr(std::strlen(k_tag));
  if (rest.starts_with("ENV ") && rest.find('=') != std::string::npos) {
    a.environment.push_back(rest.substr(4));
  } else if (rest.starts_with("SOCKET ")) {
    a.socket = rest.substr(7);
  } else if (rest == "READY") {
    a.ready = true;
  }
}

int run_allocation_holder(const std::string& srun_path) {
  char dir_template[] = "/tmp/aqs-salloc-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) {
    std::fprintf(stderr, "salloc: error: cannot make the allocation's socket directory: %s\n", std::strerror(errno));
    return 1;
  }
  const std::string dir = dir_template;  // 0700, the job's user's
  const std::string path = dir + "/steps.sock";
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (listener < 0 || ::bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 16) != 0) {
    std::fprintf(stderr, "salloc: error: cannot listen on %s: %s\n", path.c_str(), std::strerror(errno));
    ::rmdir(dir.c_str());
    return 1;
  }
  auto cleanup = [&] {
    ::unlink(path.c_str());
    ::rmdir(dir.c_str());
  };
  // Per-step children are reaped by the kernel.
  ::signal(SIGCHLD, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  catch_signals({SIGTERM, SIGHUP, SIGINT});
  std::string text;
  bool have_jobid = false;
  std::string job_id;
  for (const auto& kv : environment()) {
    if (!for_the_shell(key_of(kv)) || kv.find('\n') != std::string::npos) continue;
    text += std::string(k_tag) + "ENV " + kv + "\n";
    if (kv.starts_with("SLURM_JOBID=")) have_jobid = true;
    if (kv.starts_with("SLURM_JOB_ID=")) job_id = kv.substr(13);
  }
  if (!have_jobid && !job_id.empty()) text += std::string(k_tag) + "ENV SLURM_JOBID=" + job_id + "\n";
  text += std::string(k_tag) + "SOCKET " + path + "\n" + k_tag + "READY\n";
  write_all(STDOUT_FILENO, text);
  const uid_t me = ::getuid();
  while (g_signal == 0) {
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, 500) <= 0) continue;
    const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    ucred cred{};
    socklen_t len = sizeof cred;
    // Only the job's user (and root) may run steps in it or end it.
    if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || (cred.uid != me && cred.uid != 0)) {
      write_all(conn, "denied\n");
      ::close(conn);
      continue;
    }
    std::vector<int> fds;
    const auto what = receive_with_fds(conn, fds);
    if (what == 'R') {
      for (int fd : fds) ::close(fd);
      const auto code = read_line(conn, 16, 5s);
      write_all(conn, "released\n");
      ::close(conn);
      cleanup();
      return code ? std::atoi(code->c_str()) & 0xff : 0;
    }
    if (what == 'S') {
      const pid_t child = ::fork();
      if (child == 0) {
        ::close(listener);
        serve_step(conn, fds, srun_path);
      }
    }
    for (int fd : fds) ::close(fd);
    ::close(conn);
  }
  cleanup();
  return 128 + g_signal;
}

int run_step_in_allocation(const std::string& socket, const std::vector<std::string>& args) {
  const int conn = connect_unix(socket);
  if (conn < 0) {
    throw command_error("cannot reach salloc's allocation at " + socket + ": " + std::strerror(errno) +
                        " (srun in salloc's shell runs on the machine of the allocation's first node)");
  }
  ::signal(SIGPIPE, SIG_IGN);
  std::error_code ec;
  const nlohmann::json req{{"argv", args}, {"env", environment()}, {"cwd", std::filesystem::current_path(ec).string()}};
  if (!send_with_fds(conn, 'S', {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) || !write_all(conn, req.dump() + "\n")) {
    // The holder may have said why before it closed.
    const auto why = read_line(conn, 64, 1s);
    ::close(conn);
    if (why) throw command_error("salloc's allocation refused this step: " + *why);
    throw command_error("cannot hand this step to salloc's allocation at " + socket);
  }
  // Signals go to the step (Ctrl-C: its tasks get SIGINT).
  catch_signals({SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2});
  std::string got;
  while (true) {
    if (const int sig = g_signal; sig != 0) {
      g_signal = 0;
      write_all(conn, "signal " + std::to_string(sig) + "\n");
    }
    pollfd p{conn, POLLIN, 0};
    const int r = ::poll(&p, 1, 200);
    if (r <= 0) continue;
    char buf[64];
    const ssize_t n = ::read(conn, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
    if (const auto nl = got.find('\n'); nl != std::string::npos) {
      ::close(conn);
      const std::string line = got.substr(0, nl);
      if (line.starts_with("exit ")) return std::atoi(line.c_str() + 5);
      throw command_error("salloc's allocation refused this step: " + line);
    }
  }
  ::close(conn);
  throw command_error("salloc's allocation ended before this step did");
}

int run_interactive_salloc(const std::vector<std::string>& options, const std::string& self) {
  std::vector<std::string> line = options;
  line.insert(line.end(), {"--no-mpi", "--", self, k_holder_argument});
  const auto cmd = cmdline::parse_frun_command_line(line);
  const auto ctx = client::this_process_context();
  protocol::submit submit = cmdline::build_frun_request(cmd, ctx);
  if (!cmd.options.job_name) submit.job.name = "interactive";  // Slurm's name for salloc's shell
  client::connection c(client::socket_path(cmd.options.socket));
  ::signal(SIGPIPE, SIG_IGN);
  catch_signals({SIGINT, SIGTERM, SIGHUP, SIGQUIT});
  submit.id = c.next_id();
  const std::int64_t job = c.ask(submit).job_id;
  const auto jobs = std::to_string(job);
  const std::int64_t watch = c.next_id();
  c.send(protocol::watch_job{watch, job});

  // Until the holder has said where it listens.
  const auto asked = std::chrono::steady_clock::now();
  bool running = false, said_pending = false;
  holder_announcement a;
  std::string partial;
  std::optional<protocol::job_event> ended;
  while (!a.ready && !ended) {
    if (g_signal != 0) {
      protocol::cancel k;
      k.id = c.next_id();
      k.job_ids = {job};
      try {
        c.call(k);
      } catch (const client::client_error&) {
      }
      std::fprintf(stderr, "salloc: Job allocation %s has been revoked.\n", jobs.c_str());
      return 1;
    }
    if (!running && !said_pending && std::chrono::steady_clock::now() - asked > 1s) {
      said_pending = true;
      std::fprintf(stderr, "salloc: Pending job allocation %s\nsalloc: job %s queued and waiting for resources\n",
                   jobs.c_str(), jobs.c_str());
    }
    auto m = c.next(200ms);
    if (!m) continue;
    if (auto* o = std::get_if<protocol::output>(&*m); o && o->id == watch) {
      if (o->stream == "stderr") {
        write_all(STDERR_FILENO, o->data);
        continue;
      }
      partial += o->data;
      for (auto nl = partial.find('\n'); nl != std::string::npos; nl = partial.find('\n')) {
        read_announcement(partial.substr(0, nl), a);
        partial.erase(0, nl + 1);
      }
    } else if (auto* e = std::get_if<protocol::job_event>(&*m); e && e->id == watch) {
      if (core::holds_processors(e->state) && !running) {
        running = true;
        if (said_pending) std::fprintf(stderr, "salloc: job %s has been allocated resources\n", jobs.c_str());
        std::fprintf(stderr, "salloc: Granted job allocation %s\n", jobs.c_str());
      }
      if (core::is_final(e->state)) ended = *e;
    } else if (auto* err = std::get_if<protocol::error>(&*m); err && err->id == watch) {
      throw client::client_error(err->message, err->code);
    }
  }
  if (!a.ready) {
    std::fprintf(stderr, "salloc: error: Allocation was revoked for job %s before command could be run\n", jobs.c_str());
    return 1;
  }
  std::string nodelist;
  for (const auto& kv : a.environment) {
    if (kv.starts_with("SLURM_JOB_NODELIST=")) nodelist = kv.substr(19);
  }
  std::fprintf(stderr, "salloc: Waiting for resource configuration\nsalloc: Nodes %s are ready for job\n",
               nodelist.c_str());

  // The shell: $SHELL, else the user's login shell, else /bin/sh.
  std::string shell = std::getenv("SHELL") != nullptr ? std::getenv("SHELL") : "";
  if (shell.empty() || ::access(shell.c_str(), X_OK) != 0) {
    const passwd* pw = ::getpwuid(::getuid());
    shell = pw != nullptr && pw->pw_shell != nullptr && ::access(pw->pw_shell, X_OK) == 0 ? pw->pw_shell : "/bin/sh";
  }
  std::vector<std::string> env;
  for (const auto& kv : environment()) {
    const std::string k = key_of(kv);
    bool replaced = k == k_salloc_socket_variable;
    for (const auto& ours : a.environment) replaced = replaced || key_of(ours) == k;
    if (!replaced) env.push_back(kv);
  }
  env.insert(env.end(), a.environment.begin(), a.environment.end());
  env.push_back(std::string(k_salloc_socket_variable) + "=" + a.socket);

  // As Slurm's salloc: the shell gets the terminal (its own process group
  // in the foreground); salloc takes it back when the shell ends.
  const bool interactive = ::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
  if (interactive) {
    for (int s : {SIGTSTP, SIGTTIN, SIGTTOU}) ::signal(s, SIG_IGN);
    ::setpgid(0, 0);
    ::tcsetpgrp(STDIN_FILENO, ::getpid());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = ::fork();
  if (child < 0) throw command_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    ::setpgid(0, 0);
    if (interactive) ::tcsetpgrp(STDIN_FILENO, ::getpid());
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU}) ::signal(s, SIG_DFL);
    std::vector<char*> argv{shell.data(), nullptr}, envp;
    for (auto& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    ::execve(shell.c_str(), argv.data(), envp.data());
    std::fprintf(stderr, "salloc: error: Unable to exec command \"%s\": %s\n", shell.c_str(), std::strerror(errno));
    _exit(127);
  }
  ::setpgid(child, child);
  int status = 0;
  bool revoked = false, hung_up = false;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  while (true) {
    const pid_t r = ::waitpid(child, &status, WNOHANG);
    if (r == child) break;
    if (g_signal != 0 && !hung_up) {
      // salloc was told to end (hangup, SIGTERM): so is the shell, and the
      // allocation is given back.
      hung_up = true;
      ::killpg(child, SIGHUP);
      ::killpg(child, SIGCONT);
      kill_at = std::chrono::steady_clock::now() + 5s;
    }
    if (kill_at && std::chrono::steady_clock::now() > *kill_at) ::killpg(child, SIGKILL);
    std::optional<protocol::message> m;
    try {
      m = revoked ? std::nullopt : c.next(200ms);
    } catch (const client::client_error&) {
      std::this_thread::sleep_for(200ms);
    }
    if (revoked) std::this_thread::sleep_for(200ms);
    if (!m) continue;
    if (auto* e = std::get_if<protocol::job_event>(&*m); e && e->id == watch && core::is_final(e->state)) {
      // The allocation ended under the shell (time limit, scancel).
      revoked = true;
      ended = *e;
      std::fprintf(stderr, "salloc: Job allocation %s has been revoked.\n", jobs.c_str());
      if (interactive) {
        const pid_t fg = ::tcgetpgrp(STDIN_FILENO);
        if (fg > 0 && fg != child && fg != ::getpgrp()) ::killpg(fg, SIGHUP);
      }
      ::killpg(child, SIGHUP);
      ::killpg(child, SIGCONT);
      kill_at = std::chrono::steady_clock::now() + 5s;
    } else if (auto* o = std::get_if<protocol::output>(&*m); o && o->id == watch && o->stream == "stderr") {
      write_all(STDERR_FILENO, o->data);
    }
  }
  if (interactive) ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
  // salloc's status: the shell's; a shell ended by the user's own hangup,
  // interrupt or kill counts as a normal end (Slurm's rule).
  int rc = 1;
  if (WIFEXITED(status)) {
    rc = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    rc = sig == SIGHUP || sig == SIGINT || sig == SIGQUIT || sig == SIGKILL ? 0 : 1;
  }
  if (revoked) return rc;
  std::fprintf(stderr, "salloc: Relinquishing job allocation %s\n", jobs.c_str());
  // The holder ends the job with the shell's code (COMPLETED or FAILED, as
  // Slurm records salloc's); if it cannot be reached, aqsd cancels it.
  bool released = false;
  if (const int h = connect_unix(a.socket); h >= 0) {
    released = send_with_fds(h, 'R', {}) && write_all(h, std::to_string(rc) + "\n") &&
               read_line(h, 64, 10s).value_or("") == "released";
    ::close(h);
  }
  if (!released) {
    protocol::cancel k;
    k.id = c.next_id();
    k.job_ids = {job};
    try {
      c.call(k);
    } catch (const client::client_error& e) {
      std::fprintf(stderr, "salloc: error: Unable to clean up job allocation %s: %s\n", jobs.c_str(), e.what());
    }
  }
  // Until aqsd has the job's end (bounded).
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (!ended && std::chrono::steady_clock::now() < until) {
    try {
      auto m = c.next(200ms);
      if (!m) continue;
      if (auto* e = std::get_if<protocol::job_event>(&*m); e && e->id == watch && core::is_final(e->state)) ended = *e;
    } catch (const client::client_error&) {
      break;
    }
  }
  return rc;
}

std::vector<std::string> salloc_command_line::frun_line() const {
  std::vector<std::string> line = options;
  line.insert(line.end(), {"--no-mpi", "--"});
  line.insert(line.end(), command.begin(), command.end());
  return line;
}

salloc_command_line parse_salloc_args(const std::vector<std::string>& raw) {
  const translated_args t = translate_submit_args(raw, false, [](const std::string& o, const auto& v) {
    return parser_accepts(cmdline::parse_frun_command_line, o, v, "true");
  });
  salloc_command_line out;
  out.warnings = t.warnings;
  out.options.assign(t.args.begin(), t.args.begin() + static_cast<std::ptrdiff_t>(t.command_at));
  out.command.assign(t.args.begin() + static_cast<std::ptrdiff_t>(t.command_at), t.args.end());
  if (!out.command.empty() && out.command.front() == "--") out.command.erase(out.command.begin());
  if (!out.command.empty()) (void)cmdline::parse_frun_command_line(out.frun_line());
  return out;
}

}  // namespace aqs::slurm
