// Partitions end to end: a real aqsd reading an aqs.conf (--config) and
// real aqs-node agents; jobs submitted with sbatch and fsub, as root and as a
// throwaway user, seen with sinfo, squeue and fnodes.
#include <algorithm>
#include <csignal>
#include <fstream>
#include <regex>
#include <sstream>
#include <set>

#include <nlohmann/json.hpp>

#include "client/client_connection.hpp"
#include "e2e.hpp"
#include "temp_dir.hpp"

namespace {

// node0..node3, 4 processors each.
constexpr const char* k_config =
    "# partitions of the test cluster\n"
    "PartitionName=debug Nodes=node[0-1] Default=YES MaxTime=30:00 MaxNodes=1\n"
    "PartitionName=batch Nodes=node[2-3] MaxTime=2:00:00\n"
    "PartitionName=vip   Nodes=node3 AllowUsers=root\n"
    "PartitionName=off   Nodes=node0 State=DOWN\n";

// The Slurm names as symlinks in a private bin directory (as slurm_test.cpp).
fs::path slurm_bin(const test::cluster& c) {
  const fs::path bin = c.dir() / "slurm-bin";
  fs::create_directories(bin);
  for (const char* n : {"sbatch", "squeue", "sinfo", "scancel", "scontrol"}) {
    const fs::path link = bin / n;
    if (!fs::exists(fs::symlink_status(link))) fs::create_symlink(fs::path(AQS_SLURM_BIN_DIR) / ("aqs-" + std::string(n)), link);
  }
  fs::permissions(bin, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec);
  return bin;
}

struct slurm {
  test::cluster& c;
  fs::path bin;
  test::run_result run(const std::string& name, std::vector<std::string> args, const test::test_user* as = nullptr) const {
    args.insert(args.begin(), (bin / name).string());
    std::map<std::string, std::string> env{{"AQS_SOCKET", c.socket()},
                                           {"PATH", bin.string() + ":/usr/local/bin:/usr/bin:/bin"},
                                           {"USER", as != nullptr ? as->name : "root"},
                                           {"TZ", "UTC"}};
    std::optional<uid_t> uid;
    std::optional<gid_t> gid;
    if (as != nullptr) {
      uid = as->uid;
      gid = as->gid;
    }
    return test::run(args, env, uid, gid, as != nullptr ? as->home.string() : c.workdir().string(), 60s);
  }
  std::int64_t submit(std::vector<std::string> args, const test::test_user* as = nullptr) const {
    args.insert(args.begin(), "--parsable");
    const auto r = run("sbatch", args, as);
    INFO("sbatch " << args.back() << ": " << r.out << r.err);
    REQUIRE(r.status == 0);
    return std::stoll(r.out);
  }
};

// The node names a job's compact map "node2:0-3,node3:0-3" names.
std::set<std::string> hosts_of(const std::string& nodes) {
  std::set<std::string> out;
  const std::regex host("(^|,)([a-z]+[0-9]+):");
  for (auto it = std::sregex_iterator(nodes.begin(), nodes.end(), host); it != std::sregex_iterator(); ++it) {
    out.insert((*it)[2]);
  }
  return out;
}

}  // namespace

