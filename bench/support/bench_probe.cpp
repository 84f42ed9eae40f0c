// bench_probe: users, commands as a user, a daemon seen from outside.
#include "bench_probe.hpp"

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>

#include "bench_system.hpp"
#include "proc_probe.hpp"

namespace aqs::bench {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bench_user make_user(const std::string& name) {
  bench_user u{name};
  if (::getpwnam(name.c_str()) == nullptr) {
    const std::string cmd = "/usr/sbin/useradd --system --no-create-home --shell /usr/sbin/nologin " + name;
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("useradd " + name + " failed");
    u.made = true;
  }
  const passwd* pw = ::getpwnam(name.c_str());
  if (pw == nullptr) throw std::runtime_error("no user " + name);
  u.uid = pw->pw_uid;
  u.gid = pw->pw_gid;
  return u;
}

void remove_user(const bench_user& u) {
  if (u.made) (void)std::system(("/usr/sbin/userdel " + u.name + " >/dev/null 2>&1").c_str());
}

std::string run_as(uid_t uid, gid_t gid, const std::vector<std::string>& argv, const std::string& cwd) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(126);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(argv[0] + " failed (wait status " + std::to_string(status) + "): " + trim(out));
  }
  return out;
}

void write_text(const fs::path& p, const std::string& text, fs::perms perms) {
  std::ofstream out(p);
  if (!out) throw std::runtime_error("cannot write " + p.string());
  out << text;
  out.close();
  fs::permissions(p, perms);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string last_line(std::string s) {
  s = trim(std::move(s));
  return s.substr(s.rfind('\n') + 1);
}

pid_t find_process(std::string_view program, std::string_view mention) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    const std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string argv0 = cmd.substr(0, cmd.find('\0'));
    if (argv0.ends_with(program) && cmd.find(mention) != std::string::npos) return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

double rss_mb(pid_t pid) {
  const long kib = testbed::rss_kib(pid);
  return kib < 0 ? 0 : static_cast<double>(kib) / 1024.0;
}

int open_fds(pid_t pid) { return testbed::open_fds(pid); }

std::string wait_file(const fs::path& p, std::chrono::seconds limit, const fs::path& log) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    throw_if_interrupted();
    const std::string s = trim(slurp(p));
    if (!s.empty()) return s;
    std::this_thread::sleep_for(100ms);
  }
  throw std::runtime_error(p.string() + " did not appear within " + std::to_string(limit.count()) + " s; log: " +
                           slurp(log));
}

void send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

unsigned http_get(int port, const std::string& token, const std::string& target) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return 0;
  }
  send_all(fd, "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
                   "\r\nConnection: close\r\n\r\n");
  std::string got;
  const auto end = std::chrono::steady_clock::now() + 30s;
  char buf[65536];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;  // Connection: close: the whole answer has come
    got.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return got.starts_with("HTTP/1.1 ") && got.size() >= 12 ? static_cast<unsigned>(std::stoi(got.substr(9, 3))) : 0;
}

}  // namespace aqs::bench
