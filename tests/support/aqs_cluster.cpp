// aqs_cluster: processes started the way users start them, stopped for sure.
#include "aqs_cluster.hpp"
#include "run_users.hpp"

#include <doctest/doctest.h>

#include <cerrno>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <algorithm>
#include <fstream>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "client/client_connection.hpp"
#include "file_text.hpp"
#include "test_failed.hpp"

extern char** environ;

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace aqs::test {

const binaries& bin() {
  static const binaries b{AQS_AQSD_BINARY, AQS_NODE_BINARY, AQS_FSUB_BINARY, AQS_FRUN_BINARY,
                          AQS_FKILL_BINARY, AQS_FJOBS_BINARY, AQS_FNODES_BINARY, AQS_FCTL_BINARY};
  return b;
}

bool alive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(st, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// fork + exec in a process group of its own; the child's stdout/stderr go to
// the given descriptors (or a log file).
pid_t spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            std::optional<uid_t> uid, std::optional<gid_t> gid, const std::string& cwd, int out_fd, int err_fd,
            bool own_session) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::string user_name;
  if (uid) {
    if (const passwd* pw = ::getpwuid(*uid)) user_name = pw->pw_name;
  }
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (!own_session || ::setsid() < 0) ::setpgid(0, 0);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    ::dup2(null_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    if (uid) {
      if (!user_name.empty()) ::initgroups(user_name.c_str(), gid.value_or(*uid));
      if (::setgid(gid.value_or(*uid)) != 0 || ::setuid(*uid) != 0) ::_exit(126);
    }
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::close_range(3, ~0U, 0);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

namespace {
int decode(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }
}  // namespace

// SIGTERM, then SIGKILL to the group after `grace`; reaps.
void stop_process(pid_t& pid, std::chrono::milliseconds grace) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) {
      pid = -1;
      return;
    }
    std::this_thread::sleep_for(20ms);
  }
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  pid = -1;
}