TEST_CASE("partitions from aqs.conf: jobs run only on their partition's nodes, sinfo lists them, limits refuse at submission") {
  test::test_database db;
  test::temp_dir conf_dir("aqs-partitions");
  const fs::path conf = conf_dir.path() / "aqs.conf";
  std::ofstream(conf) << k_config;
  test::cluster::options o = test::nodes_of(db, 4, 4);
  o.aqsd_args = {"--config", conf.string()};
  test::cluster c(o);
  const slurm s{c, slurm_bin(c)};

  // sinfo: one line per partition and node state, the default starred.
  const auto info = s.run("sinfo", {});
  CHECK(info.status == 0);
  CHECK(info.out ==
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
        "debug*       up      30:00      2   idle node[0-1]\n"
        "batch        up    2:00:00      2   idle node[2-3]\n"
        "vip          up   infinite      1   idle node3\n"
        "off        down   infinite      1   idle node0\n");
  // sinfo -p: those partitions only, in the configuration's order; an unknown
  // one: the header alone, exit 0, as Slurm's.
  const auto some = s.run("sinfo", {"-p", "vip,batch"});
  CHECK(some.status == 0);
  CHECK(some.out ==
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
        "batch        up    2:00:00      2   idle node[2-3]\n"
        "vip          up   infinite      1   idle node3\n");
  CHECK(s.run("sinfo", {"-h", "--partition=debug", "-o", "%P %D"}).out == "debug* 2\n");
  const auto unknown = s.run("sinfo", {"-p", "nosuch"});
  CHECK(unknown.status == 0);
  CHECK(unknown.out == "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n");

  // Two whole-partition jobs in batch: each runs on batch's nodes only, and
  // the second waits for the first although debug is idle.
  const std::int64_t b1 = s.submit({"-p", "batch", "-n", "8", "--wrap", "sleep 300"});
  const auto j1 = c.wait_state(b1, {job_state::running});
  CHECK(hosts_of(j1.nodes) == std::set<std::string>{"node2", "node3"});
  const std::int64_t b2 = s.submit({"-p", "batch", "-n", "2", "--wrap", "sleep 300"});
  // A job without -p goes to debug, the default, and starts at once.
  const std::int64_t d1 = s.submit({"-n", "4", "--wrap", "sleep 300"});
  const auto jd = c.wait_state(d1, {job_state::running});
  CHECK(hosts_of(jd.nodes).size() == 1);
  CHECK((hosts_of(jd.nodes) == std::set<std::string>{"node0"} || hosts_of(jd.nodes) == std::set<std::string>{"node1"}));
  CHECK(c.job(b2)->state == job_state::pending);
  const auto q = s.run("squeue", {"-h", "-o", "%i %P %t %R"});
  CHECK(q.out.find(std::to_string(b1) + " batch R node[2-3]\n") != std::string::npos);
  CHECK(q.out.find(std::to_string(b2) + " batch PD (Resources)\n") != std::string::npos);
  CHECK(q.out.find(std::to_string(d1) + " debug R node") != std::string::npos);

  // A job in a DOWN partition is taken and waits, saying why.
  const std::int64_t off = s.submit({"-p", "off", "--wrap", "true"});
  std::string why;
  for (int i = 0; i < 50 && why != "off PD PartitionDown\n"; ++i) {
    if (i > 0) std::this_thread::sleep_for(100ms);
    why = s.run("squeue", {"-h", "-j", std::to_string(off), "-o", "%P %t %r"}).out;
  }
  CHECK(why == "off PD PartitionDown\n");

  // Unknown partitions and jobs over a limit are refused at submission, in one line.
  auto r = s.run("sbatch", {"-p", "gpu", "--wrap", "true"});
  CHECK(r.status != 0);
  CHECK(r.err ==
        "sbatch: error: Batch job submission failed: invalid partition name specified: 'gpu' (partitions: debug, "
        "batch, vip, off)\n");
  r = s.run("sbatch", {"-p", "debug", "-t", "1:00:00", "--wrap", "true"});
  CHECK(r.status != 0);
  CHECK(r.err.find("Requested time limit is invalid") != std::string::npos);
  CHECK(r.err.find("MaxTime is 30:00 (partition debug)") != std::string::npos);
  r = s.run("sbatch", {"-N", "2", "--wrap", "true"});
  CHECK(r.err.find("Node count specification invalid: 2 nodes asked, MaxNodes is 1 (partition debug)") != std::string::npos);
  r = s.run("sbatch", {"-n", "6", "--wrap", "true"});  // more than one node of debug holds
  CHECK(r.err.find("Node count specification invalid: 6 processors need 2 nodes in partition debug, MaxNodes is 1") !=
        std::string::npos);
  r = s.run("sbatch", {"-p", "batch", "-n", "12", "--wrap", "true"});
  CHECK(r.err.find("it needs 12 processors; partition batch has 8") != std::string::npos);

  // A throwaway user: vip is root's only; -p vip,batch falls back to batch.
  const test::test_user u = c.user("aqs-part-t1");
  r = s.run("sbatch", {"-p", "vip", "--wrap", "true"}, &u);
  CHECK(r.status != 0);
  CHECK(r.err == "sbatch: error: Batch job submission failed: Access/permission denied: user aqs-part-t1 may not use "
                 "partition vip\n");
  const std::int64_t mine = s.submit({"-p", "vip,batch", "-n", "1", "--wrap", "sleep 300"}, &u);
  CHECK(c.job(mine)->partition == "batch");
  // And fsub names the partition the same way.
  const auto f = c.cmd(test::bin().fsub, {"-p", "nope", "--wrap", "true"}, &u);
  CHECK(f.status != 0);
  CHECK(f.err.find("invalid partition name specified: 'nope'") != std::string::npos);

  // A job without a time limit takes its partition's: debug's 30 minutes.
  CHECK(c.job(d1)->walltime_s == 1800);

  // fnodes shows each node's partitions.
  for (const auto& n : c.nodes()) {
    if (n.name == "node3") CHECK(n.partitions == std::vector<std::string>{"batch", "vip"});
    if (n.name == "node0") CHECK(n.partitions == std::vector<std::string>{"debug", "off"});
  }
  const auto fn = c.cmd(test::bin().fnodes, {});
  CHECK(fn.out.find("PARTITIONS") != std::string::npos);
  CHECK(fn.out.find("batch,vip") != std::string::npos);

  // scontrol: partitions, nodes and jobs in Slurm's key=value form.
  auto sc = s.run("scontrol", {"show", "partition", "batch"});
  CHECK(sc.status == 0);
  CHECK(sc.out ==
        "PartitionName=batch\n"
        "   Default=NO\n"
        "   DefaultTime=NONE\n"
        "   MaxNodes=UNLIMITED MaxTime=02:00:00 MinNodes=0 MaxCPUsPerJob=UNLIMITED\n"
        "   Nodes=node[2-3]\n"
        "   State=UP TotalCPUs=8 TotalNodes=2\n"
        "\n");
  sc = s.run("scontrol", {"show", "partition", "gpu"});
  CHECK(sc.status == 1);
  CHECK(sc.out == "Partition gpu not found\n");
  sc = s.run("scontrol", {"-o", "show", "node", "node2"});
  CHECK(sc.status == 0);
  CHECK(sc.out.starts_with("NodeName=node2 CPUAlloc=4 CPUEfctv=4 CPUTot=4 "));
  CHECK(sc.out.ends_with(" State=ALLOCATED Partitions=batch\n"));
  CHECK(s.run("scontrol", {"show", "node", "node9"}).out == "Node node9 not found\n");
  sc = s.run("scontrol", {"show", "job", std::to_string(b1)});
  CHECK(sc.status == 0);
  CHECK(sc.out.starts_with("JobId=" + std::to_string(b1) + " JobName="));
  for (const char* part : {"   UserId=root(0)\n", "   JobState=RUNNING Reason=None", " TimeLimit=02:00:00 ",
                           "   Partition=batch\n", "   NodeList=node[2-3]\n", "   NumNodes=2 NumCPUs=8 "}) {
    CAPTURE(part);
    CHECK(sc.out.find(part) != std::string::npos);
  }
  sc = s.run("scontrol", {"show", "job", "999999"});
  CHECK(sc.status == 1);
  CHECK(sc.err == "slurm_load_jobs error: Invalid job id specified\n");
  CHECK(s.run("scontrol", {"show", "hostnames", "node[2-3]"}).out == "node2\nnode3\n");
  // hold, update, release of a pending job; another user's is refused, in one line.
  CHECK(s.run("scontrol", {"hold", std::to_string(b2)}).status == 0);
  CHECK(s.run("squeue", {"-h", "-j", std::to_string(b2), "-o", "%r"}).out == "JobHeldAdmin\n");
  sc = s.run("scontrol", {"update", "JobId=" + std::to_string(b2), "TimeLimit=45:00"});
  CHECK_MESSAGE(sc.status == 0, sc.err);
  CHECK(c.job(b2)->walltime_s == 2700);
  sc = s.run("scontrol", {"release", std::to_string(b2)}, &u);
  CHECK(sc.status == 1);
  CHECK(sc.err.starts_with("scontrol: error: "));
  CHECK(std::count(sc.err.begin(), sc.err.end(), '\n') == 1);
  CHECK(s.run("scontrol", {"release", std::to_string(b2)}).status == 0);
  CHECK(s.run("squeue", {"-h", "-j", std::to_string(b2), "-o", "%r"}).out != "JobHeldAdmin\n");
  sc = s.run("scontrol", {"ping"});
  CHECK(sc.status == 1);
  CHECK(sc.err.starts_with("scontrol: error: 'ping' is not supported by AQS's scontrol"));
  sc = s.run("scontrol", {"update", "JobId=" + std::to_string(b2), "Partition=debug"});
  CHECK(sc.status == 1);
  CHECK(sc.err.starts_with("scontrol: error: Update of Partition is not supported"));

  // --signal=B:USR1@2 with a 4-second limit: the batch shell's trap runs
  // about 2 s before the limit ends the job.
  const fs::path sigout = c.workdir() / "signal-test.out";
  const std::int64_t sj = s.submit({"-t", "0:04", "--signal=B:USR1@2", "-o", sigout.string(), "--wrap",
                                    "trap 'echo warned' USR1; for i in 1 2 3 4 5 6 7 8; do sleep 1; done"});
  CHECK(c.wait_state(sj, {job_state::timeout}).state == job_state::timeout);
  {
    std::ifstream in(sigout);
    std::stringstream text;
    text << in.rdbuf();
    CAPTURE(text.str());
    CHECK(text.str().starts_with("warned\n"));
    CHECK(text.str().find("warned", 1) == std::string::npos);  // once
  }
  r = s.run("sbatch", {"--signal=B:USR9@2", "--wrap", "true"});
  CHECK(r.status != 0);
  CHECK(r.err.find("invalid --signal 'B:USR9@2'") != std::string::npos);

  // When the batch job ends, the waiting one starts on batch's nodes.
  CHECK(s.run("scancel", {std::to_string(b1)}).status == 0);
  const auto j2 = c.wait_state(b2, {job_state::running});
  for (const auto& h : hosts_of(j2.nodes)) CHECK((h == "node2" || h == "node3"));
  s.run("scancel", {"-u", "aqs-part-t1"}, &u);
  for (std::int64_t id : {b2, d1, off}) s.run("scancel", {std::to_string(id)});

  // SIGHUP: aqsd reads aqs.conf again. A broken file keeps the partitions in use.
  std::ofstream(conf, std::ios::trunc) << "PartitionName=debug Nodes=node[0-1] Default=YES\nPartitionName=x Nodes=node[0-\n";
  REQUIRE(::kill(c.aqsd_pid(), SIGHUP) == 0);
  std::this_thread::sleep_for(500ms);
  CHECK(s.run("sinfo", {"-s", "-h", "-o", "%P"}).out == "debug*\nbatch\nvip\noff\n");
  std::ofstream(conf, std::ios::trunc) << "PartitionName=all Nodes=ALL Default=YES MaxTime=10:00\n"
                                          "PartitionName=small Nodes=node0 MaxNodes=1\n";
  REQUIRE(::kill(c.aqsd_pid(), SIGHUP) == 0);
  std::string listed;
  for (int i = 0; i < 100 && listed != "all* 10:00 4\nsmall infinite 1\n"; ++i) {
    if (i > 0) std::this_thread::sleep_for(100ms);
    listed = s.run("sinfo", {"-s", "-h", "-o", "%P %l %D"}).out;
  }
  CHECK(listed == "all* 10:00 4\nsmall infinite 1\n");
  r = s.run("sbatch", {"-p", "batch", "--wrap", "true"});
  CHECK(r.err.find("invalid partition name specified: 'batch' (partitions: all, small)") != std::string::npos);
  const std::int64_t after = s.submit({"-p", "small", "--wrap", "true"});
  CHECK(c.wait_state(after, {job_state::completed}).state == job_state::completed);
  CHECK(c.job(after)->partition == "small");
}

