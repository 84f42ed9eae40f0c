// slurm_format: Slurm's output layouts, checked against what Slurm prints.
#include <doctest/doctest.h>

#include <cstdlib>
#include <ctime>

#include "slurm/slurm_format.hpp"

using namespace aqs;
using core::job_state;

namespace {

// A job as aqsd lists it; times in UTC ISO form.
protocol::job_info job(std::int64_t id, job_state st, std::string nodes = "", std::int64_t nprocs = 0) {
  protocol::job_info j;
  j.id = id;
  j.name = "job" + std::to_string(id);
  j.user = "alice";
  j.state = st;
  j.min_pe = j.max_pe = 2;
  j.nodes = std::move(nodes);
  j.nprocs = nprocs;
  j.submit_time = "2026-03-01T10:00:00.000Z";
  if (st != job_state::pending) j.start_time = "2026-03-01T10:00:05.000Z";
  if (core::is_final(st)) j.end_time = "2026-03-01T10:01:10.000Z";
  return j;
}

slurm::job_view view(const protocol::job_info& j) {
  return slurm::make_view(j, [](const std::string& u) -> std::optional<std::int64_t> {
    if (u == "alice") return 1001;
    return std::nullopt;
  });
}

// 2026-03-01T10:00:35Z: 30 s after the sample jobs started.
constexpr std::time_t k_now = 1772359235;

struct utc_zone {
  utc_zone() {
    ::setenv("TZ", "UTC", 1);
    ::tzset();
  }
};
const utc_zone g_utc;

}  // namespace

TEST_CASE("job states are Slurm's words and codes, RESIZING shows as RUNNING") {
  CHECK(slurm::slurm_state(job_state::pending).compact == "PD");
  CHECK(slurm::slurm_state(job_state::running).name == "RUNNING");
  CHECK(slurm::slurm_state(job_state::resizing).compact == "R");
  CHECK(slurm::slurm_state(job_state::completed).compact == "CD");
  CHECK(slurm::slurm_state(job_state::cancelled).compact == "CA");
  CHECK(slurm::slurm_state(job_state::timeout).compact == "TO");
  CHECK(slurm::slurm_state(job_state::node_fail).name == "NODE_FAIL");
  CHECK(slurm::slurm_state(job_state::node_fail).compact == "NF");
  CHECK(slurm::slurm_state(job_state::failed).compact == "F");
}

TEST_CASE("state words select AQS states in any case and ALL selects every state; unknown words are refused") {
  CHECK(*slurm::parse_state_word("pd") == std::vector<job_state>{job_state::pending});
  CHECK(*slurm::parse_state_word("R") == std::vector<job_state>{job_state::running, job_state::resizing});
  CHECK(slurm::parse_state_word("all")->size() == core::k_all_job_states.size());
  CHECK(slurm::parse_state_word("CG")->empty());
  CHECK_FALSE(slurm::parse_state_word("RUNNNING"));
}

TEST_CASE("durations and limits print as squeue and sacct print them") {
  CHECK(slurm::squeue_secs(0) == "0:00");
  CHECK(slurm::squeue_secs(65) == "1:05");
  CHECK(slurm::squeue_secs(3600) == "1:00:00");
  CHECK(slurm::squeue_secs(90061) == "1-01:01:01");
  CHECK(slurm::squeue_secs(-1) == "INVALID");
  CHECK(slurm::sacct_secs(5) == "00:00:05");
  CHECK(slurm::sacct_secs(90061) == "1-01:01:01");
  CHECK(slurm::squeue_limit(std::nullopt) == "UNLIMITED");
  CHECK(slurm::squeue_limit(600) == "10:00");
  CHECK(slurm::sacct_limit(600) == "00:10:00");
  CHECK(slurm::slurm_time(std::nullopt) == "Unknown");
  CHECK(slurm::slurm_time(std::time_t{1772359235}) == "2026-03-01T10:00:35");
  CHECK(slurm::slurm_time(std::time_t{1772359235}, "%H:%M") == "10:00");
}

