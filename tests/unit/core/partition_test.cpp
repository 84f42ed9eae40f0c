// Unit tests of host lists, the aqs.conf reader, partition limits, and the
// scheduler giving jobs processors only in their partitions.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/hostlist.hpp"
#include "core/partition.hpp"
#include "core/scheduler.hpp"
#include "core_jobs.hpp"

using namespace aqs::core;
using kind = decision::kind;

namespace {

using names = std::vector<std::string>;

std::string config_error_of(std::string_view text) {
  try {
    parse_config(text, "/etc/aqs/aqs.conf");
  } catch (const config_error& e) {
    return e.what();
  }
  return "(no error)";
}

job_request job_in(job_id id, std::string partition, std::size_t n, bool adaptive = false, std::size_t max = 0) {
  const auto submit = static_cast<double>(id);
  job_request r = adaptive ? test::adaptive(id, n, max, 100, submit) : test::rigid(id, n, 100, submit);
  r.partition = std::move(partition);
  return r;
}

// node0..node3, 4 processors each: node0-1 in "a" (default), node2-3 in "b".
scheduler two_partitions(std::string_view policy) {
  scheduler s(cluster::uniform(4, 4), make_strategy(policy));
  s.set_partitions(parse_config("PartitionName=a Nodes=node[0-1] Default=YES\nPartitionName=b Nodes=node[2-3]\n", "t")
                       .partitions);
  return s;
}

std::vector<std::size_t> nodes_of(const scheduler& s, const processor_set& p) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < s.machine().nodes().size(); ++i) {
    if (p.intersects(s.machine().procs_of(i))) out.push_back(i);
  }
  return out;
}

// Ends the rigid jobs 11, 12 and 13 and decides at 2: the one decision,
// the running adaptive job growing onto what they held.
std::vector<decision> grow_when_rigid_jobs_end(scheduler& s) {
  for (job_id id : {11, 12, 13}) s.apply(event::completion(id));
  auto d = s.decide(2);
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == kind::resize);
  return d;
}

}  // namespace

