// scontrol: its command line, fctl's requests it makes, and `show` in
// Slurm's key=value layout.
#include <doctest/doctest.h>

#include <cstdlib>
#include <ctime>
#include <map>
#include <regex>

#include "slurm/scontrol.hpp"
#include "slurm/slurm_commands.hpp"

using namespace aqs;
using core::job_state;

namespace {

std::vector<std::string> words(std::initializer_list<const char*> w) { return {w.begin(), w.end()}; }

slurm::scontrol_command_line parse(std::initializer_list<const char*> w) {
  return slurm::parse_scontrol_command_line(words(w));
}

std::string error_of(std::initializer_list<const char*> w) {
  try {
    (void)parse(w);
  } catch (const slurm::command_error& e) {
    return e.what();
  } catch (const slurm::usage_error& e) {
    return std::string("usage: ") + e.what();
  }
  return "";
}

struct utc_zone {
  utc_zone() {
    ::setenv("TZ", "UTC", 1);
    ::tzset();
  }
};
const utc_zone g_utc;

// 2026-03-01T10:00:35Z.
constexpr std::time_t k_now = 1772359235;

}  // namespace

TEST_CASE("scontrol's job verbs take ids as comma lists and words, and become fctl's requests") {
  auto c = parse({"hold", "12,13", "14"});
  CHECK(c.verb == "hold");
  CHECK(c.job_ids == std::vector<std::int64_t>{12, 13, 14});
  const auto r = slurm::scontrol_control(c);
  CHECK(r.action == "hold");
  CHECK(r.job_ids == c.job_ids);
  CHECK_FALSE(r.time_limit_s);
  for (const auto& [word, verb] : std::vector<std::pair<const char*, const char*>>{
           {"release", "release"}, {"requeue", "requeue"}, {"suspend", "suspend"}, {"resume", "resume"},
           {"RESUME", "resume"}}) {
    CAPTURE(word);
    const auto x = slurm::parse_scontrol_command_line(words({word, "7"}));
    CHECK(x.verb == verb);
    CHECK(x.job_ids == std::vector<std::int64_t>{7});
  }
  CHECK(parse({"uhold", "7"}).verb == "hold");
  CHECK(error_of({"hold"}) == "hold needs a job id (scontrol hold JOBID[,JOBID...])");
  CHECK(error_of({"hold", "x"}) == "Invalid job id specified: x");
  CHECK(error_of({"hold", "12_3"}).starts_with("Invalid job id specified: 12_3 (AQS's scontrol takes"));
}

TEST_CASE("scontrol update maps TimeLimit and NumCPUs; anything else is refused naming what maps") {
  auto c = parse({"update", "JobId=5,6", "TimeLimit=1:30:00"});
  CHECK(c.verb == "update");
  CHECK(c.job_ids == std::vector<std::int64_t>{5, 6});
  CHECK(c.time_limit_s == 5400);
  auto r = slurm::scontrol_control(c);
  CHECK(r.action == "update");
  CHECK(r.time_limit_s == 5400);
  CHECK_FALSE(r.min_pe);
  c = parse({"update", "jobid=5", "timelimit=UNLIMITED", "NumCPUs=2-8"});
  CHECK(c.time_limit_s == 0);
  CHECK(c.min_pe == 2);
  CHECK(c.max_pe == 8);
  CHECK(parse({"update", "JobId=5", "NumCPUs=4"}).max_pe == 4);
  CHECK(error_of({"update", "JobId=5", "Partition=batch"}) ==
        "Update of Partition is not supported by AQS's scontrol (JobId= with TimeLimit= or NumCPUs=N[-M])");
  CHECK(error_of({"update", "JobId=5", "MinNodes=2"}).starts_with("Update of MinNodes is not supported"));
  CHECK(error_of({"update", "TimeLimit=10"}) == "update needs JobId=ID (scontrol update JobId=ID TimeLimit=...)");
  CHECK(error_of({"update", "JobId=5"}) == "update needs TimeLimit= or NumCPUs= (nothing to change)");
  CHECK(error_of({"update", "JobId=5", "TimeLimit=+10"}).starts_with("TimeLimit=+10: AQS does not add"));
  CHECK(error_of({"update", "JobId=5", "TimeLimit=soon"}).starts_with("TimeLimit: "));
  CHECK(error_of({"update", "JobId=5", "NumCPUs=0"}) == "NumCPUs=0: expected a count N or a range N-M");
}