namespace {

// Processors of a 0/1 map on each node of `per_node` processors.
std::vector<std::size_t> per_node(const std::string& map, std::size_t per_node) {
  std::vector<std::size_t> out((map.size() + per_node - 1) / per_node, 0);
  for (std::size_t i = 0; i < map.size(); ++i) out[i / per_node] += map[i] == '1' ? 1 : 0;
  return out;
}

}  // namespace

TEST_CASE("adaptive jobs: MaxNodes bounds their nodes, and with -c they hold and are sent whole ranks on each node") {
  test::test_database db;
  test::temp_dir conf_dir("aqs-partitions");
  const fs::path conf = conf_dir.path() / "aqs.conf";
  std::ofstream(conf) << "PartitionName=one Nodes=node[0-1] Default=YES MaxNodes=1\n"
                         "PartitionName=odd Nodes=node[2-3]\n";
  test::cluster::options o;
  o.db = db.conninfo();
  o.nodes = 4;
  o.procs_per_node = 3;  // an odd count: one rank of 2 per node, one processor over
  o.resize_timeout_s = 2;  // the -c job below runs no AQS runtime: its resize times out
  o.aqsd_args = {"--config", conf.string()};
  test::cluster c(o);
  c.wait_nodes_up(4);

  // MaxNodes=1: an adaptive job up to 6 gets one node's 3, not both nodes.
  const std::int64_t a = c.submit({"-p", "one", "--adaptive", "--min", "1", "--max", "6", "--wrap", "sleep 300"});
  const auto ja = c.wait_state(a, {job_state::running});
  CHECK(ja.nprocs == 3);
  CHECK(hosts_of(ja.nodes).size() == 1);
  // A minimum that needs two nodes is refused at submission.
  const auto refused = c.cmd(test::bin().fsub, {"-p", "one", "--adaptive", "--min", "4", "--max", "6", "--wrap", "true"});
  CHECK(refused.status != 0);
  CHECK(refused.err.find("Node count specification invalid: 4 processors need 2 nodes in partition one, MaxNodes is 1") !=
        std::string::npos);

  // -c 2 in odd: a rigid job holds one of its nodes, the adaptive job starts
  // with one rank on the other (2 of its 3 processors) and sees its ranks
  // as Slurm tasks. Maps are per registered node, 3 processors each.
  const std::int64_t r = c.submit({"-p", "odd", "-n", "3", "--wrap", "sleep 300"});
  const auto per_rigid = per_node(c.wait_state(r, {job_state::running}).procs, 3);
  const fs::path out = c.workdir() / "ranks.out";
  const std::int64_t k = c.submit({"-p", "odd", "--adaptive", "--min", "1", "--max", "4", "-c", "2", "-o", out.string(),
                                   "--wrap",
                                   "echo cpt=$SLURM_CPUS_PER_TASK ntasks=$SLURM_NTASKS nprocs=$AQS_NPROCS; sleep 300"});
  const auto jk = c.wait_state(k, {job_state::running});
  CHECK(jk.nprocs == 2);
  const auto per_start = per_node(jk.procs, 3);
  std::vector<std::size_t> odd_nodes;  // the blocks of odd's two nodes
  for (std::size_t b = 0; b < per_start.size(); ++b) {
    CHECK((per_start[b] == 0 || per_start[b] == 2));
    if (per_start[b] != 0 || per_rigid[b] != 0) odd_nodes.push_back(b);
  }
  REQUIRE(odd_nodes.size() == 2);
  std::string text;
  for (int i = 0; i < 100 && text.find('\n') == std::string::npos; ++i) {
    if (i > 0) std::this_thread::sleep_for(100ms);
    text = test::slurp(out);
  }
  CHECK(text == "cpt=2 ntasks=1 nprocs=2\n");
  // The rigid job ends: the map it is sent holds one rank on each of odd's
  // nodes, never a third processor of either.
  c.cmd(test::bin().fkill, {std::to_string(r)});
  std::vector<std::string> maps;
  std::string seen;
  for (int i = 0; i < 300 && maps.empty(); ++i) {
    if (i > 0) std::this_thread::sleep_for(100ms);
    client::connection conn(c.socket());
    const auto events = conn.call(protocol::job_history{conn.next_id(), k})["events"];
    seen = events.dump();
    for (const auto& e : events) {
      if (e.value("reason", "").starts_with("resize to ")) maps.push_back(e.value("new_procs", ""));
    }
  }
  INFO("history: " << seen);
  REQUIRE(maps.size() == 1);
  std::vector<std::size_t> want(per_start.size(), 0);
  for (const std::size_t b : odd_nodes) want[b] = 2;
  CHECK(per_node(maps[0], 3) == want);
  c.cmd(test::bin().fkill, {std::to_string(a), std::to_string(k)});
  c.wait_idle();
}