TEST_CASE("a host list expands ranges and lists in order, keeping zero padding") {
  CHECK(expand_hostlist("node[01-04,7]") == names{"node01", "node02", "node03", "node04", "node7"});
  CHECK(expand_hostlist("node[08-10],login") == names{"node08", "node09", "node10", "login"});
  CHECK(expand_hostlist("rack[1-2]-n[1-2]") == names{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"});
  CHECK(expand_hostlist("a,b,a") == names{"a", "b"});
  CHECK(expand_hostlist("gpu0") == names{"gpu0"});
}

TEST_CASE("a malformed host list is refused saying what is wrong") {
  CHECK_THROWS_WITH_AS(expand_hostlist("node[1-3"), "bad host list 'node[1-3': '[' without ']'", std::invalid_argument);
  CHECK_THROWS_WITH_AS(expand_hostlist("node[5-2]"), doctest::Contains("runs backwards"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(expand_hostlist("node[]"), doctest::Contains("empty brackets"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(expand_hostlist("node[a-b]"), doctest::Contains("not a number"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(expand_hostlist("a,,b"), doctest::Contains("empty host name"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(expand_hostlist("n[1-100000]"), doctest::Contains("too long"), std::invalid_argument);
  CHECK_THROWS_AS(expand_hostlist("n[1-9][1-9]", 50), std::invalid_argument);
}

TEST_CASE("a host list compresses in Slurm's order and expands back to the same names") {
  const names hosts{"node10", "node2", "node1", "node3", "gpu0", "node7"};
  const std::string text = compress_hostlist(hosts);
  CHECK(text == "gpu0,node[1-3,7,10]");
  auto back = expand_hostlist(text);
  CHECK(back.size() == hosts.size());
  CHECK(compress_hostlist({"n08", "n09", "n10"}) == "n[08-10]");
  CHECK(compress_hostlist({}).empty());
}

TEST_CASE("the configuration file declares partitions with their nodes and limits") {
  const auto c = parse_config(
      "# AQS partitions\n"
      "\n"
      "PartitionName=DEFAULT MaxTime=2:00:00\n"
      "PartitionName=debug Nodes=node[01-02] Default=YES MaxTime=30:00 MaxNodes=1   # short jobs\n"
      "partitionname=batch nodes=node[03-08] DefaultTime=1:00:00 MaxCPUsPerJob=64 State=DRAIN\n"
      "PartitionName=gpu Nodes=ALL AllowGroups=gpu,admin AllowUsers=alice MaxTime=UNLIMITED State=down\n",
      "aqs.conf");
  CHECK(c.configured);
  REQUIRE(c.partitions.size() == 3);
  const partition& d = c.partitions[0];
  CHECK(d.name == "debug");
  CHECK(d.nodes == names{"node01", "node02"});
  CHECK(d.is_default);
  CHECK(d.max_time_s == 1800);
  CHECK(d.max_nodes == 1);
  CHECK(d.line == 4);
  const partition& b = c.partitions[1];
  CHECK(b.max_time_s == 7200);  // from PartitionName=DEFAULT
  CHECK(b.default_time_s == 3600);
  CHECK(b.max_cpus_per_job == 64);
  CHECK(b.state == partition_state::drain);
  CHECK(b.nodes.size() == 6);
  const partition& g = c.partitions[2];
  CHECK(g.all_nodes);
  CHECK(g.has_node("anything"));
  CHECK(g.max_time_s == 0);
  CHECK(g.allow_groups == names{"gpu", "admin"});
  CHECK(g.allow_users == names{"alice"});
  CHECK(g.state == partition_state::down);
  CHECK(&c.default_partition() == &c.partitions[0]);
  CHECK(c.names() == "debug, batch, gpu");
}

TEST_CASE("without Default=YES the first partition is the default; a file without partitions is the implicit one") {
  CHECK(parse_config("PartitionName=x Nodes=a\nPartitionName=y Nodes=b\n", "f").default_partition().name == "x");
  const auto empty = parse_config("# nothing yet\n\n", "f");
  CHECK_FALSE(empty.configured);
  REQUIRE(empty.partitions.size() == 1);
  CHECK(empty.partitions[0].name == "main");
  CHECK(empty.partitions[0].all_nodes);
}

TEST_CASE("a bad configuration line is an error naming the file and the line") {
  CHECK(config_error_of("PartitionName=a Nodes=n1\n\nPartitionName=b Nodes=n2 MaxTime=soon\n") ==
        "/etc/aqs/aqs.conf:3: MaxTime=soon: expected a time (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) or UNLIMITED");
  CHECK(config_error_of("PartitionName=a Nodes=n1 Colour=blue") ==
        "/etc/aqs/aqs.conf:1: unknown key 'Colour' (known: PartitionName, Nodes, Default, MaxTime, DefaultTime, "
        "MaxNodes, MaxCPUsPerJob, AllowUsers, AllowGroups, State, Policy)");
  CHECK(config_error_of("# c\nPartitionName=a Nodes=n1\nPartitionName=a Nodes=n2\n") ==
        "/etc/aqs/aqs.conf:3: partition 'a' is declared twice (first on line 2)");
  CHECK(config_error_of("PartitionName=a Nodes=n1 Default=YES\nPartitionName=b Nodes=n2 Default=YES\n") ==
        "/etc/aqs/aqs.conf:2: partition 'a' (line 1) is already the default");
  CHECK(config_error_of("PartitionName=a Nodes=n[1-") == "/etc/aqs/aqs.conf:1: Nodes: bad host list 'n[1-': '[' without ']'");
  CHECK(config_error_of("PartitionName=a") == "/etc/aqs/aqs.conf:1: partition 'a' has no Nodes= (a host list, or ALL)");
  CHECK(config_error_of("NodeName=n1 CPUs=4") ==
        "/etc/aqs/aqs.conf:1: NodeName lines are not read: nodes register themselves (aqs-node); name them in a "
        "partition's Nodes=");
  CHECK(config_error_of("PartitionName=a Nodes=n1 garbage") == "/etc/aqs/aqs.conf:1: 'garbage' is not KEY=VALUE");
  CHECK(config_error_of("PartitionName=a Nodes=n1 MaxNodes=0") ==
        "/etc/aqs/aqs.conf:1: MaxNodes=0: expected a positive number or UNLIMITED");
  CHECK(config_error_of("PartitionName=a Nodes=n1 State=sleepy") ==
        "/etc/aqs/aqs.conf:1: State=sleepy: expected UP, DOWN, DRAIN or INACTIVE");
  CHECK(config_error_of("PartitionName=a Nodes=n1 MaxTime=10 DefaultTime=20") ==
        "/etc/aqs/aqs.conf:1: DefaultTime is longer than MaxTime");
  CHECK(config_error_of("PartitionName=a/b Nodes=n1").find("must be 1 to 64 letters") != std::string::npos);
  CHECK(config_error_of("PartitionName=a Nodes=n1 Nodes=n2") == "/etc/aqs/aqs.conf:1: Nodes is given twice");
}

TEST_CASE("time limits read in Slurm's forms and print as sinfo does") {
  CHECK(parse_duration("30") == 1800);
  CHECK(parse_duration("30:15") == 1815);
  CHECK(parse_duration("1:00:00") == 3600);
  CHECK(parse_duration("2-00:00:00") == 2 * 86400);
  CHECK(parse_duration("1-12") == 86400 + 12 * 3600);
  CHECK(parse_duration("UNLIMITED") == 0);
  CHECK_FALSE(parse_duration("1:99"));
  CHECK_FALSE(parse_duration("-5"));
  CHECK(format_partition_time(0) == "infinite");
  CHECK(format_partition_time(1800) == "30:00");
  CHECK(format_partition_time(3600) == "1:00:00");
  CHECK(format_partition_time(2 * 86400) == "2-00:00:00");
}

TEST_CASE("a partition refuses jobs over its limits or from users it does not allow, in Slurm's words") {
  const auto c = parse_config(
      "PartitionName=p Nodes=n[1-4] MaxTime=1:00:00 MaxNodes=2 MaxCPUsPerJob=8 AllowUsers=alice,bob AllowGroups=hpc\n"
      "PartitionName=closed Nodes=n1 State=INACTIVE\nPartitionName=off Nodes=n1 State=DOWN\n",
      "f");
  const partition& p = c.partitions[0];
  partition_request ok{"alice", {"users", "hpc"}, false, 3600, 2, 8};
  CHECK_FALSE(partition_refusal(p, ok));
  auto r = ok;
  r.walltime_s = 3601;
  CHECK(partition_refusal(p, r).value_or("").starts_with("Requested time limit is invalid"));
  r = ok;
  r.min_nodes = 3;
  CHECK(partition_refusal(p, r) == "Node count specification invalid: 3 nodes asked, MaxNodes is 2 (partition p)");
  r = ok;
  r.cpus = 9;
  CHECK(partition_refusal(p, r).value_or("").find("MaxCPUsPerJob is 8") != std::string::npos);
  CHECK(partition_refusal(p, r) ==
        "Requested node configuration is not available: 9 processors asked, MaxCPUsPerJob is 8 (partition p)");
  r.cpus = 8;  // (an adaptive job's minimum) at the limit: its growth is bounded by the scheduler
  CHECK_FALSE(partition_refusal(p, r));
  r = ok;
  r.user = "mallory";
  CHECK(partition_refusal(p, r) == "Access/permission denied: user mallory may not use partition p");
  r.root = true;
  CHECK_FALSE(partition_refusal(p, r));
  r = ok;
  r.groups = {"users"};
  CHECK(partition_refusal(p, r).value_or("").starts_with("User's group not permitted"));
  CHECK(partition_refusal(c.partitions[1], ok).value_or("").find("inactive") != std::string::npos);
  CHECK_FALSE(partition_refusal(c.partitions[2], ok));  // DOWN takes jobs; they wait
}

TEST_CASE("a job's -p picks its partitions; an unknown name is an error listing them") {
  const auto c = parse_config("PartitionName=a Nodes=n1\nPartitionName=b Nodes=n2 Default=YES\n", "f");
  CHECK(choose_partitions(c, "").partitions.at(0)->name == "b");
  auto two = choose_partitions(c, "a,b");
  REQUIRE(two.partitions.size() == 2);
  CHECK(two.partitions[0]->name == "a");
  auto bad = choose_partitions(c, "a,gpu");
  CHECK(bad.partitions.empty());
  CHECK(bad.error == "invalid partition name specified: 'gpu' (partitions: a, b)");
  // Without a configuration any name is the one partition of all nodes.
  CHECK(choose_partitions(implicit_config(), "gpu").partitions.at(0)->name == "main");
}

TEST_CASE("a job gets processors only on its partition's nodes, under every policy") {
  for (const char* policy : {"fcfs", "easy", "equipartition"}) {
    CAPTURE(policy);
    auto s = two_partitions(policy);
    // Partition b is busy: a job there waits even though a is idle.
    auto d = s.handle(event::arrival(job_in(1, "b", 8)), 0);
    REQUIRE(d.size() == 1);
    CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{2, 3});
    d = s.handle(event::arrival(job_in(2, "b", 2)), 1);
    CHECK(d.empty());
    CHECK(s.get(2).state == job_state::pending);
    // A job without -p goes to the default partition a, and runs at once
    // although b's head blocks.
    d = s.handle(event::arrival(job_in(3, "", 4)), 2);
    REQUIRE(d.size() == 1);
    CHECK(d[0].job == 3);
    CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{0});
    // A job bigger than its partition never starts (the daemon refuses it at
    // submission), and does not block the others.
    d = s.handle(event::arrival(job_in(4, "a", 12)), 3);
    d = s.handle(event::arrival(job_in(5, "a", 4)), 4);
    REQUIRE(d.size() == 1);
    CHECK(d[0].job == 5);
    CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{1});
    // When job 1 ends, job 2 starts in b.
    d = s.handle(event::completion(1), 5);
    REQUIRE(d.size() == 1);
    CHECK(d[0].job == 2);
    CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{2});
  }
}

TEST_CASE("a job named in two partitions runs in whichever has room; an unknown partition waits") {
  auto s = two_partitions("easy");
  s.handle(event::arrival(job_in(1, "a", 8)), 0);
  auto d = s.handle(event::arrival(job_in(2, "a,b", 4)), 1);
  REQUIRE(d.size() == 1);
  CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{2});
  CHECK(s.get(2).partition == 1);
  d = s.handle(event::arrival(job_in(3, "gone", 1)), 2);
  CHECK(d.empty());
  CHECK(s.get(3).partitions.empty());
}

TEST_CASE("a shaped job is placed on its partition's nodes only") {
  auto s = two_partitions("easy");
  job_request r = job_in(1, "b", 4);
  r.shape.ntasks = 2;
  r.shape.tasks_per_node = 1;
  r.shape.cpus_per_task = 2;
  r.shape.min_nodes = r.shape.max_nodes = 2;
  auto d = s.handle(event::arrival(r), 0);
  REQUIRE(d.size() == 1);
  CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{2, 3});
  // never_fits over a partition's nodes: two nodes of 8 exist nowhere.
  r.id = 2;
  r.shape.cpus_per_task = 8;
  r.min_pe = r.max_pe = 16;
  CHECK(s.never_fits(r, {2, 3}).has_value());
}

TEST_CASE("an adaptive job grows only on its partition's nodes and shares them with its partition's jobs only") {
  auto s = two_partitions("equipartition");
  auto d = s.handle(event::arrival(job_in(1, "a", 2, true, 16)), 0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.count() == 8);  // all of a, none of b
  CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{0, 1});
  // A job in b starts on b's idle nodes without shrinking job 1.
  d = s.handle(event::arrival(job_in(2, "b", 2, true, 16)), 1);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 2);
  CHECK(d[0].what == kind::start);
  CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{2, 3});
  // A rigid job in a shrinks job 1, not job 2.
  d = s.handle(event::arrival(job_in(3, "a", 4)), 2);
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == kind::resize);
  CHECK(d[0].job == 1);
  CHECK(d[0].to.count() == 4);
  d = s.handle(event::on_job(event::kind::resize_ack, 1), 3);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 3);
  CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{1});
  // Job 2 ends: job 1 does not grow into b.
  d = s.handle(event::completion(2), 4);
  CHECK(d.empty());
  CHECK(nodes_of(s, s.get(1).procs) == std::vector<std::size_t>{0});
}

