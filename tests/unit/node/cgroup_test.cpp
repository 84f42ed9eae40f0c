// Unit tests of the cgroup backends: v2 over a temporary directory that
// mimics its cgroupfs (what it writes, what it reads back: limits, the
// controllers enabled on the way down, the freezer, OOM kills, removal),
// the probe's choice and reasons, and v1 on the real kernel where this
// runs as root with the v1 controllers (skipped with a message elsewhere).
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "cgroup.hpp"
#include "file_text.hpp"
#include "temp_dir.hpp"

using namespace aqs;
using namespace aqs::node;
using test::slurp;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

void put(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

// A v2 root as the kernel shows it: the controllers, nothing enabled yet.
cgroup_options mimic_v2(const fs::path& root, const std::string& controllers = "cpuset cpu io memory hugetlb pids rdma misc\n") {
  put(root / "cgroup.controllers", controllers);
  put(root / "cgroup.subtree_control", "");
  cgroup_options o;
  o.root = root;
  o.cluster = "c1";
  o.node = "node7";
  return o;
}

}  // namespace

TEST_CASE("cgroup v2: the controllers are enabled from the root down to the node's directory, and jobs go under it") {
  {
    // Before the agent knows its cluster: only aqs/ is made, and no job.
    test::temp_dir t("aqs-cgroup-v2");
    auto o = mimic_v2(t.path());
    o.cluster.clear();
    const auto cg = make_cgroup_v2(o);
    CHECK(cg->base() == t.path() / "aqs");
    CHECK_FALSE(fs::exists(t.path() / "aqs" / "node7"));
    CHECK_THROWS_AS(cg->create(1, {}), cgroup_error);
  }
  test::temp_dir t("aqs-cgroup-v2");
  const auto o = mimic_v2(t.path());
  const auto cg = make_cgroup_v2(o);
  CHECK(cg->version() == 2);
  CHECK(cg->base() == t.path() / "aqs" / "c1" / "node7");
  for (const auto& level : {t.path(), t.path() / "aqs", t.path() / "aqs" / "c1", t.path() / "aqs" / "c1" / "node7"}) {
    const std::string enabled = slurp(level / "cgroup.subtree_control");
    INFO(level);
    CHECK(enabled.find("+memory") != std::string::npos);
    CHECK(enabled.find("+cpuset") != std::string::npos);
    CHECK(enabled.find("+pids") != std::string::npos);
  }
  CHECK(cg->describe().find("cgroup v2 (memory, cpuset, pids, freeze) under " + (t.path() / "aqs" / "c1" / "node7").string()) ==
        0);
  // Controllers already enabled are not asked for again.
  put(t.path() / "cgroup.subtree_control", "cpuset memory pids\n");
  make_cgroup_v2(o);
  CHECK(slurp(t.path() / "cgroup.subtree_control") == "cpuset memory pids\n");
}

TEST_CASE("cgroup v2: a job's cgroup gets its memory limit with no swap, exactly its cpus, the node's mems and a pids limit") {
  test::temp_dir t("aqs-cgroup-v2");
  auto o = mimic_v2(t.path());
  o.pids_max = 64;
  const auto cg = make_cgroup_v2(o);
  const fs::path base = t.path() / "aqs" / "c1" / "node7";
  put(base / "cpuset.mems.effective", "0-1\n");
  cgroup_limits l;
  l.memory_bytes = 100u << 20;
  l.cpus = {3, 1, 3};  // --procs: round-robin repeats
  const fs::path job = base / "job_12";
  put(base / "memory.swap.max", "max\n");  // the kernel accounts swap
  cg->create(12, l);
  CHECK(cg->exists(12));
  CHECK(slurp(job / "memory.max") == "104857600\n");
  CHECK(slurp(job / "memory.swap.max") == "0\n");
  CHECK(slurp(job / "cpuset.cpus") == "1,3\n");
  CHECK(slurp(job / "cpuset.mems") == "0-1\n");
  CHECK(slurp(job / "pids.max") == "64\n");
  // Its steps get the controllers; a step's process joins the step's cgroup.
  CHECK(slurp(job / "cgroup.subtree_control") == "+memory +cpuset +pids\n");
  cg->create_step(12, "batch");
  CHECK(fs::is_directory(job / "step_batch"));
  CHECK(cg->join_files(12, "batch") == std::vector<std::string>{(job / "step_batch" / "cgroup.procs").string()});
  CHECK(cg->dirs(12) == std::vector<fs::path>{job / "step_batch", job});

  // Without limits: no file written but what the cpuset needs.
  cg->create(13, {});
  CHECK_FALSE(fs::exists(base / "job_13" / "memory.max"));
  CHECK_FALSE(fs::exists(base / "job_13" / "cpuset.cpus"));
  CHECK(slurp(base / "job_13" / "pids.max") == "64\n");  // the agent's --pids-limit
}