// Issue 30: an adaptive job's -N, --ntasks-per-node, --exclusive and --mem
// are bounds on where its ranks go, from fsub through a real aqsd.
TEST_CASE("adaptive jobs: -N, --ntasks-per-node, --exclusive and --mem bound where they start, and what cannot fit is refused") {
  test::test_database db;
  test::cluster::options o;
  o.db = db.conninfo();
  o.nodes = 4;
  o.procs_per_node = 3;
  o.agent_args = {"--memory", "1G"};
  test::cluster c(o);
  c.wait_nodes_up(4);
  const auto spread = [](const protocol::job_info& j) {
    std::vector<std::size_t> used;
    for (const std::size_t n : per_node(j.procs, 3)) {
      if (n != 0) used.push_back(n);
    }
    return used;
  };
  // At most one rank a node: 4 of its 12, one on each node.
  const std::int64_t a = c.submit({"--adaptive", "--min", "1", "--max", "12", "--ntasks-per-node=1", "--wrap", "sleep 300"});
  const auto ja = c.wait_state(a, {job_state::running});
  CHECK(ja.nprocs == 4);
  CHECK(spread(ja) == std::vector<std::size_t>{1, 1, 1, 1});
  c.cmd(test::bin().fkill, {std::to_string(a)});
  c.wait_idle();
  // -N 3 with --max 3: one rank on each of 3 nodes, not 3 on one node.
  const std::int64_t n3 = c.submit({"--adaptive", "--min", "3", "--max", "3", "-N", "3", "--wrap", "sleep 300"});
  CHECK(spread(c.wait_state(n3, {job_state::running})) == std::vector<std::size_t>{1, 1, 1});
  c.cmd(test::bin().fkill, {std::to_string(n3)});
  c.wait_idle();
  // --exclusive up to 8: whole nodes of 3 (6), never a part of one; a
  // rigid job of 1 goes to another node.
  const std::int64_t x = c.submit({"--adaptive", "--min", "1", "--max", "8", "--exclusive", "--wrap", "sleep 300"});
  const auto jx = c.wait_state(x, {job_state::running});
  CHECK(jx.nprocs == 6);
  CHECK(spread(jx) == std::vector<std::size_t>{3, 3});
  const std::int64_t r = c.submit({"-n", "1", "--wrap", "sleep 300"});
  const auto jr = c.wait_state(r, {job_state::running});
  const auto on_x = per_node(jx.procs, 3), on_r = per_node(jr.procs, 3);
  for (std::size_t i = 0; i < on_x.size(); ++i) CHECK((on_x[i] == 0 || on_r[i] == 0));
  c.cmd(test::bin().fkill, {std::to_string(x), std::to_string(r)});
  c.wait_idle();
  // --mem 600M a node of 1G: a second such job shares no node with the first.
  const std::int64_t m1 = c.submit({"--adaptive", "--min", "1", "--max", "6", "--ntasks-per-node=3", "--mem=600M",
                                    "--wrap", "sleep 300"});
  const auto jm1 = c.wait_state(m1, {job_state::running});
  CHECK(jm1.nprocs == 6);
  const std::int64_t m2 = c.submit({"--adaptive", "--min", "1", "--max", "6", "--mem=600M", "--wrap", "sleep 300"});
  const auto jm2 = c.wait_state(m2, {job_state::running});
  const auto on1 = per_node(jm1.procs, 3), on2 = per_node(jm2.procs, 3);
  for (std::size_t i = 0; i < on1.size(); ++i) CHECK((on1[i] == 0 || on2[i] == 0));
  c.cmd(test::bin().fkill, {std::to_string(m1), std::to_string(m2)});
  c.wait_idle();
  // Bounds no node could ever meet are refused at submission, in one line.
  auto refused = c.cmd(test::bin().fsub, {"--adaptive", "--max", "2", "--exclusive", "--wrap", "true"});
  CHECK(refused.status != 0);
  CHECK(refused.err.find("holds whole nodes; the smallest has 3 processors, more than its maximum of 2") !=
        std::string::npos);
  refused = c.cmd(test::bin().fsub, {"--adaptive", "--max", "4", "--mem=2G", "--wrap", "true"});
  CHECK(refused.status != 0);
  CHECK(refused.err.find("MB of memory on a node") != std::string::npos);
  refused = c.cmd(test::bin().fsub, {"--adaptive", "--min", "1", "--max", "4", "-N", "2", "--wrap", "true"});
  CHECK(refused.status != 0);
  CHECK(refused.err.find("-N 2 needs a rank on each node") != std::string::npos);
}