TEST_CASE("a partition that is DOWN starts nothing; partitions follow nodes that register later") {
  scheduler s(cluster{}, make_strategy("fcfs"));
  s.set_partitions(parse_config("PartitionName=up Nodes=n1\nPartitionName=off Nodes=n2 State=DOWN\n", "f").partitions);
  s.handle(event::arrival(job_in(1, "off", 1)), 0);
  s.handle(event::arrival(job_in(2, "up", 1)), 0);
  s.add_node("n2", 4);
  CHECK(s.decide(1).empty());
  s.add_node("n1", 4);
  auto d = s.decide(2);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 2);
  CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{1});
  // Reconfigured UP: the waiting job starts on n2.
  s.set_partitions(parse_config("PartitionName=up Nodes=n1\nPartitionName=off Nodes=n2\n", "f").partitions);
  d = s.decide(3);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 1);
  CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{0});
}

namespace {

// node0..node3, 4 processors each, in one partition p with `limit` (e.g.
// "MaxNodes=2"), under `policy`.
scheduler four_nodes_in_p(const std::string& limit, const std::string& policy = "equipartition") {
  scheduler s(cluster::uniform(4, 4), make_strategy(policy));
  s.set_partitions(parse_config("PartitionName=p Nodes=node[0-3] Default=YES " + limit + "\n", "t").partitions);
  return s;
}
scheduler max_two_nodes() { return four_nodes_in_p("MaxNodes=2"); }
scheduler max_six_cpus() { return four_nodes_in_p("MaxCPUsPerJob=6"); }

}  // namespace