TEST_CASE("scontrol show takes job, partition, node, reservation, config, hostnames and hostlist; other commands are one-line errors") {
  auto c = parse({"-o", "show", "job", "42"});
  CHECK(c.oneliner);
  CHECK(c.entity == "job");
  CHECK(c.job_ids == std::vector<std::int64_t>{42});
  CHECK(parse({"show", "jobs"}).job_ids.empty());
  CHECK(parse({"show", "partition", "debug"}).name == "debug");
  CHECK(parse({"show", "Node"}).entity == "node");
  CHECK(parse({"show", "hostnames", "n[1-3]"}).name == "n[1-3]");
  CHECK(parse({"--help"}).help);
  CHECK(parse({"-V"}).version);
  CHECK(parse({"show", "config"}).entity == "config");
  CHECK(parse({"show", "Configuration"}).entity == "config");
  CHECK(error_of({"show", "licenses"}) ==
        "show licenses is not supported by AQS's scontrol (job, partition, node, reservation, config, hostnames, hostlist)");
  CHECK(error_of({"reconfigure"}).starts_with("'reconfigure' is not supported by AQS's scontrol (hold, "));
  CHECK(error_of({"show"}) == "show needs an entity (job, partition, node, reservation, config, hostnames, hostlist)");
  CHECK(error_of({}).starts_with("no command given"));
  CHECK(error_of({"--bogus", "show", "job"}).starts_with("usage: unrecognized option '--bogus'"));
}

TEST_CASE("scontrol show job prints Slurm's key=value record, with the fields tools read") {
  protocol::job_info i;
  i.id = 42;
  i.name = "train";
  i.user = "alice";
  i.state = job_state::running;
  i.min_pe = i.max_pe = 8;
  i.nprocs = 8;
  i.nodes = "node1:0-3,node2:0-3";
  i.submit_time = "2026-03-01T10:00:00.000Z";
  i.start_time = "2026-03-01T10:00:05.000Z";
  i.walltime_s = 3600;
  i.partition = "debug";
  const auto v = slurm::make_view(i, [](const std::string&) -> std::optional<std::int64_t> { return 1001; });
  const std::string text = slurm::scontrol_show_job(v, k_now, false);
  CHECK(text ==
        "JobId=42 JobName=train\n"
        "   UserId=alice(1001)\n"
        "   JobState=RUNNING Reason=None Dependency=(null)\n"
        "   ExitCode=0:0\n"
        "   RunTime=00:00:30 TimeLimit=01:00:00 TimeMin=N/A\n"
        "   SubmitTime=2026-03-01T10:00:00\n"
        "   StartTime=2026-03-01T10:00:05 EndTime=2026-03-01T11:00:05 Deadline=N/A\n"
        "   Partition=debug\n"
        "   NodeList=node[1-2]\n"
        "   BatchHost=node1\n"
        "   NumNodes=2 NumCPUs=8 NumTasks=8 CPUs/Task=1\n"
        "\n");
  // What submitit and others do with it: key=value pairs anywhere.
  const std::string one = slurm::scontrol_show_job(v, k_now, true);
  CHECK(one.find('\n') == one.size() - 1);
  std::map<std::string, std::string> kv;
  const std::regex pair("([A-Za-z/:_]+)=(\\S*)");
  for (auto it = std::sregex_iterator(one.begin(), one.end(), pair); it != std::sregex_iterator(); ++it) {
    kv[(*it)[1]] = (*it)[2];
  }
  CHECK(kv["JobId"] == "42");
  CHECK(kv["JobState"] == "RUNNING");
  CHECK(kv["NodeList"] == "node[1-2]");
  CHECK(kv["NumCPUs"] == "8");

  // Pending, adaptive, no limit: Unknown times, (null) nodes, its range.
  i.state = job_state::pending;
  i.start_time.reset();
  i.nodes.clear();
  i.nprocs = 0;
  i.walltime_s.reset();
  i.adaptive = true;
  i.min_pe = 2;
  i.reason = "Resources";
  i.partition.reset();
  const std::string p = slurm::scontrol_show_job(slurm::make_view(i, [](const std::string&) { return std::nullopt; }), k_now, false);
  CHECK(p.find("JobState=PENDING Reason=Resources") != std::string::npos);
  CHECK(p.find("UserId=alice(4294967294)") != std::string::npos);
  CHECK(p.find("TimeLimit=UNLIMITED") != std::string::npos);
  CHECK(p.find("StartTime=Unknown EndTime=Unknown") != std::string::npos);
  CHECK(p.find("Partition=main\n") != std::string::npos);
  CHECK(p.find("NodeList=(null)\n") != std::string::npos);
  CHECK(p.find("NumNodes=1 NumCPUs=2") != std::string::npos);
  CHECK(p.find("Adaptive=YES MinCPUs=2 MaxCPUs=8") != std::string::npos);
}

