// The steps of a job on its other nodes contained as the job is (issue 31):
// real aqsd and agents on network-namespace hosts, an MPI job of a throwaway
// user over two hosts (its daemon and rank on the second host started
// through aqs-rsh, a step of the job there): the rank that allocates above
// --mem on the second host is killed by the kernel and the job ends
// OUT_OF_MEMORY; a process that rank leaves in a new session without
// AQS_JOB_ID is gone when the job ends. The step runs in a cgroup of its own
// under the job's (job_N/step_M) in every controller. An adaptive job's
// cpuset follows its map as it shrinks and grows (waits for aqsd to tell
// agents of map changes: skipped until then).
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "cgroup_checks.hpp"
#include "e2e.hpp"

using test::processes_of;

namespace {

// Why these tests cannot run here, or "" when they can.
std::string unavailable() {
  if (::geteuid() != 0) return "not root";
  if (!testbed::netns_hosts::available()) return "no ip netns";
  return test::cgroups_unavailable();
}

#define SKIP_WITHOUT_CONTAINMENT()                                                     \
  if (const std::string why = unavailable(); !why.empty()) {                           \
    MESSAGE("skipped: steps cannot be contained in cgroups here (" << why << ")");     \
    return;                                                                            \
  }

// `ip netns exec` gives each namespace host a sysfs of its own, without
// the cgroup mounts of /sys/fs/cgroup: the agents see the machine's
// cgroupfs through a recursive bind of it made here (aqs-node
// --cgroup-root), as a real host sees its own /sys/fs/cgroup. Undone with
// the object.
class cgroup_view {
public:
  cgroup_view() {
    char tmpl[] = "/tmp/aqs-contain-cg.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    const std::string cmd = "mount --rbind /sys/fs/cgroup " + dir_.string();
    REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, cmd);
  }
  ~cgroup_view() {
    const std::string cmd = "umount -R -l " + dir_.string() + " && rmdir " + dir_.string();
    if (std::system(cmd.c_str()) != 0) MESSAGE("could not undo " << cmd);
  }
  cgroup_view(const cgroup_view&) = delete;
  cgroup_view& operator=(const cgroup_view&) = delete;
  const fs::path& dir() const noexcept { return dir_; }

private:
  fs::path dir_;
};

test::cluster::options two_hosts(const test::test_database& db, const cgroup_view& cg) {
  test::cluster::options o =
      test::nodes_of(db, 2, 1,
                     {"--memory", "4G", "--cgroups", fs::exists("/sys/fs/cgroup/memory") ? "v1" : "v2", "--cgroup-root",
                      cg.dir().string()});
  o.netns = true;
  return o;
}

test::test_user user(test::cluster& c, const std::string& name) { return test::run_user(c, name); }

// What the 2-host cases start from: the test database, the cgroup view the
// agents use, and a cluster of two namespace hosts, both UP.
struct two_host_case {
  test::test_database db;
  cgroup_view view;
  test::cluster c;
  two_host_case() : c(two_hosts(db, view)) { c.wait_nodes_up(2); }
};

// A job script: mpirun over the job's two hosts, each rank running `rank`
// (sh), which finds the batch host in $BATCH_HOST.
fs::path mpi_script(const test::test_user& u, const std::string& name, const std::string& rank) {
  const fs::path p = u.home / name;
  std::ofstream(p) << "#!/bin/bash\nexport BATCH_HOST=$(hostname)\n"
                   << MPIEXEC << " -x BATCH_HOST sh -c '" << rank << "'\n";
  fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  ::chown(p.c_str(), u.uid, u.gid);
  return p;
}

// The job of hog_job(): what it printed, how it ended, the cgroups its
// rank on the second host ran in.
struct hog_run {
  protocol::job_info job;
  std::string out, cgroups, node_logs;
};

// A --mem=100M job over both hosts whose rank on the second host (where
// aqs-rsh started its MPI daemon, a step of the job) says which
// cgroups it is in, then holds 500 MB in tail; every rank then idles.
hog_run hog_job(test::cluster& c, const test::test_user& u) {
  const fs::path out = u.home / "hog.out";
  const fs::path cg = u.home / "cgroup.out";
  const std::string rank =
      "if [ \"$(hostname)\" != \"$BATCH_HOST\" ]; then cat /proc/self/cgroup > " + cg.string() +
      "; echo allocating; echo held $({ head -c 500000000 /dev/zero; sleep 3; } | tail -n 1 | wc -c); fi; "
      "sleep 20; echo survived";
  const fs::path script = mpi_script(u, "hog.sh", rank);
  const std::int64_t id =
      c.submit({"-n", "2", "--mem=100M", "-o", out.string(), script.string()}, &u, u.home.string());
  hog_run r;
  r.job = c.wait_state(id, {job_state::out_of_memory, job_state::completed, job_state::failed}, 120s);
  r.out = slurp(out);
  r.cgroups = slurp(cg);
  r.node_logs = slurp(c.dir() / "node0.log") + slurp(c.dir() / "node1.log");
  return r;
}

}  // namespace

