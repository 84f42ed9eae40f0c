// The steps of a job on its other nodes contained as the job is (issue 31):
// real aqsd and agents on network-namespace hosts, an MPI job of a throwaway
// user over two hosts (its daemon and rank on the second host started
// through aqs-rsh, a step of the job there): the rank that allocates above
// --mem on the second host is killed by the kernel and the job ends
// OUT_OF_MEMORY; a process that rank leaves in a new session without
// AQS_JOB_ID is gone when the job ends. The step runs in a cgroup of its own
// under the job's (job_N/step_M) in every controller. An adaptive job's
// cpuset follows its map as it shrinks and grows (aqsd's job_cpus).
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "cgroup_checks.hpp"
#include "e2e.hpp"
#include "protocol/auth.hpp"
#include "raw_peer.hpp"

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

// The cpuset tests read the job's cpuset from the v1 hierarchy.
#define SKIP_WITHOUT_V1_CPUSET()                                                 \
  SKIP_WITHOUT_CONTAINMENT();                                                    \
  if (!fs::exists("/sys/fs/cgroup/cpuset/cpuset.cpus")) {                        \
    MESSAGE("skipped: reads the job's cpuset from the v1 hierarchy");            \
    return;                                                                      \
  }

// One node of two processors whose agent offers 4 GB, over `db`.
test::cluster::options one_node_of_two(test::test_database& db) {
  test::cluster::options o;
  o.db = db.conninfo();
  o.nodes = 1;
  o.procs_per_node = 2;
  o.agent_args = {"--memory", "4G"};
  return o;
}

// An adaptive MPI job of 1 to 2 processors (jacobi, 60 ms an iteration,
// its grid a.grid and its output jacobi.out in the work folder; mpiexec
// given `mpiexec_args` before the program), submitted and running: its id.
std::int64_t start_jacobi(test::cluster& c, const std::string& mpiexec_args, std::vector<std::string> submit_args = {}) {
  const fs::path work = c.workdir();
  const fs::path script = work / "jacobi.sh";
  std::ofstream(script) << "#!/bin/bash\n#AQS --adaptive --min 1 --max 2\n"
                        << "export OMPI_MCA_btl_vader_single_copy_mechanism=none\n"
                        << "exec " MPIEXEC " " << mpiexec_args << JACOBI2D_BINARY
                        << " --rows 64 --cols 48 --iters 3000 --pace-ms 60 --out " << (work / "a.grid").string() << "\n";
  std::vector<std::string> args = {"-J", "jacobi", "-o", (work / "jacobi.out").string()};
  args.insert(args.end(), submit_args.begin(), submit_args.end());
  args.push_back(script.string());
  const std::int64_t id = c.submit(args);
  c.wait_state(id, {job_state::running});
  return id;
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

// Which node of a 2-host case holds processor p (one processor per node).
std::string node_holding(test::cluster& c, std::size_t p) {
  for (const auto& n : c.nodes()) {
    if (n.first_proc == static_cast<std::int64_t>(p)) return n.name;
  }
  return {};
}

// A rigid job holding one of the two hosts: its id, the other node (A,
// free) and its own (B).
struct held_host {
  std::int64_t job;
  std::string a, b;
};
held_host hold_one_host(test::cluster& c) {
  const std::int64_t hold = c.submit({"-n", "1", "-J", "hold", "--wrap", "sleep 300"});
  const auto held = c.wait_state(hold, {job_state::running});
  const std::string b = node_holding(c, held.procs.find('1'));
  return {hold, b == "node0" ? "node1" : "node0", b};
}

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

// The cpus a cpu list names ("0-1,3", as cpuset.cpus and Cpus_allowed_list
// print them).
std::set<int> cpu_set(const std::string& list) {
  std::set<int> out;
  std::istringstream in(list);
  for (std::string part; std::getline(in, part, ',');) {
    while (!part.empty() && (part.back() == '\n' || part.back() == ' ')) part.pop_back();
    if (part.empty()) continue;
    const auto dash = part.find('-');
    const int a = std::stoi(part.substr(0, dash));
    const int b = dash == std::string::npos ? a : std::stoi(part.substr(dash + 1));
    for (int c = a; c <= b; ++c) out.insert(c);
  }
  return out;
}

// A process in a job's cgroup: its name and the cpus it may run on.
struct proc_cpus {
  std::string pid, comm;
  std::set<int> allowed;
};

// Every process in cgroup `cg` and the cgroups below it (the job's steps).
std::vector<proc_cpus> processes_in(const fs::path& cg) {
  std::vector<proc_cpus> out;
  std::error_code ec;
  std::vector<fs::path> dirs{cg};
  for (fs::recursive_directory_iterator it(cg, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec)) dirs.push_back(it->path());
  }
  for (const auto& d : dirs) {
    std::istringstream pids(slurp(d / "cgroup.procs"));
    for (std::string pid; pids >> pid;) {
      std::istringstream status(slurp("/proc/" + pid + "/status"));
      proc_cpus p{pid, {}, {}};
      bool seen = false;
      for (std::string line; std::getline(status, line);) {
        if (line.rfind("Name:", 0) == 0) p.comm = line.substr(line.find_first_not_of(" \t", 5));
        if (line.rfind("Cpus_allowed_list:", 0) == 0) {
          p.allowed = cpu_set(line.substr(18));
          seen = true;
        }
      }
      if (seen) out.push_back(std::move(p));
    }
  }
  return out;
}

