// The admission checks alone (admission.hpp): partitions asked, their
// states, users and limits, and "can it ever fit", for submissions and for
// changes of a job, with the same one-line refusals on every path.
#include <doctest/doctest.h>

#include "core/partition.hpp"
#include "daemon/admission.hpp"
#include "partition_samples.hpp"

using namespace aqs;

namespace {

// The sample partitions, batch with at most 8 processors a job, and two more:
// open (no limits) and closed (inactive).
const core::site_config& config() {
  static const core::site_config c = test::sample_partitions(
      "MaxCPUsPerJob=8", "PartitionName=open Nodes=n[3-4]\nPartitionName=closed Nodes=n4 State=INACTIVE\n");
  return c;
}

const daemon::submitter& bob = test::sample_bob;
const daemon::submitter root{"root", 0, 0};

daemon::admission_request change(std::string partition, std::optional<std::int64_t> walltime, std::size_t cpus = 1) {
  daemon::admission_request r;
  r.who = bob;
  r.partition = std::move(partition);
  r.walltime_s = walltime;
  r.cpus = cpus;
  return r;
}

protocol::job_spec spec(std::optional<std::string> partition, std::optional<std::int64_t> walltime, std::int64_t pe) {
  protocol::job_spec s;
  s.name = "j";
  s.argv = {"/bin/true"};
  s.workdir = "/tmp";
  s.walltime_s = walltime;
  s.min_pe = pe;
  s.max_pe = pe;
  if (partition) {
    s.geometry.emplace();
    s.geometry->partition = partition;
  }
  return s;
}

}  // namespace

TEST_CASE("admission: a change to UNLIMITED is refused by a partition with a MaxTime, taken by one without") {
  auto a = daemon::admit(config(), change("batch", 0), nullptr);
  CHECK(a.error.starts_with("Requested time limit is invalid"));
  CHECK(a.error.find("UNLIMITED asked, MaxTime is") != std::string::npos);
  CHECK(a.error.find("(partition batch)") != std::string::npos);
  CHECK(a.partitions.empty());
  a = daemon::admit(config(), change("open", 0), nullptr);
  CHECK(a.error.empty());
  REQUIRE(a.partitions.size() == 1);
  CHECK(a.partitions[0]->name == "open");
  // At submission no limit and 0 mean the same: the partition's default.
  auto s = spec("batch", 0, 1);
  CHECK(daemon::admit_submission(config(), s, bob, {}, nullptr).error.empty());
}

TEST_CASE("admission: a list keeps the partitions that take the job; refused by all: the first refusal") {
  auto a = daemon::admit(config(), change("batch,debug", 3 * 3600), nullptr);
  CHECK(a.error.starts_with("Requested time limit is invalid"));
  CHECK(a.error.find("batch") != std::string::npos);  // batch was asked first
  a = daemon::admit(config(), change("vip,batch", 3600, 4), nullptr);
  CHECK(a.error.empty());
  REQUIRE(a.partitions.size() == 1);
  CHECK(a.partitions[0]->name == "batch");
  // MaxCPUsPerJob.
  a = daemon::admit(config(), change("batch", 3600, 9), nullptr);
  CHECK_FALSE(a.error.empty());
  // A submission to "vip,batch" names only batch afterwards.
  auto s = spec("vip,batch", 3600, 4);
  CHECK(daemon::admit_submission(config(), s, bob, {}, nullptr).error.empty());
  CHECK(s.geometry->partition == "batch");
}

TEST_CASE("admission: AllowUsers lets in the user named and root; an inactive partition takes nobody") {
  CHECK_FALSE(daemon::admit(config(), change("vip", 60), nullptr).error.empty());
  auto r = change("vip", 60);
  r.who.user = "alice";
  CHECK(daemon::admit(config(), r, nullptr).error.empty());
  r = change("vip", 60);
  r.root = true;
  CHECK(daemon::admit(config(), r, nullptr).error.empty());
  auto s = spec("vip", 60, 1);
  CHECK(daemon::admit_submission(config(), s, root, {}, nullptr).error.empty());  // root by uid
  CHECK_FALSE(daemon::admit(config(), change("closed", 60), nullptr).error.empty());
}

TEST_CASE("admission: a job no partition's nodes could hold is refused with the nodes' reason") {
  std::vector<std::string> asked;
  const daemon::never_fits_check small = [&](const core::partition* p) -> std::optional<std::string> {
    asked.push_back(p ? p->name : "-");
    if (p && p->name == "open") return std::nullopt;  // open's nodes could
    return "it asks 64 cpus, the largest node has 4";
  };
  auto a = daemon::admit(config(), change("batch", 60), small);
  CHECK(a.error == "the job can never run on this cluster: it asks 64 cpus, the largest node has 4");
  CHECK(a.never_fits == "it asks 64 cpus, the largest node has 4");
  CHECK(asked == std::vector<std::string>{"batch"});
  // Any partition that takes it and could hold it admits it.
  asked.clear();
  a = daemon::admit(config(), change("batch,open", 60), small);
  CHECK(a.error.empty());
  CHECK(a.partitions.size() == 2);
  // Without a configuration the check is asked about the whole cluster (null).
  asked.clear();
  const core::site_config implicit;
  a = daemon::admit(implicit, change("", std::nullopt), small);
  CHECK(asked == std::vector<std::string>{"-"});
  CHECK(a.error.starts_with("the job can never run on this cluster: "));
  a = daemon::admit(implicit, change("", std::nullopt), [](const core::partition*) { return std::nullopt; });
  CHECK(a.error.empty());
}

TEST_CASE("admission: at submission a job without a limit takes DefaultTime, else MaxTime, else none") {
  auto s = spec(std::nullopt, std::nullopt, 1);
  CHECK(daemon::admit_submission(config(), s, bob, {}, nullptr).error.empty());
  CHECK(s.walltime_s == 600);
  s = spec("batch", std::nullopt, 1);
  daemon::admit_submission(config(), s, bob, {}, nullptr);
  CHECK(s.walltime_s == 7200);
  s = spec("open", std::nullopt, 1);
  daemon::admit_submission(config(), s, bob, {}, nullptr);
  CHECK_FALSE(s.walltime_s.has_value());
  // An asked limit is kept.
  s = spec("batch", 120, 1);
  daemon::admit_submission(config(), s, bob, {}, nullptr);
  CHECK(s.walltime_s == 120);
}