TEST_CASE("aqsd refuses to start on a bad aqs.conf, naming the file and the line") {
  test::temp_dir conf_dir("aqs-partitions");
  const fs::path conf = conf_dir.path() / "aqs.conf";
  std::ofstream(conf) << "PartitionName=debug Nodes=node[0-1]\nPartitionName=batch Nodes=node[2-\n";
  test::temp_dir state("aqs-partitions-state");
  const auto r = test::run({test::bin().aqsd, "--foreground", "--state-dir", state.path().string(), "--config", conf.string()});
  CHECK(r.status == 2);
  CHECK(r.err == "aqsd: " + conf.string() + ":2: Nodes: bad host list 'node[2-': '[' without ']'\n");
  const auto missing =
      test::run({test::bin().aqsd, "--foreground", "--state-dir", state.path().string(), "--config", "/nonexistent/aqs.conf"});
  CHECK(missing.status == 2);
  CHECK(missing.err.find("aqsd: /nonexistent/aqs.conf: cannot read") == 0);
}

TEST_CASE("without aqs.conf every node is in one partition and -p is taken with a warning") {
  test::test_database db;
  test::cluster::options o;
  o.db = db.conninfo();
  o.nodes = 2;
  test::cluster c(o);
  const slurm s{c, slurm_bin(c)};
  const auto r = s.run("sbatch", {"--parsable", "-p", "gpu", "--wrap", "true"});
  CHECK(r.status == 0);
  CHECK(r.err == "sbatch: warning: partition 'gpu' is recorded; this cluster has one partition of all its nodes\n");
  c.wait_state(std::stoll(r.out), {job_state::completed});
  CHECK(s.run("sinfo", {"-h", "-o", "%P %D"}).out == "main* 2\n");
}

