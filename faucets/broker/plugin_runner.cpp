// plugin_runner: fork/exec of a broker plugin with a socket for stdin (so
// that a plugin that never reads cannot raise SIGPIPE here), pipes for its
// stdout and stderr, a poll loop against one deadline, SIGKILL to the group.
#include "broker/plugin_runner.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace aqs::faucets {

namespace {

struct fd_guard {
  int fd = -1;
  ~fd_guard() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

std::string seconds_text(std::chrono::milliseconds ms) {
  const auto n = ms.count();
  if (n % 1000 == 0) return std::to_string(n / 1000) + " s";
  return std::to_string(n) + " ms";
}

// The first line of `s`, printable, at most 200 characters.
std::string one_line(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '\n' || out.size() >= 200) break;
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  return out;
}

[[noreturn]] void exec_child(int in_fd, int out_fd, int err_fd, char* const* argv, char* const* envp) {
  ::setpgid(0, 0);
  if (::dup2(in_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) ::_exit(126);
  ::close_range(3, ~0U, 0);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
  rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  if (::chdir("/") != 0) ::_exit(126);
  ::execve(argv[0], argv, envp);
  ::_exit(127);
}

}  // namespace

run_outcome run_plugin_program(const std::vector<std::string>& args, const std::string& input,
                               const std::string& plugin_name, const run_limits& limits) {
  run_outcome r;
  if (args.empty() || args[0].empty() || args[0][0] != '/') {
    r.failure = "not an absolute path";
    return r;
  }
  // Everything the child needs is made before fork: after it, only
  // async-signal-safe calls (faucetsd has other threads).
  std::vector<std::string> env_text{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
                                    "AQS_BROKER_PLUGIN=" + plugin_name};
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env_text) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int sv[2], outp[2], errp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw std::runtime_error("socketpair failed");
  fd_guard in_parent{sv[0]}, in_child{sv[1]};
  if (::pipe2(outp, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  fd_guard out_parent{outp[0]}, out_child{outp[1]};
  if (::pipe2(errp, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  fd_guard err_parent{errp[0]}, err_child{errp[1]};

  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + limits.time_limit;
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) exec_child(in_child.fd, out_child.fd, err_child.fd, argv.data(), envp.data());
  ::setpgid(pid, pid);  // as the child does: whichever runs first
  in_child.reset();
  out_child.reset();
  err_child.reset();
  for (int fd : {in_parent.fd, out_parent.fd, err_parent.fd}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  std::size_t written = 0;
  if (input.empty()) ::shutdown(in_parent.fd, SHUT_WR);
  bool out_open = true, err_open = true, exited = false, timed_out = false, too_much = false;
  int status = 0;
  char buf[65536];
  while (true) {
    // The leader's exit is seen without reaping it, so that its pid (the
    // group's id) stays ours until the group has been killed.
    if (!exited) {
      siginfo_t si{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) exited = true;
    }
    if (exited && !out_open) break;  // its stderr may stay open in a grandchild: not waited for
    if (too_much) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      timed_out = true;
      break;
    }
    pollfd fds[3];
    nfds_t n = 0;
    int out_i = -1, err_i = -1, in_i = -1;
    if (out_open) { out_i = static_cast<int>(n); fds[n++] = {out_parent.fd, POLLIN, 0}; }
    if (err_open) { err_i = static_cast<int>(n); fds[n++] = {err_parent.fd, POLLIN, 0}; }
    if (in_parent.fd >= 0 && written < input.size()) { in_i = static_cast<int>(n); fds[n++] = {in_parent.fd, POLLOUT, 0}; }
    // Short waits while the leader runs without any pipe to watch.
    auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    if (!exited) wait_ms = std::min<long long>(wait_ms, 20);
    const int ready = ::poll(fds, n, static_cast<int>(wait_ms));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    if (in_i >= 0 && (fds[in_i].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t w = ::send(in_parent.fd, input.data() + written, input.size() - written, MSG_NOSIGNAL);
      if (w > 0) written += static_cast<std::size_t>(w);
      if (w < 0 && errno != EAGAIN && errno != EINTR) written = input.size();  // it stopped reading: fine
      if (written >= input.size()) in_parent.reset();
    }
    if (out_i >= 0 && (fds[out_i].revents & (POLLIN | POLLHUP | POLLERR))) {
      const ssize_t k = ::read(out_parent.fd, buf, sizeof buf);
      if (k > 0) {
        r.output.append(buf, static_cast<std::size_t>(k));
        if (r.output.size() > limits.max_output) too_much = true;
      } else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
        out_open = false;
      }
    }
    if (err_i >= 0 && (fds[err_i].revents & (POLLIN | POLLHUP | POLLERR))) {
      const ssize_t k = ::read(err_parent.fd, buf, sizeof buf);
      if (k > 0) {
        const std::size_t room = limits.max_stderr > r.stderr_text.size() ? limits.max_stderr - r.stderr_text.size() : 0;
        r.stderr_text.append(buf, std::min(room, static_cast<std::size_t>(k)));
      } else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
        err_open = false;
      }
    }
  }
  // Nothing it started outlives the decision.
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  if (timed_out) {
    r.failure = "timed out after " + seconds_text(limits.time_limit) + " (killed)";
  } else if (too_much) {
    r.failure = "printed more than " + std::to_string(limits.max_output) + " bytes (killed)";
  } else if (!exited) {
    r.failure = "could not be watched";
  } else if (WIFSIGNALED(status)) {
    r.failure = std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + ::strsignal(WTERMSIG(status)) + ")";
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    r.failure = "exited with status " + std::to_string(WEXITSTATUS(status));
    if (WEXITSTATUS(status) == 127 && r.stderr_text.empty()) r.failure += " (cannot be executed)";
  } else {
    r.ok = true;
  }
  if (!r.ok) {
    if (!r.stderr_text.empty()) r.failure += ": " + one_line(r.stderr_text);
    r.output.clear();
  }
  return r;
}

}  // namespace aqs::faucets