TEST_CASE("a 2-host job's rank on its second host runs in a step cgroup under the job's, held to --mem there: the kernel kills it and the step ends OUT_OF_MEMORY") {
  SKIP_WITHOUT_CONTAINMENT();
  two_host_case k;
  test::cluster& c = k.c;
  const auto u = user(c, "aqs-contain-m");
  const hog_run r = hog_job(c, u);
  INFO(r.out);
  INFO(r.node_logs);
  CHECK(r.out.find("allocating") != std::string::npos);
  // Uncontained, tail holds all 500 MB and every rank sleeps on to its end.
  CHECK(r.out.find("held 500000000") == std::string::npos);
  CHECK(r.out.find("survived") == std::string::npos);
  CHECK(r.job.state != job_state::completed);
  // The agent there ended the step OUT_OF_MEMORY, naming the step (the
  // agent of the job's first node names none: its step is "batch").
  const std::string step_end = "job " + std::to_string(r.job.id) + " (step 0) ended OUT_OF_MEMORY";
  CHECK(r.node_logs.find(step_end) != std::string::npos);
  CHECK(r.node_logs.find("OOM killer killed") != std::string::npos);
  // The rank ran in the step's cgroup under the job's, in every controller
  // the agent uses.
  INFO(r.cgroups);
  const bool v1 = fs::exists("/sys/fs/cgroup/memory");
  for (const std::string& controller : v1 ? std::vector<std::string>{"memory", "cpuset", "freezer"}
                                         : std::vector<std::string>{""}) {
    std::istringstream in(r.cgroups);
    bool found = false;
    for (std::string line; std::getline(in, line);) {
      const auto a = line.find(':');
      const auto b = line.find(':', a + 1);
      const std::string names = line.substr(a + 1, b - a - 1);
      if (("," + names + ",").find("," + controller + ",") == std::string::npos) continue;
      found = true;
      CHECK_MESSAGE(line.find("/job_" + std::to_string(r.job.id) + "/step_0") != std::string::npos, line);
    }
    CHECK_MESSAGE(found, controller);
  }
}

// aqsd records that a step on another node ended OUT_OF_MEMORY, and the job
// ends OUT_OF_MEMORY with the step's reason when its script ends (as Slurm's
// job does when one of its steps did).
TEST_CASE("a 2-host job whose rank on its second host allocates above --mem ends OUT_OF_MEMORY") {
  SKIP_WITHOUT_CONTAINMENT();
  two_host_case k;
  test::cluster& c = k.c;
  const auto u = user(c, "aqs-contain-o");
  const hog_run r = hog_job(c, u);
  CHECK(r.job.state == job_state::out_of_memory);
  const auto h = c.cmd(bin().fjobs, {"--history", std::to_string(r.job.id)}, &u);
  CHECK(h.out.find("OOM killer killed") != std::string::npos);
}

TEST_CASE("what a step leaves on the job's other host in a new session without AQS_JOB_ID is gone when the job ends") {
  SKIP_WITHOUT_CONTAINMENT();
  two_host_case k;
  test::cluster& c = k.c;
  SUBCASE("after a normal end") {
    const auto u = test::idle_user(c, "aqs-contain-r");
    const std::string rank =
        "if [ \"$(hostname)\" != \"$BATCH_HOST\" ]; then "
        "setsid env -u AQS_JOB_ID bash -c \"exec -a aqs-contain-left sleep 240\" </dev/null >/dev/null 2>&1 & "
        "( ( setsid sleep 241 </dev/null >/dev/null 2>&1 & ) & ) ; fi; sleep 2; echo done";
    const fs::path out = u.home / "left.out";
    const std::int64_t id = c.submit({"-n", "2", "-o", out.string(), mpi_script(u, "left.sh", rank).string()}, &u,
                                     u.home.string());
    CHECK(c.wait_state(id, {job_state::completed, job_state::failed}, 120s).state == job_state::completed);
    // (mpirun may add a warning of its own: the ranks' lines are counted.)
    const std::string text = slurp(out);
    CHECK_MESSAGE(std::count(text.begin(), text.end(), '\n') >= 2, text);
    CHECK_MESSAGE(text.find("done\ndone\n") != std::string::npos, text);
    test::check_nothing_left(u.uid);
  }
  SUBCASE("after fkill") {
    const auto u = test::idle_user(c, "aqs-contain-k");
    const fs::path mark = u.home / "left";
    const std::string rank =
        "if [ \"$(hostname)\" != \"$BATCH_HOST\" ]; then "
        "setsid env -u AQS_JOB_ID bash -c \"exec -a aqs-contain-left sleep 240\" </dev/null >/dev/null 2>&1 & "
        "touch " + mark.string() + "; fi; sleep 300";
    const std::int64_t id = c.submit({"-n", "2", "-o", (u.home / "k.out").string(),
                                      mpi_script(u, "killed.sh", rank).string()}, &u, u.home.string());
    REQUIRE(eventually([&] { return fs::exists(mark); }, 90s));
    const auto r = c.cmd(bin().fkill, {std::to_string(id)}, &u);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    c.wait_state(id, {job_state::cancelled, job_state::failed, job_state::completed}, 60s);
    // The agents end what the job ran on each host: give them the 1 s the
    // issue allows after the job's end.
    test::check_nothing_left(u.uid);
  }
}