run_result run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
               std::optional<uid_t> uid, std::optional<gid_t> gid, const std::string& cwd,
               std::chrono::milliseconds timeout) {
  int out[2], err[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
  const pid_t pid = spawn(argv, env, uid, gid, cwd, out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);
  run_result r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int open = 2;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  while (open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(-pid, SIGKILL);
      FAIL_CHECK("command timed out: " << argv[0]);
      break;
    }
    if (::poll(fds, 2, static_cast<int>(left.count())) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[8192];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.status = decode(status);
  return r;
}

cluster::cluster(options o) : o_(std::move(o)) {
  std::string tmpl = (fs::temp_directory_path() / "aqs-e2e.XXXXXX").string();
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  dir_ = tmpl;
  ::chmod(dir_.c_str(), 0755);  // test users reach their directories and the socket through it
  fs::create_directories(workdir());
  agents_.assign(static_cast<std::size_t>(o_.nodes), -1);
  // A failed start (REQUIRE throws) runs no destructor: what started goes here.
  try {
    if (o_.netns) {
      hosts_ = std::make_unique<testbed::netns_hosts>(o_.nodes);
      tcp_port_ = testbed::free_tcp_port(hosts_->root_ip());
    }
    start_aqsd();
    for (int i = 0; i < o_.nodes; ++i) start_agent(i);
    wait_nodes_up(o_.nodes);
  } catch (...) {
    tear_down();
    throw;
  }
}

cluster::~cluster() { tear_down(); }

// The last lines of aqsd's and each agent's log, for a failed test case
// (in CI the directory is gone by the time anyone looks).
void cluster::print_logs() const noexcept {
  try {
    std::vector<fs::path> logs{dir_ / "aqsd.log"};
    for (std::size_t i = 0; i < agents_.size(); ++i) logs.push_back(dir_ / ("node" + std::to_string(i) + ".log"));
    // The jobs' own output (mpirun's and the ranks' messages among it): the
    // test's jobs write it in the work directory (-o DIR/NAME.out).
    std::error_code ec;
    std::vector<fs::path> outputs;
    for (const auto& e : fs::directory_iterator(workdir(), ec)) {
      const auto ext = e.path().extension();
      if (e.is_regular_file(ec) && (ext == ".out" || ext == ".err" || ext == ".log")) outputs.push_back(e.path());
    }
    std::sort(outputs.begin(), outputs.end());
    logs.insert(logs.end(), outputs.begin(), outputs.end());
    for (const auto& p : logs) {
      std::ifstream in(p);
      if (!in) continue;
      std::vector<std::string> lines;
      for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
      const std::size_t keep = 60, from = lines.size() > keep ? lines.size() - keep : 0;
      std::string text;
      for (std::size_t i = from; i < lines.size(); ++i) text += lines[i] + "\n";
      MESSAGE("the test failed; last " << (lines.size() - from) << " of " << lines.size() << " lines of " << p.filename().string()
                                       << ":\n" << text);
    }
  } catch (const std::exception&) {
  }
}

void cluster::tear_down() noexcept {
  if (hosts_) {
    // Agents cut off must hear their stop; a failure here must not throw out
    // of the destructor (the teardown below still runs).
    try {
      for (int i = 0; i < hosts_->size(); ++i) hosts_->restore(i);
    } catch (const std::exception& e) {
      MESSAGE("restoring the hosts' links: " << e.what());
    }
  }
  for (auto& a : agents_) stop_process(a, 15s);
  stop_process(aqsd_, 30s);
  if (current_test_failed()) print_logs();
  // Anything still holding our directory (a job script, a stray agent, the
  // private PostgreSQL of a killed aqsd) goes now.
  for (int round = 0; round < 3; ++round) {
    auto left = leftovers();
    if (left.empty()) break;
    for (pid_t p : left) ::kill(p, SIGKILL);
    std::this_thread::sleep_for(200ms);
  }
  std::error_code ec;
  // AQS_TEST_KEEP=1 keeps the logs (aqsd.log, node-N.log) of every cluster
  // for a post-mortem of a failed run.
  if (const char* keep = std::getenv("AQS_TEST_KEEP"); keep != nullptr && *keep != '\0' && *keep != '0') {
    MESSAGE("kept the cluster's directory " << dir_.string());
  } else {
    fs::remove_all(dir_, ec);
  }
  hosts_.reset();
}

void cluster::start_aqsd() {
  const fs::path log = dir_ / "aqsd.log";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  std::vector<std::string> argv{bin().aqsd, "--state-dir", (dir_ / "state").string(), "--foreground",
                                "--heartbeat-timeout", std::to_string(o_.heartbeat_timeout_s), "--kill-grace", "2",
                                "--policy", o_.policy, "--resize-timeout", std::to_string(o_.resize_timeout_s)};
  if (!o_.db.empty()) {
    argv.push_back("--db");
    argv.push_back(o_.db);
  }
  argv.insert(argv.end(), o_.aqsd_args.begin(), o_.aqsd_args.end());
  // A test's aqsd never reads this machine's /etc/aqs/aqs.conf (an installed
  // AQS, or the packaging test's, would change its partitions and limits):
  // unless the test names a file, an empty one of its own.
  if (std::find(o_.aqsd_args.begin(), o_.aqsd_args.end(), "--config") == o_.aqsd_args.end()) {
    const fs::path conf = dir_ / "aqs.conf";
    if (!fs::exists(conf)) std::ofstream(conf) << "# the test's own: one partition of all nodes\n";
    argv.push_back("--config");
    argv.push_back(conf.string());
  }
  if (hosts_) {
    argv.push_back("--listen");
    argv.push_back(hosts_->root_ip() + ":" + std::to_string(tcp_port_));
  }
  // aqsd in a session of its own, as on a head node apart from the
  // compute nodes: the agents' job steps keep their agents' session (the
  // test's), and 128 oversubscribed ranks there left aqsd too little CPU to
  // answer fjobs within a minute (issue 30).
  aqsd_ = spawn(argv, {}, std::nullopt, std::nullopt, "", fd, fd, true);
  ::close(fd);
  for (int i = 0; i < 600; ++i) {
    if (fs::exists(socket()) && cmd(bin().fnodes, {"--json"}).status == 0) return;
    int status = 0;
    if (::waitpid(aqsd_, &status, WNOHANG) == aqsd_) {
      aqsd_ = -1;
      std::ifstream in(log);
      std::stringstream ss;
      ss << in.rdbuf();
      FAIL("aqsd exited at start ("
           << (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                   : "status " + std::to_string(WEXITSTATUS(status)))
           << "): " << ss.str());
    }
    std::this_thread::sleep_for(50ms);
  }
  FAIL("aqsd did not come up within 30 s");
}

void cluster::kill_aqsd() {
  REQUIRE(aqsd_ > 0);
  ::kill(aqsd_, SIGKILL);
  ::waitpid(aqsd_, nullptr, 0);
  aqsd_ = -1;
}

void cluster::stop_aqsd() { stop_process(aqsd_, 30s); }

int cluster::terminate_aqsd(std::chrono::milliseconds limit) {
  REQUIRE(aqsd_ > 0);
  ::kill(aqsd_, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(aqsd_, &status, WNOHANG) == aqsd_) {
      aqsd_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(20ms);
  }
  stop_process(aqsd_, 0ms);
  return -1;
}

void cluster::start_agent(int i) {
  const std::string name = "node" + std::to_string(i);
  const fs::path log = dir_ / (name + ".log");
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  std::vector<std::string> argv{bin().aqs_node, "--name", name, "--procs", std::to_string(o_.procs_per_node),
                                "--spool", (dir_ / ("spool-" + name)).string(), "--heartbeat",
                                std::to_string(o_.agent_heartbeat_s)};
  argv.insert(argv.end(), o_.agent_args.begin(), o_.agent_args.end());
  if (hosts_) {
    // MPI jobs' traffic held to the hosts' bridge, as an admin would to the
    // cluster's network.
    const std::vector<std::string> tcp{"--server", hosts_->root_ip() + ":" + std::to_string(tcp_port_), "--key",
                                       (dir_ / "state" / "cluster.key").string(), "--mpi-interfaces",
                                       hosts_->subnet()};
    argv.insert(argv.end(), tcp.begin(), tcp.end());
    argv = hosts_->on_host(i, argv);
  } else {
    argv.push_back("--socket");
    argv.push_back(socket());
  }
  agents_.at(static_cast<std::size_t>(i)) = spawn(argv, {}, std::nullopt, std::nullopt, "", fd, fd);
  ::close(fd);
}

void cluster::kill_agent(int i, int sig) {
  pid_t& p = agents_.at(static_cast<std::size_t>(i));
  REQUIRE(p > 0);
  ::kill(p, sig);
  if (sig == SIGKILL) {
    ::waitpid(p, nullptr, 0);
    p = -1;
  }
}

run_result cluster::cmd(const std::string& path, std::vector<std::string> args, const test_user* as,
                        const std::string& cwd) {
  args.insert(args.begin(), path);
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  if (as != nullptr) {
    uid = as->uid;
    gid = as->gid;
  }
  const std::string where = !cwd.empty() ? cwd : as != nullptr ? as->home.string() : workdir().string();
  return run(args, {{"AQS_SOCKET", socket()}}, uid, gid, where);
}

std::int64_t cluster::submit(std::vector<std::string> args, const test_user* as, const std::string& cwd) {
  args.insert(args.begin(), "--parsable");
  const run_result r = cmd(bin().fsub, std::move(args), as, cwd);
  REQUIRE_MESSAGE(r.status == 0, "fsub failed: " << r.err);
  return std::stoll(r.out);
}

std::vector<protocol::job_info> cluster::jobs(bool all) {
  std::vector<std::string> args{"--json"};
  if (all) args.push_back("--all");
  const run_result r = cmd(bin().fjobs, args);
  REQUIRE_MESSAGE(r.status == 0, "fjobs failed: " << r.err);
  return protocol::parse_job_list(nlohmann::json{{"jobs", nlohmann::json::parse(r.out)}});
}

std::vector<protocol::node_info> cluster::nodes() {
  const run_result r = cmd(bin().fnodes, {"--json"});
  REQUIRE_MESSAGE(r.status == 0, "fnodes failed: " << r.err);
  return protocol::parse_node_list(nlohmann::json{{"nodes", nlohmann::json::parse(r.out)}});
}

std::optional<protocol::job_info> cluster::job(std::int64_t id) {
  const run_result r = cmd(bin().fjobs, {"--json", "--all", "-j", std::to_string(id)});
  REQUIRE_MESSAGE(r.status == 0, "fjobs failed: " << r.err);
  auto list = protocol::parse_job_list(nlohmann::json{{"jobs", nlohmann::json::parse(r.out)}});
  if (list.empty()) return std::nullopt;
  return list.front();
}

protocol::job_info cluster::wait_state(std::int64_t id, std::vector<core::job_state> states, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  std::optional<protocol::job_info> j;
  while (std::chrono::steady_clock::now() < until) {
    j = job(id);
    if (j && std::find(states.begin(), states.end(), j->state) != states.end()) return *j;
    std::this_thread::sleep_for(100ms);
  }
  FAIL("job " << id << " is " << (j ? std::string(core::to_string(j->state)) : "unknown") << " after "
              << limit.count() << " s");
  return *j;
}

void cluster::wait_idle(std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (jobs(false).empty()) return;
    std::this_thread::sleep_for(200ms);
  }
  FAIL("jobs still live after " << limit.count() << " s");
}

void cluster::wait_nodes_up(int n, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    int up = 0;
    for (const auto& node : nodes()) up += node.state == protocol::node_state::up;
    if (up >= n) return;
    std::this_thread::sleep_for(100ms);
  }
  FAIL("fewer than " << n << " nodes UP after " << limit.count() << " s");
}