TEST_CASE("an adaptive job starts on no more nodes than its partition's MaxNodes") {
  auto s = max_two_nodes();
  auto d = s.handle(event::arrival(job_in(1, "p", 2, true, 16)), 0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == kind::start);
  CHECK(d[0].to.count() == 8);  // two whole nodes, not all four
  CHECK(nodes_of(s, d[0].to).size() == 2);
}

TEST_CASE("an adaptive job grows on no more nodes than its partition's MaxNodes, and the rest goes to others") {
  auto s = max_two_nodes();
  // Rigid jobs hold node0-2: the adaptive job starts on node3 alone.
  for (job_id id : {11, 12, 13}) REQUIRE(s.handle(event::arrival(job_in(id, "p", 4)), 0).size() == 1);
  auto d = s.handle(event::arrival(job_in(2, "p", 2, true, 16)), 1);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 2);
  CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{3});
  // They end: job 2 grows by one node, not three.
  d = grow_when_rigid_jobs_end(s);
  CHECK(d[0].to.count() == 8);
  CHECK(nodes_of(s, d[0].to).size() == 2);
  s.handle(event::on_job(event::kind::resize_ack, 2), 3);
  // A second adaptive job gets the two nodes the first may not use, and
  // the first is not shrunk for it.
  d = s.handle(event::arrival(job_in(3, "p", 2, true, 16)), 4);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 3);
  CHECK(d[0].to.count() == 8);
  CHECK(nodes_of(s, d[0].to).size() == 2);
  CHECK(s.get(2).size() == 8);
}

