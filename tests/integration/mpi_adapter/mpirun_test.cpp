// Integration tests of the OpenMPI launch under the real mpirun: with nothing
// but the adapter's environment, plain `mpirun probe` (no -np, no hostfile
// argument) must start one rank per processor, on its host, bound to exactly
// its cpu, and leave no process behind.
#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <poll.h>
#include <sched.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "aqs/mpi_adapter/launch.hpp"
#include "file_text.hpp"
#include "temp_dir.hpp"

using namespace aqs::mpi_adapter;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// The cpus this test may use (at least one; cpus are shared when there is
// only one).
std::vector<int> usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) out.push_back(c);
    }
  }
  if (out.empty()) out.push_back(0);
  if (out.size() == 1) out.push_back(out[0]);
  return out;
}

std::string this_host() {
  char buf[256] = {};
  REQUIRE(::gethostname(buf, sizeof buf - 1) == 0);
  return buf;
}

struct run_result {
  int status = -1;  // exit status, or 128 + signal
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv (argv[0] a path) in `cwd` with exactly `env` as its environment,
// in a process group of its own; after `timeout`, SIGTERM to the group (mpirun
// then stops its daemons), SIGKILL five seconds later.
run_result run(const std::vector<std::string>& argv, const std::vector<std::string>& env, const fs::path& cwd,
               std::chrono::seconds timeout) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int out[2], err[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setpgid(0, 0);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    ::dup2(null_fd, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so that the group exists before any kill
  ::close(out[1]);
  ::close(err[1]);
  run_result r;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool killed = false;
  for (int open = 2; open > 0;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      if (killed) break;
      r.timed_out = true;
      ::kill(-pid, SIGTERM);
      std::this_thread::sleep_for(5s);
      ::kill(-pid, SIGKILL);
      killed = true;
      deadline = std::chrono::steady_clock::now() + 5s;
      continue;
    }
    if (::poll(fds, 2, static_cast<int>(left.count())) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP)) == 0) continue;
      char buf[8192];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
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
  r.status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return r;
}

// Processes (other than this one) whose command line mentions `needle`.
std::vector<pid_t> processes_mentioning(const std::string& needle) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid()) continue;
    std::string cmdline = aqs::test::slurp(entry.path() / "cmdline");
    for (auto& c : cmdline) c = c == '\0' ? ' ' : c;
    if (cmdline.find(needle) != std::string::npos) out.push_back(pid);
  }
  return out;
}

// mpirun hands the launch-file paths to every daemon it starts, so a daemon
// of this test that outlived mpirun names the test's directory: wait for
// such stragglers to go, then kill them and fail.
void expect_nothing_left(const fs::path& dir) {
  std::vector<pid_t> left;
  for (int i = 0; i < 50; ++i) {
    left = processes_mentioning(dir.string());
    if (left.empty()) return;
    std::this_thread::sleep_for(100ms);
  }
  for (const pid_t p : left) ::kill(p, SIGKILL);
  FAIL_CHECK(left.size() << " processes of this test outlived mpirun");
}

// The test's launch agent: every host is this machine. Like ssh, it runs
// the daemon's command line through a shell, here in a UTS namespace of its
// own named after the host asked for: OpenMPI then sees a separate host (its
// daemons tell hosts apart by gethostname()). It records each host asked for
// and the host it was called on.
fs::path write_pretend_agent(const fs::path& dir) {
  const auto path = dir / "pretend-rsh";
  std::ofstream(path) << "#!/bin/sh\n"
                      << "echo \"$1 from $(hostname)\" >> '" << (dir / "agent.log").string() << "'\n"
                      << "host=$1\n"
                      << "shift\n"
                      << "exec unshare --uts /bin/sh -c 'hostname \"$0\" && exec /bin/sh -c \"$1\"' \"$host\" \"$*\"\n";
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  return path;
}