TEST_CASE("cgroup v2: OOM kills are read from memory.events, the freezer from cgroup.freeze and cgroup.events, processes from cgroup.procs") {
  test::temp_dir t("aqs-cgroup-v2");
  const auto cg = make_cgroup_v2(mimic_v2(t.path()));
  cg->create(5, {});
  const fs::path job = t.path() / "aqs" / "c1" / "node7" / "job_5";
  CHECK(cg->oom_kills(5) == 0);
  put(job / "memory.events", "low 0\nhigh 0\nmax 17\noom 2\noom_kill 1\noom_group_kill 0\n");
  CHECK(cg->oom_kills(5) == 1);
  CHECK(cg->oom_kills(6) == 0);  // no such job

  CHECK(cg->freeze(5, true));
  CHECK(slurp(job / "cgroup.freeze") == "1\n");
  CHECK(cg->frozen(5));
  CHECK(cg->freeze(5, false));
  CHECK(slurp(job / "cgroup.freeze") == "0\n");
  CHECK_FALSE(cg->frozen(5));
  // Where the kernel reports it, frozen means what cgroup.events says.
  put(job / "cgroup.events", "populated 1\nfrozen 1\n");
  CHECK(cg->frozen(5));
  CHECK_FALSE(cg->freeze(6, true));  // no such job

  put(job / "cgroup.procs", "4242\n4243\n");
  CHECK(cg->procs(5) == std::vector<pid_t>{4242, 4243});
  put(job / "cgroup.procs", "");
  CHECK(cg->kill_all(5));  // empty: nothing to do
  CHECK(cg->remove(5));
  CHECK_FALSE(cg->exists(5));
  CHECK(fs::is_directory(t.path() / "aqs" / "c1" / "node7"));
}

