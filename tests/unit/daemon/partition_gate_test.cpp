// The partition checks of a submission (partition_gate) and the access
// view's "never fits" within a partition's nodes.
#include <doctest/doctest.h>

#include "core/partition.hpp"
#include "daemon/access_view.hpp"
#include "daemon/partition_gate.hpp"
#include "partition_samples.hpp"

using namespace aqs;

namespace {

const core::site_config& config() {
  static const core::site_config c = test::sample_partitions();
  return c;
}

protocol::job_spec job(std::optional<std::string> partition, std::optional<std::int64_t> walltime = std::nullopt) {
  protocol::job_spec s;
  s.name = "j";
  s.argv = {"/bin/true"};
  s.workdir = "/tmp";
  s.walltime_s = walltime;
  if (partition) {
    s.geometry.emplace();
    s.geometry->partition = partition;
  }
  return s;
}

const daemon::submitter& bob = test::sample_bob;

}  // namespace

TEST_CASE("a job without -p goes to the default partition and takes its default time limit") {
  auto s = job(std::nullopt);
  const auto a = daemon::admit_to_partitions(config(), s, bob, {});
  CHECK(a.error.empty());
  REQUIRE(a.partitions.size() == 1);
  CHECK(a.partitions[0]->name == "debug");
  CHECK(s.walltime_s == 600);
  // batch has no DefaultTime: its MaxTime.
  auto b = job("batch");
  daemon::admit_to_partitions(config(), b, bob, {});
  CHECK(b.walltime_s == 7200);
}

TEST_CASE("an unknown partition or one refusing the job is a one-line error; a list keeps those that take it") {
  auto s = job("nope");
  CHECK(daemon::admit_to_partitions(config(), s, bob, {}).error ==
        "invalid partition name specified: 'nope' (partitions: debug, batch, vip)");
  s = job("debug", 3600);
  CHECK(daemon::admit_to_partitions(config(), s, bob, {}).error.starts_with("Requested time limit is invalid"));
  s = job("vip");
  CHECK(daemon::admit_to_partitions(config(), s, bob, {}).error ==
        "Access/permission denied: user bob may not use partition vip");
  s = job("vip,batch");
  const auto a = daemon::admit_to_partitions(config(), s, bob, {});
  CHECK(a.error.empty());
  CHECK(s.geometry->partition == "batch");
  const daemon::submitter root{"root", 0, 0};
  s = job("vip,batch");
  CHECK(daemon::admit_to_partitions(config(), s, root, {}).partitions.size() == 2);
  CHECK(s.geometry->partition == "vip,batch");
}

TEST_CASE("without partitions configured any -p is taken and nothing changes") {
  auto s = job("gpu");
  const auto a = daemon::admit_to_partitions(core::implicit_config(), s, bob, {});
  CHECK(a.error.empty());
  CHECK(s.geometry->partition == "gpu");
  CHECK_FALSE(s.walltime_s);
}

TEST_CASE("a job that could never run in its partition's registered nodes is refused with the reason") {
  daemon::access_view v;
  core::cluster m;
  for (const char* n : {"n1", "n2", "n3", "n4"}) m.add_node(n, 4);
  v.set_machine(m, std::vector<core::node_resources>(4));
  core::job_request r;
  r.min_pe = r.max_pe = 6;
  CHECK(v.never_fits(r, config().partitions[0]) ==
        "Node count specification invalid: 6 processors need 2 nodes in partition debug, MaxNodes is 1");
  CHECK_FALSE(v.never_fits(r, config().partitions[1]));
  // An adaptive job's minimum is held to MaxNodes the same way (it never
  // grows past it either): 6 at least need two nodes of debug.
  r.adaptive = true;
  r.max_pe = 16;
  CHECK(v.never_fits(r, config().partitions[0]) ==
        "Node count specification invalid: 6 processors need 2 nodes in partition debug, MaxNodes is 1");
  r.min_pe = 4;
  CHECK_FALSE(v.never_fits(r, config().partitions[0]));
  r.adaptive = false;
  r.min_pe = r.max_pe = 9;
  CHECK(v.never_fits(r, config().partitions[1]) == "it needs 9 processors; partition batch has 8");
  // A partition whose named nodes have not all registered: not judged yet.
  const auto later = core::parse_config("PartitionName=p Nodes=n[4-5]\n", "f");
  CHECK_FALSE(v.never_fits(r, later.partitions[0]));
}