std::string shown(const std::set<int>& s) {
  std::string out;
  for (int c : s) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

std::string shown(const std::vector<proc_cpus>& ps) {
  std::string out;
  for (const auto& p : ps) out += p.pid + " " + p.comm + ": " + shown(p.allowed) + "\n";
  return out;
}

}  // namespace

// aqsd tells the agents of an adaptive job's nodes its cpus there as its map
// changes (job_cpus): its cpuset widens to both maps before the map goes to
// the shim, and narrows to the new one once the shim has applied it. Each
// step is checked on the job's processes as the kernel sees them
// (Cpus_allowed_list): none may run on a cpu of the map it gave back, and
// its MPI ranks together are on every cpu of its map (a rank started on a
// cpu the cpuset did not hold would be refused its pinning and stay on the
// old cpus).
TEST_CASE("an adaptive job's cpuset is its map on the node as it shrinks and grows") {
  SKIP_WITHOUT_V1_CPUSET();
  const int cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  if (cores < 2) {
    MESSAGE("skipped: needs 2 cpus to shrink a job off one");
    return;
  }
  test::test_database db;
  auto o = one_node_of_two(db);
  test::cluster c(o);
  c.wait_nodes_up(1);
  const fs::path work = c.workdir();
  const std::int64_t a = start_jacobi(c, "--oversubscribe --bind-to none -np $AQS_NPROCS ");
  const fs::path cg = v1_cpuset_of(c, a);
  const fs::path cpuset = cg / "cpuset.cpus";
  const std::string rank_name = fs::path(JACOBI2D_BINARY).filename().string().substr(0, 15);
  // Once the job runs on `nprocs` (its map applied): its cpuset is its map's
  // cpus, no process of it may run elsewhere, and its ranks together are on
  // all of them.
  // What the last look saw once the job was at that size (or, if it never
  // was, its map and state).
  std::string last;
  const auto follows = [&](std::size_t nprocs) {
    last.clear();
    bool sized = false;
    return eventually([&] {
      const auto j = c.job(a);
      if (!j || j->state != job_state::running || j->nprocs != static_cast<std::int64_t>(nprocs)) {
        if (!sized) last = j ? "map " + j->procs + " " + std::string(core::to_string(j->state)) : "no job";
        return false;
      }
      sized = true;
      const std::string want = cores_of(j->procs, cores);
      const std::set<int> map = cpu_set(want);
      std::string now = slurp(cpuset);
      while (!now.empty() && now.back() == '\n') now.pop_back();
      const auto procs = processes_in(cg);
      last = "map " + j->procs + " (cpus " + want + "), cpuset " + now + ", processes:\n" + shown(procs);
      if (now != want || procs.empty()) return false;
      std::set<int> ranks_on;
      for (const auto& p : procs) {
        if (!std::includes(map.begin(), map.end(), p.allowed.begin(), p.allowed.end())) return false;
        if (p.comm == rank_name) ranks_on.insert(p.allowed.begin(), p.allowed.end());
      }
      return ranks_on == map;
    }, 60s);
  };
  CHECK_MESSAGE(follows(2), last);
  // A rigid job takes one processor: the adaptive job shrinks to one.
  const std::int64_t b = c.submit({"-n", "1", "--wrap", "sleep 8"});
  c.wait_state(b, {job_state::running}, 60s);
  CHECK_MESSAGE(follows(1), last << "\n" << slurp(work / "jacobi.out"));
  // It ends: the adaptive job grows back to both.
  c.wait_state(b, {job_state::completed}, 60s);
  CHECK_MESSAGE(follows(2), last << "\n" << slurp(work / "jacobi.out"));
  // The agent said so in its log, once per change at least.
  const std::string log = slurp(c.dir() / "node0.log");
  CHECK(log.find("job " + std::to_string(a) + " may use cpus") != std::string::npos);
  CHECK(c.cmd(bin().fkill, {std::to_string(a)}).status == 0);
  c.wait_idle(60s);
}

