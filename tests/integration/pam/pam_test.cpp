// pam_aqs.so through real PAM (issue 31): Debian's pamtester and pam_probe
// (a PAM client that prints what the account stage left in its process)
// against a real aqsd, PostgreSQL and agent, with throwaway users.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <pwd.h>
#include <sstream>
#include <sys/wait.h>

#include "e2e.hpp"
#include "run_users.hpp"

namespace {

constexpr const char* k_with_job = "aqs-pam-a";
constexpr const char* k_without = "aqs-pam-b";

// A PAM service of this run (/etc/pam.d/NAME), removed with it.
struct pam_service {
  std::string name = "aqs-pam-test-" + std::to_string(::getpid());
  fs::path file = fs::path("/etc/pam.d") / name;
  explicit pam_service(const std::string& module_line) {
    std::ofstream out(file);
    out << module_line << "\n";
  }
  ~pam_service() {
    std::error_code ec;
    fs::remove(file, ec);
  }
};

std::string host_name() {
  char h[256] = {};
  ::gethostname(h, sizeof h - 1);
  return h;
}

// The cgroup path of `pid` in the v1 hierarchy of `controller` ("" if none).
std::string cgroup_of(pid_t pid, const std::string& controller) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':');
    const auto b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string ctrls = "," + line.substr(a + 1, b - a - 1) + ",";
    if (ctrls.find("," + controller + ",") != std::string::npos) return line.substr(b + 1);
  }
  return "";
}

// When the agent runs jobs without a memory cgroup of their own (no cgroup
// v1 memory controller, or containment off), the test gives the job one, as
// the agent would: the module's contract is "join the job's cgroups".
struct job_cgroup {
  fs::path dir;
  job_cgroup(pid_t job_pid) {
    if (cgroup_of(job_pid, "memory") != cgroup_of(::getpid(), "memory")) return;  // contained already
    dir = fs::path("/sys/fs/cgroup/memory") / ("aqs-pam-test-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "cgroup.procs") << job_pid << "\n";
  }
  ~job_cgroup() {
    if (dir.empty()) return;
    // Back to the root, then away.
    std::ifstream in(dir / "cgroup.procs");
    for (std::string pid; std::getline(in, pid);) std::ofstream("/sys/fs/cgroup/memory/cgroup.procs") << pid << "\n";
    ::rmdir(dir.c_str());
  }
};

}  // namespace