TEST_CASE("an adaptive job whose minimum needs more nodes than MaxNodes waits instead of running spread out") {
  auto s = max_two_nodes();
  auto d = s.handle(event::arrival(job_in(1, "p", 12, true, 16)), 0);
  CHECK(d.empty());
  CHECK(s.get(1).state == job_state::pending);
}

TEST_CASE("an adaptive job's own node limit (-N max) bounds its growth like MaxNodes") {
  scheduler s(cluster::uniform(4, 4), make_strategy("equipartition"));
  job_request r = job_in(1, "", 2, true, 16);
  r.shape.max_nodes = 3;
  auto d = s.handle(event::arrival(r), 0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.count() == 12);
  CHECK(nodes_of(s, d[0].to).size() == 3);
}

TEST_CASE("an adaptive job starts with no more processors than its partition's MaxCPUsPerJob, whatever its maximum") {
  auto s = max_six_cpus();
  auto d = s.handle(event::arrival(job_in(1, "p", 2, true, 16)), 0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == kind::start);
  CHECK(d[0].to.count() == 6);
  // The other 10 processors go to a second adaptive job, also at most 6,
  // and the first is not grown past the limit by what is left over.
  d = s.handle(event::arrival(job_in(2, "p", 2, true, 16)), 1);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 2);
  CHECK(d[0].to.count() == 6);
  CHECK(s.get(1).size() == 6);
  CHECK(s.free_count() == 4);
}

TEST_CASE("an adaptive job grows up to its partition's MaxCPUsPerJob and no further") {
  auto s = max_six_cpus();
  // Rigid jobs hold node0-2: the adaptive job starts on node3 alone.
  for (job_id id : {11, 12, 13}) REQUIRE(s.handle(event::arrival(job_in(id, "p", 4)), 0).size() == 1);
  auto d = s.handle(event::arrival(job_in(2, "p", 2, true, 16)), 1);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.count() == 4);
  d = grow_when_rigid_jobs_end(s);
  CHECK(d[0].to.count() == 6);
  s.handle(event::on_job(event::kind::resize_ack, 2), 3);
  // A larger maximum asked while it runs changes nothing: the limit holds.
  CHECK(s.handle(event::change(2, 2, 32), 4).empty());
  CHECK(s.get(2).size() == 6);
}