// job_cpus goes from aqsd to an agent only: a job's owner (as a client or as
// its job's own shim), another user, a registered node and a peer without
// the cluster key cannot send it to aqsd (so aqsd passes none on), and
// nothing else reaches the agent (it reads protocol messages from its aqsd
// connection alone): the job's cpuset stays its one cpu.
TEST_CASE("nobody but aqsd gives a job cpus: job_cpus from its owner, its shim, another user, a node or a stranger is refused") {
  SKIP_WITHOUT_V1_CPUSET();
  test::test_database db;
  auto o = one_node_of_two(db);
  o.aqsd_args = {"--listen", "127.0.0.1:0"};  // the stranger's way in
  test::cluster c(o);
  c.wait_nodes_up(1);
  const auto owner = user(c, "aqs-cpus-a");
  const auto other = user(c, "aqs-cpus-b");
  const std::int64_t id = c.submit({"-n", "1", "-o", (owner.home / "o.out").string(), "--wrap", "sleep 120"}, &owner,
                                   owner.home.string());
  c.wait_state(id, {job_state::running});
  const fs::path cpuset = v1_cpuset_of(c, id) / "cpuset.cpus";
  REQUIRE(eventually([&] { return cpu_set(slurp(cpuset)).size() == 1; }, 30s));
  const std::string before = slurp(cpuset);
  std::vector<std::int64_t> every;
  for (long i = 0; i < ::sysconf(_SC_NPROCESSORS_ONLN); ++i) every.push_back(i);
  // What each attempt must get: a refusal, never an ok.
  const auto refused = [&](test::raw_peer& p, std::int64_t rid, const std::string& who) {
    p.send(protocol::job_cpus{rid, id, every});
    const auto answer = p.reply_to(rid);
    CHECK_MESSAGE(test::error_of(answer).has_value(), who << ": " << test::describe(answer));
  };
  {
    test::raw_peer p(test::connect_unix_as(c.socket(), owner.uid, owner.gid).at(0));
    REQUIRE(test::is_ok(p.hello()));
    refused(p, 2, "the owner as a client");
  }
  {
    test::raw_peer p(test::connect_unix_as(c.socket(), owner.uid, owner.gid).at(0));
    REQUIRE(test::is_ok(p.hello(protocol::peer_role::job, id)));
    refused(p, 2, "the job's own shim");
  }
  {
    test::raw_peer p(test::connect_unix_as(c.socket(), other.uid, other.gid).at(0));
    REQUIRE(test::is_ok(p.hello()));
    refused(p, 2, "another user");
    // Not a node either: a local user is refused that role.
    test::raw_peer n(test::connect_unix_as(c.socket(), other.uid, other.gid).at(0));
    CHECK(test::error_of(n.hello(protocol::peer_role::node)) == protocol::error_code::permission_denied);
  }
  {
    // Root may be a node locally, under a name of its own: still no job_cpus.
    test::raw_peer p(test::connect_unix_as(c.socket(), 0, 0).at(0));
    REQUIRE(test::is_ok(p.hello(protocol::peer_role::node)));
    p.send(protocol::register_node{2, "aqs-cpus-spy", 1, {0}, 0, 0, {}, ""});
    REQUIRE(test::is_ok(p.reply_to(2)));
    refused(p, 3, "a registered node");
  }
  {
    // Over TCP without the cluster key, not even the hello goes through.
    const std::string addr = slurp(c.dir() / "state" / "aqsd.addr");
    const auto colon = addr.rfind(':');
    REQUIRE(colon != std::string::npos);
    const int fd = test::connect_tcp(addr.substr(0, colon), std::stoi(addr.substr(colon + 1)));
    REQUIRE(fd >= 0);
    test::raw_peer p(fd);
    const auto ch = p.next();
    REQUIRE((ch && std::holds_alternative<protocol::challenge>(*ch)));
    const auto no = p.hello(protocol::peer_role::node, std::nullopt,
                            protocol::compute_auth("not the key", std::get<protocol::challenge>(*ch).nonce));
    CHECK(test::error_of(no) == protocol::error_code::unauthorized);
    p.send(protocol::job_cpus{2, id, every});
    CHECK(p.closed_within(5s));
  }
  std::this_thread::sleep_for(500ms);
  CHECK(slurp(cpuset) == before);
  CHECK(slurp(c.dir() / "node0.log").find("may use cpus") == std::string::npos);
  CHECK(c.cmd(bin().fkill, {std::to_string(id)}, &owner).status == 0);
  c.wait_idle(60s);
}