TEST_CASE("host lists compress into Slurm's bracket ranges keeping zero padding") {
  CHECK(slurm::compress_hostlist({"node1", "node2", "node3", "node7"}) == "node[1-3,7]");
  CHECK(slurm::compress_hostlist({"node1"}) == "node1");
  CHECK(slurm::compress_hostlist({"n01", "n02", "n03"}) == "n[01-03]");
  CHECK(slurm::compress_hostlist({"a", "b"}) == "a,b");
  CHECK(slurm::compress_hostlist({"node1", "gpu1", "gpu2"}) == "gpu[1-2],node1");
  CHECK(slurm::compress_hostlist({"node10", "node9", "node2"}) == "node[2,9-10]");
  CHECK(slurm::compress_hostlist({}).empty());
  CHECK(slurm::job_hosts("node2:0-3,node3:0-1,5") == std::vector<std::string>{"node2", "node3"});
  CHECK(slurm::procs_on_host("node2:0-3,node3:0-1,5", "node3") == 3);
  CHECK(slurm::procs_on_host("node2:0-3,node3:0-1,5", "node2") == 4);
  CHECK(slurm::procs_on_host("node2:0-3", "node9") == 0);
}

TEST_CASE("squeue's default layout is Slurm's, with right-justified columns and the reason of a pending job") {
  const std::vector<slurm::job_view> jobs = {view(job(7, job_state::running, "node1:0-1,node2:0-1", 4)),
                                             view(job(8, job_state::pending))};
  const std::string out = slurm::render_squeue(slurm::default_squeue_format(), jobs, true, k_now);
  CHECK(out ==
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
        "                 7      main     job7    alice  R       0:30      2 node[1-2]\n"
        "                 8      main     job8    alice PD       0:00      1 (None)\n");
  CHECK(slurm::render_squeue(slurm::default_squeue_format(), {}, true, k_now) ==
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n");
}

TEST_CASE("squeue -o fields: widths, '.' for the right side, literal text kept, unknown letters reported") {
  const std::vector<slurm::job_view> jobs = {view(job(12, job_state::running, "node1:0-3", 4))};
  CHECK(slurm::render_squeue(slurm::parse_squeue_format("%i %t"), jobs, false, k_now) == "12 R\n");
  CHECK(slurm::render_squeue(slurm::parse_squeue_format("%i %T"), jobs, true, k_now) == "JOBID STATE\n12 RUNNING\n");
  CHECK(slurm::render_squeue(slurm::parse_squeue_format("id=%.5i|%3j|%3u|%C"), jobs, false, k_now) ==
        "id=   12|job|ali|4\n");
  CHECK(slurm::render_squeue(slurm::parse_squeue_format("%A %u %U %D %N %P %l %M %S %V"), jobs, false, k_now) ==
        "12 alice 1001 1 node1 main UNLIMITED 0:30 2026-03-01T10:00:05 2026-03-01T10:00:00\n");
  CHECK(slurm::render_squeue(slurm::parse_squeue_format("%F %K %a %r %R"), jobs, false, k_now) ==
        "12 N/A (null) None node1\n");
  const auto bad = slurm::parse_squeue_format("%i %Y");
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0] == "Invalid job format specification: Y");
  CHECK(slurm::render_squeue(bad, jobs, false, k_now) == "12 %Y\n");
}

TEST_CASE("squeue -O long names match in any case, with 20 columns by default") {
  const std::vector<slurm::job_view> jobs = {view(job(3, job_state::completed, "node1:0"))};
  CHECK(slurm::render_squeue(slurm::parse_squeue_long_format("JobID:.4 ,State:.10,name"), jobs, true, k_now) ==
        "JOBI      STATENAME                \n   3  COMPLETEDjob3                \n");
}

TEST_CASE("sacct's JobID of an array task is ARRAY_TASK and its JobIDRaw the task's own id, as submitit reads them") {
  auto task = job(8, job_state::completed);
  task.array_job_id = 7;
  task.array_task_id = 1;
  CHECK(slurm::render_sacct(slurm::parse_sacct_fields("JobID,JobIDRaw"), {view(task)}, false,
                            slurm::sacct_style::parsable2, k_now) == "7_1|8\n");
}

