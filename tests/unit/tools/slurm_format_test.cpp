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