TEST_CASE("adaptive jobs: MaxCPUsPerJob bounds their processors whatever their --max, and refuses a --min over it") {
  test::test_database db;
  test::temp_dir conf_dir("aqs-partitions");
  const fs::path conf = conf_dir.path() / "aqs.conf";
  std::ofstream(conf) << "PartitionName=capped Nodes=node[0-3] Default=YES MaxCPUsPerJob=5\n";
  test::cluster::options o;
  o.db = db.conninfo();
  o.nodes = 4;
  o.procs_per_node = 2;
  o.resize_timeout_s = 2;  // these jobs run no AQS runtime: a shrink asked of them times out
  o.aqsd_args = {"--config", conf.string()};
  test::cluster c(o);
  c.wait_nodes_up(4);

  // 8 processors idle: the job asks up to 8 and gets 5.
  const std::int64_t a = c.submit({"--adaptive", "--min", "1", "--max", "8", "--wrap", "sleep 300"});
  CHECK(c.wait_state(a, {job_state::running}).nprocs == 5);
  // A second one gets the 3 left (equipartition asks the first to shrink
  // to 4 for it, which times out); the first is never given more than 5.
  const std::int64_t b = c.submit({"--adaptive", "--min", "1", "--max", "8", "--wrap", "sleep 300"});
  CHECK(c.wait_state(b, {job_state::running}).nprocs == 3);
  for (int i = 0; i < 10; ++i) {
    CHECK(c.job(a)->nprocs <= 5);
    std::this_thread::sleep_for(100ms);
  }
  const auto listed = c.cmd(test::bin().fjobs, {"--json"});
  CHECK(listed.status == 0);
  const auto all = nlohmann::json::parse(listed.out);
  REQUIRE(all.is_array());
  CHECK(all.size() == 2);
  for (const auto& j : all) CHECK(j.value("nprocs", 0) <= 5);
  // -c 2: whole ranks within the limit, 4 processors (2 ranks), not 5.
  c.cmd(test::bin().fkill, {std::to_string(a), std::to_string(b)});
  c.wait_idle();
  const std::int64_t k = c.submit({"--adaptive", "--min", "1", "--max", "4", "-c", "2", "--wrap", "sleep 300"});
  CHECK(c.wait_state(k, {job_state::running}).nprocs == 4);
  // A minimum over the limit could never run: refused at submission, in one line.
  const auto refused = c.cmd(test::bin().fsub, {"--adaptive", "--min", "6", "--max", "8", "--wrap", "true"});
  CHECK(refused.status != 0);
  CHECK(refused.err.find("Requested node configuration is not available: 6 processors asked, MaxCPUsPerJob is 5 "
                         "(partition capped)\n") != std::string::npos);
  CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
  c.cmd(test::bin().fkill, {std::to_string(k)});
  c.wait_idle();
}