TEST_CASE("sacct prints Slurm's columns, parsable forms, CANCELLED by UID and ExitCode N:S") {
  auto cancelled = view(job(5, job_state::cancelled));
  cancelled.cancelled_by = 0;
  cancelled.signal = 15;
  auto failed = job(6, job_state::failed, "node1:0-1");
  failed.exit_code = 3;
  const std::vector<slurm::job_view> jobs = {cancelled, view(failed)};
  const auto fields = slurm::parse_sacct_fields("JobIDRaw,State,ExitCode");
  CHECK(slurm::render_sacct(fields, jobs, false, slurm::sacct_style::parsable2, k_now) ==
        "5|CANCELLED by 0|0:15\n6|FAILED|3:0\n");
  CHECK(slurm::render_sacct(fields, jobs, true, slurm::sacct_style::parsable, k_now) ==
        "JobIDRaw|State|ExitCode|\n5|CANCELLED by 0|0:15|\n6|FAILED|3:0|\n");
  const std::string table = slurm::render_sacct(slurm::default_sacct_fields(), {view(failed)}, true,
                                                slurm::sacct_style::table, k_now);
  CHECK(table ==
        "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode \n"
        "------------ ---------- ---------- ---------- ---------- ---------- -------- \n"
        "6                  job6       main                     2     FAILED      3:0 \n");
  CHECK(slurm::render_sacct(slurm::parse_sacct_fields("jobname%3,elapsed,nnodes,nodelist,start,end"),
                            {view(failed)}, false, slurm::sacct_style::parsable2, k_now) ==
        "job6|00:01:05|1|node1|2026-03-01T10:00:05|2026-03-01T10:01:10\n");
  CHECK(slurm::render_sacct(slurm::parse_sacct_fields("JobName%3"), {view(failed)}, false, slurm::sacct_style::table,
                            k_now) == "jo+ \n");
  auto killed = failed;
  killed.exit_code = 143;
  auto killed_view = view(killed);
  killed_view.signal = 15;
  CHECK(slurm::sacct_exit_code(killed_view) == "0:15");
  CHECK_THROWS_WITH(slurm::parse_sacct_fields("JobID,Bogus"), "Invalid field requested: \"Bogus\"");
}

TEST_CASE("sinfo groups nodes by state in one default partition, or one line per node with -N") {
  std::vector<slurm::node_view> nodes(3);
  for (int i = 0; i < 3; ++i) {
    nodes[static_cast<std::size_t>(i)].info.name = "node" + std::to_string(i + 1);
    nodes[static_cast<std::size_t>(i)].info.nprocs = 4;
  }
  nodes[1].allocated = 2;
  CHECK(slurm::sinfo_state(nodes[0]) == "idle");
  CHECK(slurm::sinfo_state(nodes[1]) == "mix");
  const std::string out =
      slurm::render_sinfo(slurm::default_sinfo_format(false), nodes, true, slurm::sinfo_grouping::by_state);
  CHECK(out ==
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
        "main*        up   infinite      2   idle node[1,3]\n"
        "main*        up   infinite      1    mix node2\n");
  CHECK(slurm::render_sinfo(slurm::parse_sinfo_format("%P"), nodes, true, slurm::sinfo_grouping::by_state) ==
        "PARTITION\nmain*\nmain*\n");
  const std::string per_node =
      slurm::render_sinfo(slurm::default_sinfo_format(true), nodes, false, slurm::sinfo_grouping::per_node);
  CHECK(per_node == "node1         1     main* idle  \nnode2         1     main* mix   \nnode3         1     main* idle  \n");
  CHECK(slurm::render_sinfo(slurm::parse_sinfo_format("%D %C"), nodes, false, slurm::sinfo_grouping::all) ==
        "3 2/10/0/12\n");
}

TEST_CASE("sinfo -p keeps the named partitions' lines; an unknown name leaves the header alone") {
  std::vector<slurm::node_view> nodes(4);
  const char* parts[] = {"debug", "debug", "batch", "gpu"};
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].info.name = "node" + std::to_string(i);
    nodes[i].info.nprocs = 4;
    nodes[i].partition.name = parts[i];
    nodes[i].partition.is_default = i < 2;
  }
  auto some = nodes;
  slurm::keep_partitions(some, {"gpu", "batch"});
  CHECK(slurm::render_sinfo(slurm::default_sinfo_format(false), some, true, slurm::sinfo_grouping::by_state) ==
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
        "batch        up   infinite      1   idle node2\n"
        "gpu          up   infinite      1   idle node3\n");
  auto none = nodes;
  slurm::keep_partitions(none, {"nosuch"});
  CHECK(none.empty());
  CHECK(slurm::render_sinfo(slurm::default_sinfo_format(false), none, true, slurm::sinfo_grouping::by_state) ==
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n");
}

TEST_CASE("--json documents carry Slurm's top-level arrays and field names") {
  const std::vector<slurm::job_view> jobs = {view(job(9, job_state::running, "node1:0-1", 2))};
  const auto q = nlohmann::json::parse(slurm::squeue_json(jobs, k_now));
  REQUIRE(q["jobs"].size() == 1);
  CHECK(q["jobs"][0]["job_id"] == 9);
  CHECK(q["jobs"][0]["job_state"][0] == "RUNNING");
  CHECK(q["jobs"][0]["user_name"] == "alice");
  CHECK(q["jobs"][0]["nodes"] == "node1");
  CHECK(q["jobs"][0]["time_limit"]["infinite"] == true);
  const auto a = nlohmann::json::parse(slurm::sacct_json(jobs, k_now));
  CHECK(a["jobs"][0]["state"]["current"][0] == "RUNNING");
  CHECK(a["jobs"][0]["time"]["elapsed"] == 30);
  std::vector<slurm::node_view> nodes(1);
  nodes[0].info.name = "node1";
  nodes[0].info.nprocs = 4;
  const auto s = nlohmann::json::parse(slurm::sinfo_json(nodes));
  CHECK(s["sinfo"][0]["node"]["state"][0] == "IDLE");
  CHECK(s["sinfo"][0]["partition"]["name"] == "main");
}