namespace {

// The v1 cpuset cgroup of job `id` on this cluster's node0 (under the
// cpuset cgroup of this process, which the agents inherit, and the
// cluster id its spool names). Empty without v1.
fs::path v1_cpuset_of(const test::cluster& c, std::int64_t id) {
  return test::v1_job_cgroup(c, "cpuset", "cpuset.cpus", id);
}

// The cores of a one-node map on an agent with `--procs` on `cores` cores
// (processor i pinned to core i % cores), as cpuset.cpus lists them.
std::string cores_of(const std::string& map, int cores) {
  std::set<int> set;
  for (std::size_t i = 0; i < map.size(); ++i) {
    if (map[i] == '1') set.insert(static_cast<int>(i) % cores);
  }
  std::string out;
  // Runs of consecutive cores as a-b, as the kernel prints them.
  for (auto it = set.begin(); it != set.end();) {
    int a = *it, b = a;
    while (++it != set.end() && *it == b + 1) b = *it;
    out += (out.empty() ? "" : ",") + (a == b ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b));
  }
  return out;
}

}  // namespace

// aqsd sends a map change to the job's shim alone (new_map); the agents of
// the job's nodes are not told, so they cannot rewrite its cpuset
// (job_supervisor::set_cpus is ready for it). Run with --no-skip to see
// where it stands.
TEST_CASE("an adaptive job's cpuset is its map on the node as it shrinks and grows" * doctest::skip(true)) {
  SKIP_WITHOUT_CONTAINMENT();
  if (!fs::exists("/sys/fs/cgroup/cpuset/cpuset.cpus")) {
    MESSAGE("skipped: reads the job's cpuset from the v1 hierarchy");
    return;
  }
  const int cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  test::test_database db;
  test::cluster::options o;
  o.db = db.conninfo();
  o.nodes = 1;
  o.procs_per_node = 2;
  o.agent_args = {"--memory", "4G"};
  test::cluster c(o);
  c.wait_nodes_up(1);
  const fs::path work = c.workdir();
  const fs::path script = work / "jacobi.sh";
  std::ofstream(script) << "#!/bin/bash\n#AQS --adaptive --min 1 --max 2\n"
                        << "export OMPI_MCA_btl_vader_single_copy_mechanism=none\n"
                        << "exec " MPIEXEC " --oversubscribe --bind-to none -np $AQS_NPROCS " JACOBI2D_BINARY
                        << " --rows 64 --cols 48 --iters 3000 --pace-ms 60 --out " << (work / "a.grid").string() << "\n";
  const std::int64_t a = c.submit({"-J", "jacobi", "-o", (work / "jacobi.out").string(), script.string()});
  c.wait_state(a, {job_state::running});
  const fs::path cpuset = v1_cpuset_of(c, a) / "cpuset.cpus";
  // The job's cpuset matches its map once the map is applied (RUNNING).
  const auto matches = [&](std::size_t nprocs) {
    return eventually([&] {
      const auto j = c.job(a);
      if (!j || j->state != job_state::running || j->nprocs != static_cast<std::int64_t>(nprocs)) return false;
      std::string now = slurp(cpuset);
      while (!now.empty() && now.back() == '\n') now.pop_back();
      return now == cores_of(j->procs, cores);
    }, 60s);
  };
  CHECK_MESSAGE(matches(2), slurp(cpuset));
  // A rigid job takes one processor: the adaptive job shrinks to one.
  const std::int64_t b = c.submit({"-n", "1", "--wrap", "sleep 8"});
  c.wait_state(b, {job_state::running}, 60s);
  CHECK_MESSAGE(matches(1), "cpuset " << slurp(cpuset) << " map " << c.job(a)->procs << " state "
                                     << core::to_string(c.job(a)->state) << "\n" << slurp(work / "jacobi.out"));
  // It ends: the adaptive job grows back to both.
  c.wait_state(b, {job_state::completed}, 60s);
  CHECK_MESSAGE(matches(2), "cpuset " << slurp(cpuset) << " map " << c.job(a)->procs);
  CHECK(c.cmd(bin().fkill, {std::to_string(a)}).status == 0);
  c.wait_idle(60s);
}