TEST_CASE("scontrol show partition and node, from the nodes aqsd lists") {
  protocol::list_nodes_reply r;
  auto node = [](std::string name, std::int64_t alloc, std::vector<std::string> parts) {
    protocol::listed_node n;
    n.name = std::move(name);
    n.nprocs = 4;
    n.alloc = alloc;
    n.memory_mb = 16000;
    n.connected = true;
    n.partitions = std::move(parts);
    return n;
  };
  r.nodes = {node("node1", 0, {"debug"}), node("node0", 4, {"debug", "batch"})};
  SUBCASE("implicit") {
    for (auto& n : r.nodes) n.partitions.clear();
    const auto text = slurm::scontrol_show_partitions(r, std::nullopt, false);
    REQUIRE(text);
    CHECK(*text ==
          "PartitionName=main\n"
          "   Default=YES\n"
          "   DefaultTime=NONE\n"
          "   MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 MaxCPUsPerJob=UNLIMITED\n"
          "   Nodes=node[0-1]\n"
          "   State=UP TotalCPUs=8 TotalNodes=2\n"
          "\n");
    CHECK_FALSE(slurm::scontrol_show_partitions(r, "debug", false));
    const auto nodes = slurm::scontrol_show_nodes(r, "node0", false);
    REQUIRE(nodes);
    CHECK(*nodes ==
          "NodeName=node0\n"
          "   CPUAlloc=4 CPUEfctv=4 CPUTot=4 CPULoad=N/A\n"
          "   Gres=(null)\n"
          "   NodeAddr=node0 NodeHostName=node0\n"
          "   RealMemory=16000 AllocMem=0 FreeMem=N/A\n"
          "   State=ALLOCATED\n"
          "   Partitions=main\n"
          "\n");
  }
  SUBCASE("configured") {
    protocol::partition_info debug;
    debug.name = "debug";
    debug.is_default = true;
    debug.nodes = "node[0-1]";
    debug.max_time_s = 1800;
    debug.max_nodes = 1;
    protocol::partition_info batch;
    batch.name = "batch";
    batch.state = "DRAIN";
    batch.nodes = "ALL";
    batch.default_time_s = 600;
    r.partitions = {debug, batch};
    const auto one = slurm::scontrol_show_partitions(r, "batch", true);
    REQUIRE(one);
    CHECK(*one ==
          "PartitionName=batch Default=NO DefaultTime=00:10:00 MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 "
          "MaxCPUsPerJob=UNLIMITED Nodes=node0 State=DRAIN TotalCPUs=4 TotalNodes=1\n");
    const auto all = slurm::scontrol_show_partitions(r, std::nullopt, false);
    REQUIRE(all);
    CHECK(all->find("PartitionName=debug\n   Default=YES\n   DefaultTime=NONE\n   MaxNodes=1 MaxTime=00:30:00") == 0);
    CHECK(all->find("PartitionName=batch") != std::string::npos);
    CHECK_FALSE(slurm::scontrol_show_partitions(r, "gpu", false));
    const auto nodes = slurm::scontrol_show_nodes(r, std::nullopt, true);
    REQUIRE(nodes);
    CHECK(nodes->find("NodeName=node0 ") == 0);  // Slurm's host order
    CHECK(nodes->find("State=IDLE Partitions=debug\n") != std::string::npos);
    CHECK(nodes->find("State=ALLOCATED Partitions=debug,batch\n") != std::string::npos);
    CHECK_FALSE(slurm::scontrol_show_nodes(r, "node9", false));
  }
}

TEST_CASE("scontrol show config prints Slurm's Key = Value lines with the keys engines read") {
  protocol::list_nodes_reply r;
  protocol::listed_node n;
  n.name = "node1";
  n.nprocs = 4;
  r.nodes = {n, n};
  const std::string text = slurm::scontrol_show_config(r, 1'000'000'000, "/run/aqsd.sock");
  CHECK(std::regex_search(text, std::regex("^Configuration data as of 20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\n")));
  // Keys padded to 23 columns, then " = ", as Slurm's; what Snakemake's and
  // other engines' regular expressions take.
  CHECK(text.find("\nMinJobAge               = 300 sec\n") != std::string::npos);
  CHECK(text.find("\nMessageTimeout          = 60 sec\n") != std::string::npos);
  CHECK(text.find("\nSchedulerParameters     = (null)\n") != std::string::npos);
  CHECK(text.find("\nSlurmctldHost[0]        = /run/aqsd.sock\n") != std::string::npos);
  CHECK(text.find("\nCPUTotal                = 8\n") != std::string::npos);
  CHECK(std::regex_search(text, std::regex("\nMinJobAge\\s*=\\s*(\\d+)\\s*sec")));
  std::size_t lines = 0;
  for (std::size_t at = text.find('\n'); at + 1 < text.size(); at = text.find('\n', at + 1)) {
    const std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
    CHECK(std::regex_match(line, std::regex("[A-Za-z_\\[\\]0-9]+ *= .+")));
    ++lines;
  }
  CHECK(lines > 20);
}
