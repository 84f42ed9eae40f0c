// user_limits: the per-user caps' aqs.conf lines, the ledger's counts and
// refusals, and the submissions under way by token.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "daemon/dependency_gate.hpp"
#include "daemon/user_limits.hpp"

using namespace aqs::daemon;

TEST_CASE("limit lines are taken out of aqs.conf and the partition lines keep their numbers") {
  user_limits l;
  const std::string rest = take_limit_lines("# caps\n"
                                            "MaxJobsPerUser=10 maxarraysize=5\n"
                                            "PartitionName=debug Nodes=ALL\n"
                                            "MaxScriptBytes=8K  # per job\n"
                                            "MaxScriptBytesPerUser=1M\n"
                                            "MaxPendingSubmitsPerUser=2",
                                            "aqs.conf", l);
  CHECK(rest == "# caps\n\nPartitionName=debug Nodes=ALL\n\n\n");
  CHECK(l.max_jobs_per_user == 10);
  CHECK(l.max_array_size == 5);
  CHECK(l.max_script_bytes == 8 * 1024);
  CHECK(l.max_script_bytes_per_user == 1024 * 1024);
  CHECK(l.max_pending_submits_per_user == 2);
}

TEST_CASE("a bad limit value or a limit beside partition keys is one line naming the file and line") {
  user_limits l;
  CHECK_THROWS_WITH_AS(take_limit_lines("\nMaxArraySize=lots\n", "f.conf", l),
                       doctest::Contains("f.conf:2: invalid MaxArraySize='lots'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(take_limit_lines("MaxJobsPerUser=0\n", "f.conf", l), doctest::Contains("f.conf:1:"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(take_limit_lines("PartitionName=a Nodes=ALL MaxJobsPerUser=3\n", "f.conf", l),
                       doctest::Contains("lines of their own"), std::invalid_argument);
}

TEST_CASE("the ledger refuses a user over MaxJobsPerUser or MaxScriptBytesPerUser, names the cap, and counts back") {
  user_limits l;
  l.max_jobs_per_user = 3;
  l.max_script_bytes_per_user = 1000;
  user_ledger led(l);
  CHECK_FALSE(led.reserve(1000, 2, 400));
  const auto jobs = led.reserve(1000, 2, 0);
  REQUIRE(jobs);
  CHECK(jobs->find("MaxJobsPerUser 3") != std::string::npos);
  const auto bytes = led.reserve(1000, 1, 700);
  REQUIRE(bytes);
  CHECK(bytes->find("MaxScriptBytesPerUser 1000") != std::string::npos);
  CHECK(led.jobs_of(1000) == 2);  // a refusal reserves nothing
  CHECK_FALSE(led.reserve(1001, 3, 900));  // another user has caps of their own
  led.release(1000, 2, 400);
  CHECK(led.jobs_of(1000) == 0);
  CHECK_FALSE(led.reserve(1000, 3, 1000));
  CHECK_FALSE(led.reserve(0, 100, 100000));  // root is not capped per user
}

TEST_CASE("a resend of a submission under way joins it and is answered with its answer") {
  user_limits l;
  l.max_pending_submits_per_user = 1;
  user_ledger led(l);
  std::string why;
  std::int64_t answered = -1;
  CHECK(led.start_submit(7, "u7:tok", {}, why) == user_ledger::start::started);
  CHECK(led.start_submit(7, "u7:tok", [&](bool ok, std::int64_t id, int, const std::string&) { answered = ok ? id : -2; },
                         why) == user_ledger::start::joined);
  CHECK(led.start_submit(7, "u7:other", {}, why) == user_ledger::start::refused);
  CHECK(why.find("MaxPendingSubmitsPerUser 1") != std::string::npos);
  led.finish_submit(7, "u7:tok", true, 42, 0, "");
  CHECK(answered == 42);
  CHECK(led.pending_of(7) == 0);
  CHECK(led.start_submit(7, "u7:other", {}, why) == user_ledger::start::started);
}

TEST_CASE("100,000 jobs held behind one dependency are all released when it ends") {
  dependency_gate g;
  for (std::int64_t j = 2; j < 100'002; ++j) g.hold(j, {1});
  g.hold(5, {1});  // held again: counted once
  CHECK(g.held_count() == 100'000);
  CHECK(g.started(1).size() == 100'000);
  const auto out = g.ended(1);
  CHECK(out.size() == 100'000);
  CHECK(g.ended(1).empty());
}
