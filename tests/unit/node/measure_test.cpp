// Unit tests of what the agent measures of a job at its end (issue 32): the
// CPU time its cgroup counted (v2 over a directory that mimics cgroupfs; v1
// on this kernel where it runs as root with cpuacct), and the step's record
// of it in job-N.status, read back as the agent reports it.
#include <doctest/doctest.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.hpp"
#include "job_supervisor.hpp"
#include "temp_dir.hpp"

using namespace aqs;
using namespace aqs::node;
namespace fs = std::filesystem;

namespace {

void put(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

}  // namespace

TEST_CASE("cgroup v2: a job's CPU time is cpu.stat's user_usec and system_usec; none for a job not there") {
  test::temp_dir t("aqs-measure-v2");
  put(t.path() / "cgroup.controllers", "cpuset cpu io memory pids\n");
  put(t.path() / "cgroup.subtree_control", "");
  cgroup_options o;
  o.root = t.path();
  o.cluster = "c1";
  o.node = "n1";
  const auto cg = make_cgroup_v2(o);
  cg->create(9, {});
  CHECK_FALSE(cg->cpu_usage_us(9).has_value());  // no counters written (yet)
  put(t.path() / "aqs" / "c1" / "n1" / "job_9" / "cpu.stat",
      "usage_usec 2500123\nuser_usec 2000100\nsystem_usec 500023\nnr_periods 0\n");
  const auto used = cg->cpu_usage_us(9);
  REQUIRE(used);
  CHECK(used->first == 2000100);
  CHECK(used->second == 500023);
  CHECK_FALSE(cg->cpu_usage_us(10).has_value());
}

TEST_CASE("cgroup v1 on this kernel: cpuacct counts the CPU time of a process that ran in the job's step") {
  if (::geteuid() != 0 || !fs::exists("/sys/fs/cgroup/cpuacct/cpuacct.usage") ||
      !fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") || !fs::exists("/sys/fs/cgroup/freezer/tasks")) {
    MESSAGE("skipped: needs root and the cgroup v1 cpuacct, memory, cpuset and freezer hierarchies");
    return;
  }
  cgroup_options o;
  o.cluster = "measure-" + std::to_string(::getpid());
  o.node = "n";
  o.want = cgroup_options::mode::v1;
  std::string why;
  auto cg = probe_cgroups(o, why);
  REQUIRE_MESSAGE(cg != nullptr, why);
  cg->create(1, {});
  cg->create_step(1, "batch");
  const auto files = cg->join_files(1, "batch");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (const auto& f : files) {
      std::ofstream(f) << ::getpid() << "\n";
    }
    // 0.3 s of its own CPU time (however long that takes on a busy machine).
    timespec ts{};
    do {
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    } while (ts.tv_sec * 1000 + ts.tv_nsec / 1'000'000 < 300);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  const auto used = cg->cpu_usage_us(1);
  REQUIRE(used);
  CHECK(used->first + used->second >= 290'000);  // what it burned (tick-rounded where only cpuacct.stat is there)
  CHECK(used->first + used->second < 60'000'000);
  cg->remove(1);
  cg->remove_empty_levels();
}

TEST_CASE("the step's record carries the measurement after the exit status; an older record has none") {
  job_measure m{2'000'123, 40'000, 102'456};
  const std::string text = "0 0 0" + format_measure(m) + "\n";
  std::istringstream in(text);
  int status = 0;
  std::uint64_t oom = 0;
  std::int64_t fenced = 0;
  REQUIRE(static_cast<bool>(in >> status >> oom >> fenced));
  const auto back = parse_measure(in);
  REQUIRE(back);
  CHECK(*back == m);
  // A step of an older agent wrote three fields only; a broken record gives nothing.
  std::istringstream old("0 0 0\n");
  old >> status >> oom >> fenced;
  CHECK_FALSE(parse_measure(old).has_value());
  std::istringstream bad("0 0 0 12 x 7\n");
  bad >> status >> oom >> fenced;
  CHECK_FALSE(parse_measure(bad).has_value());
  std::istringstream negative("0 0 0 -1 2 3\n");
  negative >> status >> oom >> fenced;
  CHECK_FALSE(parse_measure(negative).has_value());
}
