// netns_hosts: hosts as network namespaces on a private bridge.
#include "netns_hosts.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

extern char** environ;

namespace aqs::testbed {

namespace {

std::atomic<int> counter{0};

const std::string& ip_binary() {
  static const std::string path = std::filesystem::exists("/usr/sbin/ip") ? "/usr/sbin/ip" : "/sbin/ip";
  return path;
}

struct ip_result {
  int status = -1;  // exit status, or 128 + signal
  std::string err;
};

// Runs `ip args...`, its stdin and stdout on /dev/null, and returns what it
// wrote on stderr.
ip_result run_ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv{ip_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  int err[2];
  if (::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  ::close(err[1]);
  ip_result r;
  if (rc != 0) {
    ::close(err[0]);
    r.err = argv[0] + ": " + std::strerror(rc);
    return r;
  }
  char buf[1024];
  for (;;) {
    const ssize_t n = ::read(err[0], buf, sizeof buf);
    if (n > 0) {
      r.err.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(err[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return r;
}

// Runs `ip args...`; throws std::runtime_error, on one line, when it fails.
void ip_must(const std::vector<std::string>& args) {
  const ip_result r = run_ip(args);
  if (r.status == 0) return;
  std::string line = "ip";
  for (const auto& a : args) line += " " + a;
  std::string why = r.err;
  for (auto& c : why) {
    if (c == '\n') c = ' ';
  }
  while (!why.empty() && why.back() == ' ') why.pop_back();
  throw std::runtime_error(line + ": " + (why.empty() ? "exit status " + std::to_string(r.status) : why));
}

// `word` quoted for /bin/sh.
std::string sh_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

bool netns_hosts::available() {
  if (::geteuid() != 0) return false;
  const std::string probe = "aqsprobe" + std::to_string(::getpid() % 100000);
  if (run_ip({"netns", "add", probe}).status != 0) return false;
  run_ip({"netns", "del", probe});
  return true;
}

netns_hosts::netns_hosts(int n) : n_(n) {
  id_ = (::getpid() * 7 + counter.fetch_add(1)) % 100000;
  bridge_ = "aqb" + std::to_string(id_);
  prefix_ = "10." + std::to_string(100 + (id_ / 250) % 100) + "." + std::to_string(id_ % 250) + ".";
  // The destructor does not run for a constructor that throws: undo here.
  try {
    ip_must({"link", "add", bridge_, "type", "bridge"});
    ip_must({"addr", "add", prefix_ + "1/24", "dev", bridge_});
    ip_must({"link", "set", bridge_, "up"});
    for (int i = 0; i < n_; ++i) {
      const std::string peer = "aqp" + std::to_string(id_) + "h" + std::to_string(i);
      ip_must({"netns", "add", ns(i)});
      ip_must({"link", "add", veth(i), "type", "veth", "peer", "name", peer});
      ip_must({"link", "set", peer, "netns", ns(i)});
      ip_must({"link", "set", veth(i), "master", bridge_});
      ip_must({"link", "set", veth(i), "up"});
      ip_must({"-n", ns(i), "link", "set", peer, "name", "eth0"});
      ip_must({"-n", ns(i), "addr", "add", ip(i) + "/24", "dev", "eth0"});
      ip_must({"-n", ns(i), "link", "set", "eth0", "up"});
      ip_must({"-n", ns(i), "link", "set", "lo", "up"});
    }
  } catch (...) {
    tear_down();
    throw;
  }
}

netns_hosts::~netns_hosts() { tear_down(); }

void netns_hosts::tear_down() noexcept {
  // Each step on its own: what was never made just fails to go.
  try {
    for (int i = 0; i < n_; ++i) {
      run_ip({"link", "del", veth(i)});
      run_ip({"netns", "del", ns(i)});
    }
    run_ip({"link", "del", bridge_});
  } catch (...) {
  }
}

std::string netns_hosts::root_ip() const { return prefix_ + "1"; }
std::string netns_hosts::subnet() const { return prefix_ + "0/24"; }
std::string netns_hosts::ip(int i) const { return prefix_ + std::to_string(10 + i); }
std::string netns_hosts::name(int i) const { return "host" + std::to_string(i); }
std::string netns_hosts::ns(int i) const { return "aqs" + std::to_string(id_) + "h" + std::to_string(i); }
std::string netns_hosts::veth(int i) const { return "aqv" + std::to_string(id_) + "h" + std::to_string(i); }

std::vector<std::string> netns_hosts::on_host(int i, const std::vector<std::string>& argv) const {
  std::vector<std::string> out{ip_binary(), "netns", "exec", ns(i), "unshare", "--uts", "--", "/bin/sh", "-c",
                               "hostname \"$0\" && exec \"$@\"", name(i)};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

void netns_hosts::write_rsh_agent(const std::filesystem::path& path) const {
  std::string text =
      "#!/bin/sh\n"
      "# ssh for the namespace hosts: HOST COMMAND... runs COMMAND with /bin/sh on HOST.\n"
      "host=$1\n"
      "shift\n"
      "case \"$host\" in\n";
  for (int i = 0; i < n_; ++i) {
    std::string line;
    for (const auto& word : on_host(i, {"/bin/sh", "-c"})) line += sh_quote(word) + " ";
    text += "  " + sh_quote(name(i)) + ") exec " + line + "\"$*\" ;;\n";
  }
  text += "  *) echo \"$0: no host '$host'\" >&2; exit 255 ;;\nesac\n";
  {
    std::ofstream out(path, std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
  }
  std::error_code ec;
  std::filesystem::permissions(path, std::filesystem::perms::owner_all, ec);
  if (ec) throw std::runtime_error("cannot make " + path.string() + " executable: " + ec.message());
}

void netns_hosts::cut(int i) { ip_must({"link", "set", veth(i), "down"}); }
void netns_hosts::restore(int i) { ip_must({"link", "set", veth(i), "up"}); }

int free_tcp_port(const std::string& ip) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  socklen_t len = sizeof a;
  const bool ok = ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr) == 1 &&
                  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) throw std::runtime_error("no free TCP port on " + ip + ": " + std::strerror(saved));
  return ntohs(a.sin_port);
}

}  // namespace aqs::testbed