namespace {

// The agent index of the node a running job's script runs on ("node2:0-3").
int batch_node_of(const protocol::job_info& j) {
  const auto hosts = hosts_of(j.nodes);
  REQUIRE(!hosts.empty());
  return std::stoi(hosts.begin()->substr(4));
}

}  // namespace

TEST_CASE("--signal survives its agent: killed -9 and restarted before the warning, the job is still warned once") {
  test::test_database db;
  test::cluster c(test::nodes_of(db, 2, 2));
  const slurm s{c, slurm_bin(c)};
  c.wait_nodes_up(2);
  // A 20 s limit, warned 10 s before; the agent is restarted long before that.
  const fs::path out = c.workdir() / "adopted-signal.out";
  const std::int64_t id =
      s.submit({"-t", "0:20", "--signal=B:USR1@10", "-o", out.string(), "--wrap",
                "trap 'echo warned' USR1; echo ready; for i in $(seq 40); do sleep 1; done"});
  const auto j = c.wait_state(id, {job_state::running});
  for (int i = 0; i < 300 && test::slurp(out).empty(); ++i) std::this_thread::sleep_for(50ms);  // the trap is set
  REQUIRE(test::slurp(out) == "ready\n");
  const int node = batch_node_of(j);
  c.kill_agent(node, SIGKILL);
  c.start_agent(node);
  CHECK(c.wait_state(id, {job_state::timeout, job_state::failed, job_state::completed}, 90s).state == job_state::timeout);
  const std::string text = test::slurp(out);
  CAPTURE(text);
  CHECK(text.starts_with("ready\nwarned\n"));
  CHECK(text.find("warned", text.find("warned") + 1) == std::string::npos);  // once
}