TEST_CASE("cgroup v2: a leftover cgroup of the same job id is replaced, and a refused write is one line naming the file") {
  test::temp_dir t("aqs-cgroup-v2");
  const auto cg = make_cgroup_v2(mimic_v2(t.path()));
  const fs::path job = t.path() / "aqs" / "c1" / "node7" / "job_9";
  fs::create_directories(job);
  put(job / "stale", "x");
  cg->create(9, {});
  CHECK_FALSE(fs::exists(job / "stale"));
  // A directory in the way of a file the kernel would have.
  fs::create_directories(t.path() / "aqs" / "c1" / "node7" / "job_10" / "memory.max");
  cgroup_limits l;
  l.memory_bytes = 1 << 20;
  try {
    // job_10 exists (a leftover) but holds a child directory: it cannot be
    // removed, and its memory.max cannot be written.
    cg->create(10, l);
    FAIL("no error");
  } catch (const cgroup_error& e) {
    const std::string what = e.what();
    CHECK(what.find("memory.max") != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
  }
}

TEST_CASE("cgroup v2 without the memory or cpuset controller is refused with the reason") {
  test::temp_dir t("aqs-cgroup-v2");
  auto o = mimic_v2(t.path(), "cpu io pids\n");
  CHECK_THROWS_WITH_AS(make_cgroup_v2(o), doctest::Contains("has no memory controller"), cgroup_error);
  test::temp_dir empty("aqs-cgroup-none");
  o.root = empty.path();
  CHECK_THROWS_WITH_AS(make_cgroup_v2(o), doctest::Contains("no cgroup v2 hierarchy"), cgroup_error);
}

TEST_CASE("the probe takes v2 where the root has its controllers, and says why for each version when neither is usable") {
  test::temp_dir t("aqs-cgroup-v2");
  auto o = mimic_v2(t.path());
  std::string why;
  auto cg = probe_cgroups(o, why);
  REQUIRE(cg != nullptr);
  CHECK(cg->version() == 2);
  CHECK(why.empty());

  test::temp_dir empty("aqs-cgroup-none");
  o.root = empty.path();
  CHECK(probe_cgroups(o, why) == nullptr);
  CHECK(why.find("cgroup v2: no cgroup v2 hierarchy") != std::string::npos);
  CHECK(why.find("cgroup v1: no cgroup v1 memory hierarchy") != std::string::npos);
  o.want = cgroup_options::mode::off;
  CHECK(probe_cgroups(o, why) == nullptr);
  CHECK(why.find("--cgroups off") != std::string::npos);

  CHECK(parse_cgroup_mode("auto") == cgroup_options::mode::automatic);
  CHECK(parse_cgroup_mode("v1") == cgroup_options::mode::v1);
  CHECK(parse_cgroup_mode("v2") == cgroup_options::mode::v2);
  CHECK(parse_cgroup_mode("off") == cgroup_options::mode::off);
  CHECK_THROWS_WITH_AS(parse_cgroup_mode("v3"), doctest::Contains("auto, v1, v2, off"), std::invalid_argument);
}

TEST_CASE("cgroup v1 on this kernel: a process that joins is held to the cpuset and memory limit, frozen, killed wherever it went, and the cgroup removed") {
  if (::geteuid() != 0 || !fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") ||
      !fs::exists("/sys/fs/cgroup/cpuset/cpuset.cpus") || !fs::exists("/sys/fs/cgroup/freezer/tasks")) {
    MESSAGE("skipped: needs root and the cgroup v1 memory, cpuset and freezer hierarchies");
    return;
  }
  cgroup_options o;
  o.cluster = "unit-" + std::to_string(::getpid());
  o.node = "n";
  o.want = cgroup_options::mode::v1;
  std::string why;
  auto cg = probe_cgroups(o, why);
  REQUIRE_MESSAGE(cg != nullptr, why);
  CHECK(cg->version() == 1);
  const long last = ::sysconf(_SC_NPROCESSORS_ONLN) - 1;
  cgroup_limits l;
  l.memory_bytes = 64u << 20;
  l.cpus = {static_cast<int>(last)};
  cg->create(1, l);
  REQUIRE(cg->exists(1));
  const fs::path mem = cg->base() / "job_1";
  CHECK(slurp(mem / "memory.limit_in_bytes") == std::to_string(64u << 20) + "\n");

  // A child joins, then makes itself a session leader in a new process
  // group and widens its affinity to every CPU.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  cg->create_step(1, "batch");
  const auto files = cg->join_files(1, "batch");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (const auto& f : files) {
      std::ofstream(f) << ::getpid() << "\n";
    }
    ::setsid();
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int c = 0; c <= last; ++c) CPU_SET(c, &all);
    ::sched_setaffinity(0, sizeof all, &all);
    (void)!::write(ready[1], "x", 1);
    while (true) ::pause();
  }
  char x = 0;
  REQUIRE(::read(ready[0], &x, 1) == 1);
  ::close(ready[0]);
  ::close(ready[1]);
  CHECK(cg->procs(1) == std::vector<pid_t>{child});
  const std::string status = slurp("/proc/" + std::to_string(child) + "/status");
  CHECK(status.find("Cpus_allowed_list:\t" + std::to_string(last) + "\n") != std::string::npos);
  CHECK(cg->freeze(1, true));
  CHECK(cg->frozen(1));
  CHECK(cg->freeze(1, false));
  CHECK_FALSE(cg->frozen(1));
  CHECK(cg->kill_all(1));
  int st = 0;
  REQUIRE(::waitpid(child, &st, 0) == child);
  CHECK((WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL));
  CHECK(cg->procs(1).empty());
  CHECK(cg->oom_kills(1) == 0);
  CHECK(cg->remove(1));
  CHECK_FALSE(cg->exists(1));
  // The cluster's and node's directories go with the test.
  for (const auto& d : cg->dirs(1)) {
    fs::remove(d.parent_path());
    fs::remove(d.parent_path().parent_path());
  }
}