// Nodes entering and leaving the job's node set (two namespace hosts of one
// processor each, on cpu 0 of each): a rigid job holds host B, so the
// adaptive job starts on host A, with its MPI daemon on B as a spare host
// (on all of B's cpus). B frees up: the job grows onto it, and its cpuset
// there becomes its processor's cpu. A rigid job comes back: the job leaves
// B again, and what it keeps there (its daemon, its parked rank) idles on
// B's cpus; A keeps its one cpu throughout.
TEST_CASE("an adaptive job over two hosts: its cpuset on the host it grows onto becomes its map there, and on the host it leaves the node's") {
  SKIP_WITHOUT_V1_CPUSET();
  two_host_case k;
  test::cluster& c = k.c;
  const auto node_of = [&](std::size_t p) { return node_holding(c, p); };
  const fs::path work = c.workdir();
  const auto [hold, a, b] = hold_one_host(c);
  const std::int64_t job = start_jacobi(c, "");
  const auto cpuset_on = [&](const std::string& node) {
    std::string t = slurp(test::v1_job_cgroup(c, "cpuset", "cpuset.cpus", job, node) / "cpuset.cpus");
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return t;
  };
  const std::string all = [] {
    std::string t = slurp("/sys/fs/cgroup/cpuset/cpuset.cpus");
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return t;
  }();
  std::string seen;
  // Job at `nprocs` with cpuset `on_a` on A and `on_b` on B, and every
  // process of it on each host within its cpuset there.
  const auto holds = [&](std::int64_t nprocs, const std::string& on_a, const std::string& on_b) {
    return eventually([&] {
      const auto j = c.job(job);
      const auto pa = processes_in(test::v1_job_cgroup(c, "cpuset", "cpuset.cpus", job, a));
      const auto pb = processes_in(test::v1_job_cgroup(c, "cpuset", "cpuset.cpus", job, b));
      seen = (j ? "map " + j->procs + " " + std::string(core::to_string(j->state)) : std::string("no job")) +
             "; " + a + " " + cpuset_on(a) + ":\n" + shown(pa) + b + " " + cpuset_on(b) + ":\n" + shown(pb);
      if (!j || j->state != job_state::running || j->nprocs != nprocs) return false;
      if (cpuset_on(a) != on_a || cpuset_on(b) != on_b) return false;
      const auto within = [](const std::vector<proc_cpus>& ps, const std::set<int>& set) {
        return std::all_of(ps.begin(), ps.end(), [&](const proc_cpus& p) {
          return std::includes(set.begin(), set.end(), p.allowed.begin(), p.allowed.end());
        });
      };
      return !pa.empty() && within(pa, cpu_set(on_a)) && within(pb, cpu_set(on_b));
    }, 90s);
  };
  // On A only; its daemon waits on B, a spare host, on all of B's cpus.
  CHECK_MESSAGE(holds(1, "0", all), seen);
  // B frees up: the job enters it, held to its processor's cpu there.
  CHECK(c.cmd(bin().fkill, {std::to_string(hold)}).status == 0);
  CHECK_MESSAGE(holds(2, "0", "0"), seen << "\n" << slurp(work / "jacobi.out"));
  // A rigid job of 1: the job leaves one host (B: its highest processor).
  const std::int64_t rigid = c.submit({"-n", "1", "--wrap", "sleep 300"});
  const auto r = c.wait_state(rigid, {job_state::running}, 90s);
  const std::string left = node_of(r.procs.find('1'));
  const std::string kept = left == a ? b : a;
  const auto j = c.job(job);
  REQUIRE(j);
  CHECK(j->nprocs == 1);
  CHECK_MESSAGE(holds(1, left == a ? all : "0", left == b ? all : "0"), seen << " (left " << left << ", kept " << kept << ")");
  CHECK(c.cmd(bin().fkill, {std::to_string(job), std::to_string(rigid)}).status == 0);
  c.wait_idle(90s);
}

