// user_limits: the per-user caps' aqs.conf lines, the ledger's counts and
// refusals, and the submissions under way by token.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "daemon/dependency_gate.hpp"
#include "daemon/user_limits.hpp"

using namespace aqs::daemon;

TEST_CASE("the per-user caps are settings: aqs.conf keys, flags and bounds of their own") {
  user_limits l;
  auto table = user_limit_settings(l);
  const std::string rest = aqs::core::take_setting_lines("MaxJobsPerUser=10 maxarraysize=5\n"
                                                         "PartitionName=debug Nodes=ALL\n"
                                                         "MaxScriptBytes=8K MaxScriptBytesPerUser=1M\n"
                                                         "MaxPendingSubmitsPerUser=2",
                                                         "aqs.conf", table, true);
  CHECK(rest == "\nPartitionName=debug Nodes=ALL\n\n");
  CHECK(l.max_jobs_per_user == 10);
  CHECK(l.max_array_size == 5);
  CHECK(l.max_script_bytes == 8 * 1024);
  CHECK(l.max_script_bytes_per_user == 1024 * 1024);
  CHECK(l.max_pending_submits_per_user == 2);
  // MaxArraySize cannot pass the core's hard 100,000, from the file or a flag.
  CHECK_THROWS_WITH_AS(aqs::core::take_setting_lines("MaxArraySize=100001\n", "f.conf", table, true),
                       doctest::Contains("f.conf:1: MaxArraySize takes a whole number from 1 to 100000"),
                       std::invalid_argument);
  table[1].typed = "200000";
  CHECK(aqs::core::apply_typed_flags(table));
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