TEST_CASE("cgroup v2: a job's steps are cgroups under its own: their processes are the job's, their OOM kills counted apart, removed first") {
  test::temp_dir t("aqs-cgroup-v2");
  const auto cg = make_cgroup_v2(mimic_v2(t.path()));
  cg->create(7, {});
  const fs::path job = t.path() / "aqs" / "c1" / "node7" / "job_7";
  cg->create_step(7, "batch");
  cg->create_step(7, "0");
  CHECK(cg->steps(7) == std::vector<std::string>{"0", "batch"});
  CHECK(cg->dirs(7) == std::vector<fs::path>{job / "step_0", job / "step_batch", job});
  put(job / "step_batch" / "cgroup.procs", "10\n");
  put(job / "step_0" / "cgroup.procs", "11\n12\n");
  auto procs = cg->procs(7);
  std::sort(procs.begin(), procs.end());
  CHECK(procs == std::vector<pid_t>{10, 11, 12});
  // memory.events counts the steps' kills in the job's; with
  // memory_localevents each one's own are added up.
  put(job / "step_0" / "memory.events", "oom_kill 2\n");
  put(job / "memory.events", "oom_kill 2\n");
  CHECK(cg->step_oom_kills(7, "0") == 2);
  CHECK(cg->step_oom_kills(7, "batch") == 0);
  CHECK(cg->oom_kills(7) == 2);
  put(job / "memory.events.local", "oom_kill 0\n");
  put(job / "step_0" / "memory.events.local", "oom_kill 2\n");
  put(job / "step_batch" / "memory.events.local", "oom_kill 1\n");
  CHECK(cg->oom_kills(7) == 3);
  // A name that is not one is refused, in one line.
  CHECK_THROWS_AS(cg->create_step(7, "../x"), cgroup_error);
  CHECK_THROWS_AS(cg->create_step(7, ""), cgroup_error);
  CHECK_THROWS_AS(cg->create_step(8, "batch"), cgroup_error);  // no such job
  put(job / "step_batch" / "cgroup.procs", "");
  put(job / "step_0" / "cgroup.procs", "");
  CHECK(cg->remove(7));
  CHECK_FALSE(cg->exists(7));
}

TEST_CASE("cgroup v2: a job's cpuset is rewritten to its new processors, its steps' with it") {
  test::temp_dir t("aqs-cgroup-v2");
  const auto cg = make_cgroup_v2(mimic_v2(t.path()));
  cgroup_limits l;
  l.cpus = {2, 3};
  cg->create(4, l);
  cg->create_step(4, "batch");
  const fs::path job = t.path() / "aqs" / "c1" / "node7" / "job_4";
  CHECK(cg->cpus(4) == std::vector<int>{2, 3});
  cg->set_cpus(4, {3});  // shrink
  CHECK(slurp(job / "cpuset.cpus") == "3\n");
  CHECK(slurp(job / "step_batch" / "cpuset.cpus") == "3\n");
  cg->set_cpus(4, {1, 3, 4});  // grow
  CHECK(cg->cpus(4) == std::vector<int>{1, 3, 4});
  CHECK(slurp(job / "step_batch" / "cpuset.cpus") == "1,3,4\n");
  CHECK_THROWS_AS(cg->set_cpus(4, {}), cgroup_error);
  CHECK_THROWS_AS(cg->set_cpus(5, {1}), cgroup_error);  // no such job
}