unsigned short cluster::http_port() const {
  const std::string addr = slurp(dir_ / "state" / "aqsd.http");
  REQUIRE_MESSAGE(addr.find(':') != std::string::npos, "no HTTP address in " << (dir_ / "state" / "aqsd.http"));
  return static_cast<unsigned short>(std::stoi(addr.substr(addr.rfind(':') + 1)));
}

test_user system_user(const std::string& name) {
  if (::getpwnam(name.c_str()) == nullptr) {
    users().ensure(name);  // made for this run: removed when the program exits (run_users.hpp)
    const run_result r = run({"/usr/sbin/useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name});
    REQUIRE_MESSAGE((r.status == 0 || r.status == 9), "useradd " << name << ": " << r.err);
  }
  const passwd* pw = ::getpwnam(name.c_str());
  REQUIRE(pw != nullptr);
  return test_user{name, pw->pw_uid, pw->pw_gid, "/"};
}

test_user cluster::user(const std::string& name) {
  test_user u = system_user(name);
  u.home = dir_ / ("home-" + name);
  fs::create_directories(u.home);
  REQUIRE(::chown(u.home.c_str(), u.uid, u.gid) == 0);
  ::chmod(u.home.c_str(), 0700);
  return u;
}

namespace {

// A /proc file's text, or "" when its process went away while it was being
// read: the read then fails with ESRCH, which libstdc++'s filebuf throws
// as std::ios_failure, and from ~cluster() (leftovers()) that terminated
// the test program (seen once in 10 loaded multi-host runs).
std::string proc_text(const fs::path& p) {
  try {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace

std::vector<pid_t> cluster::leftovers() const {
  std::vector<pid_t> out;
  const std::string needle = dir_.string();
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (pid == ::getpid()) continue;
    const std::string cmdline = proc_text(e.path() / "cmdline");
    if (cmdline.find(needle) != std::string::npos && alive(pid)) out.push_back(pid);
  }
  return out;
}

std::vector<pid_t> processes_mentioning(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = proc_text(e.path() / "cmdline");
    const pid_t pid = std::stoi(name);
    if (cmdline.find(needle) != std::string::npos && alive(pid)) out.push_back(pid);
  }
  return out;
}

bool in_a_job(pid_t pid) {
  const std::string env = '\0' + proc_text("/proc/" + std::to_string(pid) + "/environ");
  return env.find(std::string(1, '\0') + "AQS_JOB_ID=") != std::string::npos;
}

std::vector<pid_t> job_processes_mentioning(const std::string& needle) {
  std::vector<pid_t> out = processes_mentioning(needle);
  std::erase_if(out, [](pid_t p) { return !in_a_job(p); });
  return out;
}

token_submit submit_with_token(const cluster& c, const test_user& u, const std::string& token) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    std::string answer = "error cannot become the user";
    if (::setgroups(0, nullptr) == 0 && ::setgid(u.gid) == 0 && ::setuid(u.uid) == 0) {
      try {
        client::connection conn(c.socket(), 30s);
        protocol::submit s;
        s.id = conn.next_id();
        s.job.name = "tok";
        s.job.script = "#!/bin/sh\ntrue\n";
        s.job.workdir = u.home.string();
        s.job.stdout_pattern = "/dev/null";
        s.job.submit_token = token;
        answer = "ok " + std::to_string(conn.call(s).at("job_id").get<std::int64_t>());
      } catch (const std::exception& e) {
        answer = std::string("error ") + e.what();
      }
    }
    (void)!::write(fds[1], answer.data(), answer.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string answer;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) answer.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  token_submit r;
  if (answer.rfind("ok ", 0) == 0) {
    r.job_id = std::stoll(answer.substr(3));
  } else {
    r.error = answer.rfind("error ", 0) == 0 ? answer.substr(6) : "no answer from the child";
  }
  return r;
}

}  // namespace aqs::test