TEST_CASE("pam_aqs lets in root and a user with a running job (into the job's cgroups), and refuses others in one line") {
  if (::geteuid() != 0 || !fs::exists("/sys/fs/cgroup/memory/cgroup.procs")) {
    MESSAGE("skipped: needs root and the cgroup v1 memory controller");
    return;
  }
  test::users().ensure(k_with_job);
  test::users().ensure(k_without);
  test::test_database db;
  test::cluster c(test::nodes_of(db, 1, 2));
  c.wait_nodes_up(1);
  const auto a = c.user(k_with_job);
  const auto b = c.user(k_without);
  const fs::path pid_file = a.home / "job.pid";
  const auto job = c.submit({"-n", "1", "-o", (a.home / "job.out").string(), "--wrap",
                             "echo $$ > " + pid_file.string() + "; exec sleep 300"},
                            &a, a.home.string());
  c.wait_state(job, {job_state::running});
  pid_t job_pid = 0;
  for (int i = 0; i < 400 && job_pid <= 0; ++i) {
    try {
      job_pid = static_cast<pid_t>(std::stol(slurp(pid_file)));
    } catch (const std::exception&) {
      std::this_thread::sleep_for(50ms);
    }
  }
  REQUIRE(job_pid > 0);
  job_cgroup given(job_pid);
  const std::string job_memory = cgroup_of(job_pid, "memory");
  REQUIRE(job_memory != cgroup_of(::getpid(), "memory"));

  // The agents' spools are under the cluster's directory (spool-NAME).
  pam_service svc("account required " PAM_AQS_MODULE " spool=" + c.dir().string());

  SUBCASE("pamtester: the user with a job, root, and not the other user") {
    const auto in = test::run({"/usr/bin/pamtester", svc.name, k_with_job, "acct_mgmt"});
    CHECK_MESSAGE(in.status == 0, in.out << in.err);
    const auto root = test::run({"/usr/bin/pamtester", svc.name, "root", "acct_mgmt"});
    CHECK_MESSAGE(root.status == 0, root.out << root.err);
    const auto out = test::run({"/usr/bin/pamtester", svc.name, k_without, "acct_mgmt"});
    CHECK(out.status != 0);
    const std::string said = out.out + out.err;
    const std::string line = "no running job of yours on " + host_name();
    CHECK_MESSAGE(said.find(line) != std::string::npos, said);
    CHECK(said.find(line) == said.rfind(line));  // said once
  }

  SUBCASE("the process let in lands in the job's cgroups and carries its job id") {
    const auto r = test::run({PAM_PROBE, svc.name, k_with_job});
    REQUIRE_MESSAGE(r.status == 0, r.out << r.err);
    CHECK(r.out.find("result: let in") != std::string::npos);
    CHECK_MESSAGE(r.out.find("job: " + std::to_string(job) + "\n") != std::string::npos, r.out);
    CHECK_MESSAGE(r.out.find(":memory:" + job_memory + "\n") != std::string::npos, r.out << " job in " << job_memory);
    // Root is let in outside any job.
    const auto root = test::run({PAM_PROBE, svc.name, "root"});
    CHECK(root.status == 0);
    CHECK(root.out.find("job: none") != std::string::npos);
    CHECK(root.out.find(":memory:" + job_memory + "\n") == std::string::npos);
  }

  SUBCASE("once the job ends, its user is refused too") {
    const auto k = c.cmd(test::bin().fkill, {std::to_string(job)}, &a);
    REQUIRE_MESSAGE(k.status == 0, k.out << k.err);
    c.wait_state(job, {job_state::cancelled});
    bool refused = false;
    for (int i = 0; i < 100 && !refused; ++i) {
      refused = test::run({"/usr/bin/pamtester", svc.name, k_with_job, "acct_mgmt"}).status != 0;
      if (!refused) std::this_thread::sleep_for(100ms);
    }
    CHECK(refused);
  }
  (void)b;
}

TEST_CASE("pam_aqs: a record counts only while its step process is the one it names") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root");
    return;
  }
  test::users().ensure(k_with_job);
  if (::getpwnam(k_with_job) == nullptr) {
    REQUIRE(test::run({"/usr/sbin/useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", k_with_job})
                .status == 0);
  }
  const passwd* pw = ::getpwnam(k_with_job);
  REQUIRE(pw != nullptr);
  const fs::path dir = fs::temp_directory_path() / ("aqs-pam-spool-" + std::to_string(::getpid()));
  const std::string cluster = "0123456789abcdef0123456789abcdef";
  fs::create_directories(dir / ("cluster-" + cluster));
  std::ofstream(dir / "cluster") << cluster << "\n";
  // A process of the user's, named by a record as both its step and its job.
  const pid_t p = test::spawn({"/bin/sleep", "60"}, {}, pw->pw_uid, pw->pw_gid, "/", -1, -1);
  std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
  std::string line;
  std::getline(stat, line);
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  for (int i = 3; i < 22; ++i) rest >> field;
  unsigned long long ticks = 0;
  rest >> ticks;
  const fs::path rec = dir / ("cluster-" + cluster) / "job-5.step";
  pam_service svc("account required " PAM_AQS_MODULE " spool=" + dir.string() + " nocgroup");
  // The step's start time is not the record's: a reused pid, not the job.
  std::ofstream(rec) << p << " " << ticks + 1 << " " << p << " 0 0 0\n";
  CHECK(test::run({"/usr/bin/pamtester", svc.name, k_with_job, "acct_mgmt"}).status != 0);
  // The same record with the right start time: let in.
  std::ofstream(rec) << p << " " << ticks << " " << p << " 0 0 0\n";
  const auto in = test::run({"/usr/bin/pamtester", svc.name, k_with_job, "acct_mgmt"});
  CHECK_MESSAGE(in.status == 0, in.out << in.err);
  // Gone: no one.
  ::kill(p, SIGKILL);
  int st = 0;
  ::waitpid(p, &st, 0);
  CHECK(test::run({"/usr/bin/pamtester", svc.name, k_with_job, "acct_mgmt"}).status != 0);
  std::error_code ec;
  fs::remove_all(dir, ec);
}