// Whether this process may make UTS namespaces (root, as in CI).
bool can_pretend_hosts() {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(::unshare(CLONE_NEWUTS) == 0 ? 0 : 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

struct rank_report {
  std::string host;
  std::string cpus;
};

// The probe's lines by rank; fails on a line of another shape or a rank
// reported twice.
std::map<int, rank_report> parse_probe_output(const std::string& out) {
  std::map<int, rank_report> ranks;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string w1, w2, w3;
    int rank = -1;
    rank_report r;
    const bool ok = static_cast<bool>(words >> w1 >> rank >> w2 >> r.host >> w3 >> r.cpus);
    CHECK_MESSAGE((ok && w1 == "rank" && w2 == "host" && w3 == "cpus"), "unexpected output line: " << line);
    if (!ok) continue;
    CHECK_MESSAGE(ranks.emplace(rank, r).second, "rank " << rank << " reported twice");
  }
  return ranks;
}

// Writes the launch files of `a` under `dir`, runs plain `mpirun probe` with
// only the adapter's environment, PATH (which every job has: mpirun looks its
// helpers up there) and `extra`, and checks that rank i ran on
// a.procs[i].host bound to exactly a.procs[i].cpu.
void expect_exact_launch(const allocation& a, const fs::path& dir, const std::string& local_host,
                         const std::vector<std::string>& extra = {}) {
  const auto files = write_launch_files(dir / "launch", a);
  std::vector<std::string> env;
  for (const auto& [k, v] : launch_environment(a, files)) env.push_back(k + "=" + v);
  env.push_back(std::string("PATH=") + (std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin"));
  // Sanitizer builds: the probe needs the same settings as this test.
  for (const char* name : {"ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"}) {
    if (const char* v = std::getenv(name)) env.push_back(std::string(name) + "=" + v);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  fs::create_directories(dir / "work");
  const auto r = run({AQS_MPIEXEC, AQS_MPI_PROBE}, env, dir / "work", 60s);
  CAPTURE(r.out);
  CAPTURE(r.err);
  CHECK(!r.timed_out);
  CHECK(r.status == 0);
  const auto ranks = parse_probe_output(r.out);
  CHECK(ranks.size() == a.procs.size());
  for (std::size_t i = 0; i < a.procs.size(); ++i) {
    CAPTURE(i);
    const auto it = ranks.find(static_cast<int>(i));
    REQUIRE_MESSAGE(it != ranks.end(), "rank " << i << " did not report");
    const auto& want = a.procs[i];
    CHECK(it->second.host == (want.host == "localhost" ? local_host : want.host));
    CHECK(it->second.cpus == std::to_string(want.cpu));
  }
  expect_nothing_left(dir);
}

}  // namespace

TEST_CASE("plain mpirun starts three ranks on cpus 1, 0, 1 of this host, each bound to just its cpu") {
  aqs::test::temp_dir tmp("aqs-mpi-adapter");
  const auto cpus = usable_cpus();
  const auto host = this_host();
  // Two ranks on one cpu: a node advertising more processors than cores.
  const allocation a{{{host, cpus[1]}, {host, cpus[0]}, {host, cpus[1]}}, ::geteuid() == 0, {}, "", false, {}, {}};
  expect_exact_launch(a, tmp.path(), host);
}

TEST_CASE("plain mpirun starts two ranks on cpus 0 and 1 of this host") {
  aqs::test::temp_dir tmp("aqs-mpi-adapter");
  const auto cpus = usable_cpus();
  const auto host = this_host();
  const allocation a{{{host, cpus[0]}, {host, cpus[1]}}, ::geteuid() == 0, {}, "", false, {}, {}};
  expect_exact_launch(a, tmp.path(), host);
}

TEST_CASE("mpirun takes localhost for this host, and keeps its own traffic on the given interface") {
  aqs::test::temp_dir tmp("aqs-mpi-adapter");
  const auto cpus = usable_cpus();
  const allocation a{{{"localhost", cpus[1]}, {"localhost", cpus[0]}}, ::geteuid() == 0, {"lo"}, "", false, {}, {}};
  expect_exact_launch(a, tmp.path(), this_host());
}

TEST_CASE("a job on two hosts starts the other host's daemon through the launch agent, and its ranks there") {
  if (!can_pretend_hosts()) {
    MESSAGE("skipped: pretending a second host needs a UTS namespace (run as root)");
    return;
  }
  aqs::test::temp_dir tmp("aqs-mpi-adapter");
  const auto cpus = usable_cpus();
  const auto host = this_host();
  const auto agent = write_pretend_agent(tmp.path());
  const std::string other = "aqs-pretend-node2";
  // Interleaved, and more ranks on the other host than on this one.
  const allocation a{{{host, cpus[0]}, {other, cpus[1]}, {host, cpus[1]}, {other, cpus[0]}, {other, cpus[1]}},
                     ::geteuid() == 0,
                     {},
                     agent.string(), false, {}, {}};
  expect_exact_launch(a, tmp.path(), host);
  // One daemon for the other host, started by mpirun itself; none for this one.
  CHECK(aqs::test::slurp(tmp.path() / "agent.log") == other + " from " + host + "\n");
}

TEST_CASE("on more hosts than mpirun starts directly, only mpirun's node calls the launch agent") {
  if (!can_pretend_hosts()) {
    MESSAGE("skipped: pretending more hosts needs a UTS namespace (run as root)");
    return;
  }
  aqs::test::temp_dir tmp("aqs-mpi-adapter");
  const auto cpus = usable_cpus();
  const auto host = this_host();
  const auto agent = write_pretend_agent(tmp.path());
  const std::vector<processor> procs = {
      {host, cpus[0]}, {"aqs-pretend-n2", cpus[1]}, {"aqs-pretend-n3", cpus[0]}, {"aqs-pretend-n4", cpus[1]}};
  const allocation a{procs, ::geteuid() == 0, {}, agent.string(), false, {}, {}};
  // A fan-out of one (routed_radix, 64 by default) stands for a cluster
  // larger than the fan-out: without plm_rsh_no_tree_spawn, each daemon would
  // start the next one through the agent, from its own host.
  expect_exact_launch(a, tmp.path(), host, {"OMPI_MCA_routed_radix=1"});
  std::istringstream log(aqs::test::slurp(tmp.path() / "agent.log"));
  std::vector<std::string> calls;
  for (std::string line; std::getline(log, line);) calls.push_back(line);
  CHECK(calls.size() == 3);
  for (const auto& c : calls) CHECK(c.ends_with(" from " + host));
}