TEST_CASE("squeue's and sinfo's -o and -O print exactly what they printed when each had its own parser") {
  // Outputs recorded from the two parsers before they became one; the
  // formats reach the corners: '#', '%' at the end, unknown letters and
  // names, empty fields, suffixes, no width.
  struct golden {
    const char* format;
    bool long_form;  // -O
    const char* squeue;
    const char* squeue_errors;
    const char* sinfo;  // -N with -O, by state with -o
    const char* sinfo_errors;
  };
  const golden cases[] = {
    {"%i %t", false, "JOBID ST\n7 R\n8 PD\n9 F\n", "", "%i STATE\n%i idle\n%i mix\n%i idle\n", "Invalid node format specification: i;"},
    {"x%.5i|%3j|%-3u|%C%", false, "xJOBID|NAM|%-3u|CPUS\nx    7|job|%-3u|4\nx    8|job|%-3u|2\nx    9|job|%-3u|2\n", "Invalid job format specification: -;", "x%.5i|%3j|%-3u|CPUS(A/I/O/T)\nx%.5i|%3j|%-3u|0/4/0/4\nx%.5i|%3j|%-3u|2/2/0/4\nx%.5i|%3j|%-3u|0/4/0/4\n", "Invalid node format specification: i;Invalid node format specification: j;Invalid node format specification: -;"},
    {"%#P %.#P %10P|", false, "%#P %.#P PARTITION |\n%#P %.#P main      |\n%#P %.#P main      |\n%#P %.#P main      |\n", "Invalid job format specification: #;Invalid job format specification: #;", "PARTITION PARTITION PARTITION     |\nmain* main* main*         |\nmain* main* main*         |\nlongpartition longpartition longpartition |\n", ""},
    {"no fields", false, "no fields\nno fields\nno fields\nno fields\n", "", "no fields\nno fields\nno fields\nno fields\n", ""},
    {"%Z %Y %", false, "WORK_DIR %Y \n(null) %Y \n(null) %Y \n(null) %Y \n", "Invalid job format specification: Y;", "%Z %Y \n%Z %Y \n%Z %Y \n%Z %Y \n", "Invalid node format specification: Z;Invalid node format specification: Y;"},
    {"%.10T:%R:%r", false, "     STATE:NODELIST(REASON):REASON\n   RUNNING:node[1-2]:None\n   PENDING:(None):None\n    FAILED:(NonZeroExitCode):NonZeroExitCode\n", "", "     STATE:PARTITION:%r\n      idle:main:%r\n     mixed:main:%r\n      idle:longpartition:%r\n", "Invalid node format specification: r;"},
    {"%%", false, "%%\n%%\n%%\n%%\n", "Invalid job format specification: %;", "%%\n%%\n%%\n%%\n", "Invalid node format specification: %;"},
    {"%5", false, "\n\n\n\n", "", "\n\n\n\n", ""},
    {"%.N %D %c %C %F %A %s %G %m %n %T %t %a %l %R", false, "NODELIST NODES MIN_CPUS CPUS ARRAY_JOB_ID JOBID %s GROUP MIN_MEMORY %n STATE ST ACCOUNT TIME_LIMIT NODELIST(REASON)\nnode[1-2] 2 1 4 7 7 %s (null) 0 %n RUNNING R (null) UNLIMITED node[1-2]\n 1 1 2 8 8 %s (null) 0 %n PENDING PD (null) UNLIMITED (None)\nnode3 1 1 2 9 9 %s (null) 0 %n FAILED F (null) UNLIMITED (NonZeroExitCode)\n", "Invalid job format specification: s;Invalid job format specification: n;", "NODELIST NODES CPUS CPUS(A/I/O/T) NODES(A/I/O/T) NODES(A/I) JOB_SIZE GRES MEMORY HOSTNAMES STATE STATE AVAIL TIMELIMIT PARTITION\nnode1 1 4 0/4/0/4 0/1/0/1 0/1 1-infinite (null) 1000 node1 idle idle up infinite main\nnode2 1 4 2/2/0/4 1/0/0/1 1/0 1-infinite (null) 1000 node2 mixed mix up infinite main\nnode3 1 4 0/4/0/4 0/1/0/1 0/1 1-infinite (null) 1000 node3 idle idle up infinite longpartition\n", ""},
    {"JobID:.4 ,State:.10,name", true, "JOBI      STATENAME                \n   7    RUNNINGjob7                \n   8    PENDINGjob8                \n   9     FAILEDjob9                \n", "", "\n\n\n\n", "Invalid node format specification: JobID;Invalid node format specification: State;Invalid node format specification: name;"},
    {"jobid,,Bogus:5x,State:.3,", true, "JOBID                    xSTA\n7                        xRUN\n8                        xPEN\n9                        xFAI\n", "Invalid job format specification: Bogus;", "\n\n\n\n", "Invalid node format specification: jobid;Invalid node format specification: Bogus;Invalid node format specification: State;"},
    {"Partition:.12|,NodeList:0,Nodes,Bogus", true, "   PARTITION|NODELIST                                        \n        main|node[1-2]                                        \n        main|                                        \n        main|node3                                        \n", "Invalid job format specification: Nodes;Invalid job format specification: Bogus;", "     PARTITION|NODELISTNODES               \n         main*|node1   1                   \n         main*|node2   1                   \n longpartition|node3   1                   \n", "Invalid node format specification: Bogus;"},
    {",", true, "\n\n\n\n", "", "\n\n\n\n", ""},
    {"reasonlist:.30 ,statecompact:3s", true, "              NODELIST(REASON) ST s\n                     node[1-2] R  s\n                        (None) PD s\n             (NonZeroExitCode) F  s\n", "", "STAs\nidls\nmixs\nidls\n", "Invalid node format specification: reasonlist;"},
    {"CPUs:2,CPUsState,NodeAIOT:.20,StateLong,Memory:1,Gres,Size:.4,Available,Time,PartitionName:.15", true, "                                                                                                                                              \n                                                                                                                                              \n                                                                                                                                              \n                                                                                                                                              \n", "Invalid job format specification: CPUs;Invalid job format specification: CPUsState;Invalid job format specification: NodeAIOT;Invalid job format specification: StateLong;Invalid job format specification: Memory;Invalid job format specification: Gres;Invalid job format specification: Size;Invalid job format specification: Available;Invalid job format specification: Time;Invalid job format specification: PartitionName;", "CPCPUS(A/I/O/T)             NODES(A/I/O/T)STATE               MGRES                JOB_AVAIL               TIMELIMIT                PARTITION\n4 0/4/0/4                          0/1/0/1idle                1(null)              1-inup                  infinite                      main\n4 2/2/0/4                          1/0/0/1mixed               1(null)              1-inup                  infinite                      main\n4 0/4/0/4                          0/1/0/1idle                1(null)              1-inup                  infinite             longpartition\n", ""},
  };
  const std::vector<slurm::job_view> jobs = {view(job(7, job_state::running, "node1:0-1,node2:0-1", 4)),
                                             view(job(8, job_state::pending)), view(job(9, job_state::failed, "node3:0"))};
  std::vector<slurm::node_view> nodes(3);
  for (std::size_t i = 0; i < 3; ++i) {
    nodes[i].info.name = "node" + std::to_string(i + 1);
    nodes[i].info.nprocs = 4;
    nodes[i].info.memory_mb = 1000;
  }
  nodes[1].allocated = 2;
  nodes[2].partition.name = "longpartition";
  nodes[2].partition.is_default = false;
  auto joined = [](const std::vector<std::string>& errors) {
    std::string out;
    for (const auto& e : errors) out += e + ";";
    return out;
  };
  for (const auto& c : cases) {
    CAPTURE(c.format);
    const auto q = c.long_form ? slurm::parse_squeue_long_format(c.format) : slurm::parse_squeue_format(c.format);
    const auto s = c.long_form ? slurm::parse_sinfo_long_format(c.format) : slurm::parse_sinfo_format(c.format);
    CHECK(slurm::render_squeue(q, jobs, true, k_now) == c.squeue);
    CHECK(joined(q.errors) == c.squeue_errors);
    CHECK(slurm::render_sinfo(s, nodes, true,
                              c.long_form ? slurm::sinfo_grouping::per_node : slurm::sinfo_grouping::by_state) ==
          c.sinfo);
    CHECK(joined(s.errors) == c.sinfo_errors);
  }
}