// Issue 30: an adaptive job takes --mem with the meaning it has for a rigid
// job, on every node it grows onto, and the scheduler counts it there.
TEST_CASE("an adaptive job with --mem over two hosts: held to it on the host it grows onto, whose memory a job needing it gets once it has left") {
  SKIP_WITHOUT_V1_CPUSET();
  two_host_case k;
  test::cluster& c = k.c;
  const auto node_of = [&](std::size_t p) { return node_holding(c, p); };
  const fs::path work = c.workdir();
  const auto [hold, a, b] = hold_one_host(c);
  // 3 GB of each node's 4: no other job asking 2 GB fits beside it.
  const std::int64_t job = start_jacobi(c, "", {"--mem=3G"});
  const std::string want = std::to_string(3ULL << 30);
  // The memory limits under the job's cgroup on a node (its own and its steps').
  const auto limits_on = [&](const std::string& node) {
    std::set<std::string> out;
    const fs::path dir = test::v1_job_cgroup(c, "memory", "memory.limit_in_bytes", job, node);
    std::error_code ec;
    if (dir.empty() || !fs::exists(dir, ec)) return out;
    for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it->path().filename() != "memory.limit_in_bytes") continue;
      std::string t = slurp(it->path());
      while (!t.empty() && t.back() == '\n') t.pop_back();
      out.insert(t);
    }
    const std::string top = slurp(dir / "memory.limit_in_bytes");
    if (!top.empty()) out.insert(top.substr(0, top.find('\n')));
    return out;
  };
  std::string seen;
  CHECK_MESSAGE(eventually([&] { return limits_on(a).count(want) != 0; }, 60s), "limits on " << a);
  // B frees up: the job grows onto it, and its step there is held to 3 GB.
  CHECK(c.cmd(bin().fkill, {std::to_string(hold)}).status == 0);
  CHECK_MESSAGE(eventually([&] {
                  const auto j = c.job(job);
                  seen = j ? j->procs + " " + std::string(core::to_string(j->state)) : "no job";
                  return j && j->state == job_state::running && j->nprocs == 2 && limits_on(b).count(want) != 0;
                }, 90s),
                seen << "\n" << slurp(work / "jacobi.out"));
  // A rigid job asking 2 GB: no node has it free while the job is on both.
  // The job is shrunk off one, and the rigid job starts there once it has
  // left (its memory there given back at the acknowledgement).
  const std::int64_t rigid = c.submit({"-n", "1", "--mem=2G", "--wrap", "sleep 300"});
  const auto r = c.wait_state(rigid, {job_state::running}, 90s);
  const std::string left = node_of(r.procs.find('1'));
  const auto j = c.job(job);
  REQUIRE(j);
  CHECK(j->nprocs == 1);
  CHECK(j->state == job_state::running);
  CHECK(node_of(j->procs.find('1')) != left);
  CHECK(c.cmd(bin().fkill, {std::to_string(job), std::to_string(rigid)}).status == 0);
  c.wait_idle(90s);
}