TEST_CASE("an adaptive -c job is kept within MaxCPUsPerJob in whole ranks") {
  scheduler s(cluster::uniform(4, 4), make_strategy("equipartition"));
  s.set_partitions(parse_config("PartitionName=p Nodes=node[0-3] Default=YES MaxCPUsPerJob=10\n", "t").partitions);
  job_request r = job_in(1, "p", 4, true, 16);  // 1 to 4 ranks of 4 processors
  r.shape.cpus_per_task = 4;
  auto d = s.handle(event::arrival(r), 0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.count() == 8);  // two ranks: a third would be 12 > 10
  for (std::size_t n : nodes_of(s, d[0].to)) CHECK(d[0].to.count_range(n * 4, n * 4 + 4) % 4 == 0);
}

TEST_CASE("an adaptive job in several partitions is bounded by the MaxCPUsPerJob of the one it runs in") {
  scheduler s(cluster::uniform(4, 4), make_strategy("equipartition"));
  s.set_partitions(parse_config("PartitionName=a Nodes=node[0-1] Default=YES MaxCPUsPerJob=2\n"
                                "PartitionName=b Nodes=node[2-3] MaxCPUsPerJob=6\n",
                                "t")
                       .partitions);
  // Job 1 fits a: it runs there, bounded by a's limit.
  auto d = s.handle(event::arrival(job_in(1, "a,b", 2, true, 16)), 0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].to.count() == 2);
  CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{0});
  // A rigid job takes the rest of a: job 2 starts in b, bounded by b's.
  REQUIRE(s.handle(event::arrival(job_in(3, "a", 6)), 1).size() == 1);
  d = s.handle(event::arrival(job_in(2, "a,b", 2, true, 16)), 2);
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 2);
  CHECK(d[0].to.count() == 6);
  CHECK(nodes_of(s, d[0].to) == std::vector<std::size_t>{2, 3});
  CHECK(s.get(1).size() == 2);
}

TEST_CASE("under fcfs and easy too, an adaptive job starts within its partition's MaxCPUsPerJob and MaxNodes") {
  for (const char* policy : {"fcfs", "easy"}) {
    CAPTURE(policy);
    auto cpus = four_nodes_in_p("MaxCPUsPerJob=6", policy);
    auto d = cpus.handle(event::arrival(job_in(1, "p", 2, true, 16)), 0);
    REQUIRE(d.size() == 1);
    CHECK(d[0].to.count() == 6);
    auto nodes = four_nodes_in_p("MaxNodes=2", policy);
    d = nodes.handle(event::arrival(job_in(1, "p", 2, true, 16)), 0);
    REQUIRE(d.size() == 1);
    CHECK(d[0].to.count() == 8);
    CHECK(nodes_of(nodes, d[0].to).size() == 2);
  }
}

TEST_CASE("Policy= gives a partition its own scheduling policy; an unknown one is an error naming the line") {
  auto c = parse_config("PartitionName=a Nodes=node[0-1] Policy=easy\nPartitionName=b Nodes=node[2-3]\n", "t");
  CHECK(c.partitions[0].policy == "easy");
  CHECK(c.partitions[1].policy.empty());
  CHECK(config_error_of("PartitionName=a Nodes=n1\nPartitionName=b Nodes=n2 Policy=lottery\n") ==
        "/etc/aqs/aqs.conf:2: Policy=lottery: unknown policy (known: easy, equipartition, fcfs, payoff, payoff_lxf, pref_common_pool)");
}

TEST_CASE("each partition is scheduled by its own policy, the others by the scheduler's") {
  scheduler s(cluster::uniform(4, 4), make_strategy("equipartition"));
  s.set_partitions(
      parse_config("PartitionName=a Nodes=node[0-1] Default=YES Policy=easy\nPartitionName=b Nodes=node[2-3]\n", "t")
          .partitions);
  CHECK(s.policy_of(0).name() == "easy");
  CHECK(s.policy_of(1).name() == "equipartition");
  // The same two adaptive jobs (1..8) in each: easy runs the first rigid at
  // its maximum and the second waits; equipartition shares the 8 processors.
  s.apply(event::arrival(job_in(1, "a", 1, true, 8)));
  s.apply(event::arrival(job_in(2, "a", 1, true, 8)));
  s.apply(event::arrival(job_in(3, "b", 1, true, 8)));
  s.apply(event::arrival(job_in(4, "b", 1, true, 8)));
  s.decide(0);
  CHECK(s.get(1).size() == 8);
  CHECK(s.get(2).state == job_state::pending);
  CHECK(s.get(3).size() == 4);
  CHECK(s.get(4).size() == 4);
}