TEST_CASE("cgroup v1 on this kernel: a step's process is the job's, held to its pids limit, and its cpuset follows the job's when it shrinks and grows, whatever affinity it sets") {
  if (::geteuid() != 0 || !fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") ||
      !fs::exists("/sys/fs/cgroup/cpuset/cpuset.cpus") || !fs::exists("/sys/fs/cgroup/freezer/tasks") ||
      !fs::exists("/sys/fs/cgroup/pids/cgroup.procs")) {
    MESSAGE("skipped: needs root and the cgroup v1 memory, cpuset, freezer and pids hierarchies");
    return;
  }
  const long ncpu = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 2) {
    MESSAGE("skipped: one CPU only");
    return;
  }
  cgroup_options o;
  o.cluster = "unit-steps-" + std::to_string(::getpid());
  o.node = "n";
  o.want = cgroup_options::mode::v1;
  o.pids_max = 5;
  std::string why;
  auto cg = probe_cgroups(o, why);
  REQUIRE_MESSAGE(cg != nullptr, why);
  const int a = static_cast<int>(ncpu) - 2, b = static_cast<int>(ncpu) - 1;
  cgroup_limits l;
  l.cpus = {a, b};
  cg->create(3, l);
  cg->create_step(3, "0");
  int ready[2], go[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(go) == 0);
  const auto files = cg->join_files(3, "0");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (const auto& f : files) std::ofstream(f) << ::getpid() << "\n";
    // Forks up to the limit: 5 processes in all (it and 4 children).
    int made = 0;
    for (int i = 0; i < 10; ++i) {
      const pid_t p = ::fork();
      if (p == 0) {
        while (true) ::pause();
      }
      if (p > 0) ++made;
    }
    (void)!::write(ready[1], &made, sizeof made);
    char x;
    while (::read(go[0], &x, 1) == 1) {
      // Asked to widen itself to every CPU.
      cpu_set_t all;
      CPU_ZERO(&all);
      for (int c = 0; c < ncpu; ++c) CPU_SET(c, &all);
      ::sched_setaffinity(0, sizeof all, &all);
      (void)!::write(ready[1], &made, sizeof made);
    }
    ::_exit(0);
  }
  int made = -1;
  REQUIRE(::read(ready[0], &made, sizeof made) == sizeof made);
  CHECK(made == 4);  // the pids limit (5) held the fork bomb
  CHECK(cg->procs(3).size() == 5);
  const auto allowed = [&] {
    (void)!::write(go[1], "x", 1);
    int m = 0;
    (void)!::read(ready[0], &m, sizeof m);
    const std::string status = slurp("/proc/" + std::to_string(child) + "/status");
    const auto at = status.find("Cpus_allowed_list:\t");
    return status.substr(at + 19, status.find('\n', at) - at - 19);
  };
  const fs::path cpuset = fs::path(files[0]).parent_path().parent_path();  // any hierarchy's job dir
  CHECK(allowed() == std::to_string(a) + "-" + std::to_string(b));
  cg->set_cpus(3, {b});  // shrink
  CHECK(cg->cpus(3) == std::vector<int>{b});
  CHECK(allowed() == std::to_string(b));
  cg->set_cpus(3, {a, b});  // grow back
  CHECK(cg->cpus(3) == std::vector<int>{a, b});
  CHECK(allowed() == std::to_string(a) + "-" + std::to_string(b));
  (void)cpuset;
  ::close(go[1]);
  CHECK(cg->kill_all(3));
  ::waitpid(child, nullptr, 0);
  CHECK(cg->procs(3).empty());
  CHECK(cg->remove(3));
  CHECK_FALSE(cg->exists(3));
  for (const auto& d : cg->dirs(3)) {
    fs::remove(d.parent_path());
    fs::remove(d.parent_path().parent_path());
  }
}