TEST_CASE("--signal without B: reaches the job's ranks on all its nodes, once each") {
  if (!test::netns_available()) return;
  test::test_database db;
  test::cluster::options o = test::nodes_of(db, 2, 2);
  o.netns = true;
  o.heartbeat_timeout_s = 5;
  test::cluster c(o);
  const slurm s{c, slurm_bin(c)};
  c.wait_nodes_up(2);
  // 4 ranks over the 2 hosts (mpirun starts the second host's daemon through
  // aqs-rsh), each trapping WINCH (which mpirun does not forward itself):
  // warned 40 s before a 60 s limit, each rank writes its own file.
  const fs::path work = c.workdir();
  const fs::path rank = work / "rank.sh";
  std::ofstream(rank) << "#!/bin/sh\n"
                         "r=$OMPI_COMM_WORLD_RANK\n"
                         "trap 'echo warned >> " + (work / "warned-").string() + "$r' WINCH\n"
                         "echo ready > " + (work / "ready-").string() + "$r\n"
                         "while :; do sleep 0.2; done\n";
  fs::permissions(rank, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read | fs::perms::group_exec |
                            fs::perms::others_exec);
  const std::int64_t id = s.submit({"-n", "4", "-t", "1:00", "--signal=WINCH@40", "-o", (work / "mpi.out").string(),
                                    "--wrap", "mpirun " + rank.string()});
  const auto j = c.wait_state(id, {job_state::running});
  CHECK(hosts_of(j.nodes).size() == 2);
  auto all_there = [&](const std::string& prefix, const std::string& line) {
    for (int r = 0; r < 4; ++r) {
      if (test::slurp(work / (prefix + std::to_string(r))) != line) return false;
    }
    return true;
  };
  for (int i = 0; i < 1200 && !all_there("warned-", "warned\n"); ++i) std::this_thread::sleep_for(50ms);
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    CHECK(test::slurp(work / ("ready-" + std::to_string(r))) == "ready\n");
    CHECK(test::slurp(work / ("warned-" + std::to_string(r))) == "warned\n");  // on both hosts, once
  }
  CHECK(s.run("scancel", {std::to_string(id)}).status == 0);
  c.wait_idle();
}
