// settings: one declaration per tunable number gives its flag, its
// config-file line, its bounds and its one-line errors.
#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/settings.hpp"

using namespace aqs::core;
using namespace std::chrono_literals;

namespace {

struct knobs {
  std::size_t conns = 64;
  std::int64_t tasks = 1000;
  std::size_t body = std::size_t{16} << 20;
  std::chrono::milliseconds head = 5s;
  std::chrono::milliseconds idle = 60s;
  std::vector<setting> table() {
    return {count_setting("MaxConns", "--max-conns", conns, "connections"),
            count_setting("MaxTasks", "--max-tasks", tasks, "tasks", 1, 100000),
            bytes_setting("MaxBody", "--max-body", body, "body bytes", 1024),
            seconds_setting("HeadTimeout", "--head-timeout", head, "head seconds"),
            seconds_setting("IdleTimeout", "--idle-timeout", idle, "idle seconds (0: never)", 0),
            count_setting({}, "--flag-only", conns, "no key")};
  }
};

}  // namespace

TEST_CASE("setting lines are taken out of the file, values set, and the other lines keep their numbers") {
  knobs k;
  auto t = k.table();
  const std::string rest = take_setting_lines("# caps\n"
                                              "maxconns=10 MaxTasks=5\n"
                                              "PartitionName=debug Nodes=ALL\n"
                                              "MaxBody=8K  # per request\n"
                                              "HeadTimeout=0.25\n"
                                              "IdleTimeout=0",
                                              "aqs.conf", t, true);
  CHECK(rest == "# caps\n\nPartitionName=debug Nodes=ALL\n\n\n");
  CHECK(k.conns == 10);
  CHECK(k.tasks == 5);
  CHECK(k.body == 8 * 1024);
  CHECK(k.head == 250ms);
  CHECK(k.idle == 0ms);
}

TEST_CASE("a typed flag wins over the file; without apply the lines are only checked") {
  knobs k;
  auto t = k.table();
  t[0].typed = "7";
  (void)take_setting_lines("MaxConns=10\nMaxTasks=9\n", "f", t, true);
  REQUIRE_FALSE(apply_typed_flags(t));
  CHECK(k.conns == 7);
  CHECK(k.tasks == 9);
  knobs fresh;
  auto u = fresh.table();
  CHECK(take_setting_lines("MaxTasks=9\nx=1\n", "f", u, false) == "\nx=1\n");
  CHECK(fresh.tasks == 1000);
  CHECK_THROWS_WITH_AS(take_setting_lines("MaxTasks=lots\n", "f", u, false), doctest::Contains("f:1: MaxTasks"),
                       std::invalid_argument);
}

TEST_CASE("bad values, values out of bounds and limits beside other keys are one line naming file, line and key") {
  knobs k;
  auto t = k.table();
  CHECK_THROWS_WITH_AS(take_setting_lines("\nMaxTasks=lots\n", "f.conf", t, true),
                       "f.conf:2: MaxTasks takes a whole number from 1 to 100000, not 'lots'", std::invalid_argument);
  CHECK_THROWS_WITH_AS(take_setting_lines("MaxTasks=100001\n", "f.conf", t, true),
                       doctest::Contains("f.conf:1: MaxTasks takes a whole number"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(take_setting_lines("MaxBody=1000\n", "f.conf", t, true),
                       "f.conf:1: MaxBody takes a size in bytes (K, M, G) from 1K to 1024G, not '1000'",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(take_setting_lines("HeadTimeout=soon\n", "f.conf", t, true),
                       "f.conf:1: HeadTimeout takes seconds (more than 0 to 604800), not 'soon'",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(take_setting_lines("HeadTimeout=0\n", "f.conf", t, true), doctest::Contains("HeadTimeout"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(take_setting_lines("PartitionName=a MaxTasks=3\n", "f.conf", t, true),
                       doctest::Contains("lines of their own"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(take_setting_lines("MaxTasks\n", "f.conf", t, true), doctest::Contains("f.conf:1: MaxTasks"),
                       std::invalid_argument);
  CHECK(k.tasks == 1000);  // nothing bad was stored
  t[1].typed = "-3";
  const auto why = apply_typed_flags(t);
  REQUIRE(why);
  CHECK(*why == "--max-tasks: MaxTasks takes a whole number from 1 to 100000, not '-3'");
  t[1].typed.clear();
  t[5].typed = "x";
  CHECK(*apply_typed_flags(t) == "--flag-only: --flag-only takes a whole number from 1 to 1099511627776, not 'x'");
}

TEST_CASE("a flag's help names its default as it would be typed and its config key") {
  knobs k;
  const auto t = k.table();
  CHECK(setting_help(t[2]) == "body bytes (default 16M; aqs.conf MaxBody=)");
  CHECK(setting_help(t[3]) == "head seconds (default 5; aqs.conf HeadTimeout=)");
  CHECK(setting_help(t[5]) == "no key (default 64)");
  k.head = 250ms;
  CHECK(setting_text(t[3]) == "0.25");
}

TEST_CASE("a number setting (FaucetsRate) takes decimals within its bounds from the file or its flag, else one line") {
  double rate = 1.0;
  std::vector<setting> t{number_setting("FaucetsRate", "--faucets-rate", rate, "credits per processor-second", 0, 1e6)};
  const std::string rest = take_setting_lines("FaucetsRate=2.5\nPartitionName=debug Nodes=ALL\n", "aqs.conf", t, true);
  CHECK(rate == 2.5);
  CHECK(rest == "\nPartitionName=debug Nodes=ALL\n");
  CHECK(setting_help(t[0]) == "credits per processor-second (default 2.5; aqs.conf FaucetsRate=)");
  for (const char* bad : {"cheap", "-1", "1e7", "nan", "inf", ""}) {
    CAPTURE(bad);
    try {
      take_setting_lines(std::string("FaucetsRate=") + bad + "\n", "aqs.conf", t, true);
      FAIL("no error");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()) ==
            std::string("aqs.conf:1: FaucetsRate takes a number from 0 to 1000000, not '") + bad + "'");
    }
  }
  CHECK(rate == 2.5);  // nothing changed
  t[0].typed = "0.75";
  CHECK_FALSE(apply_typed_flags(t));
  CHECK(rate == 0.75);
  t[0].typed = "lots";
  CHECK(apply_typed_flags(t) == std::optional<std::string>("--faucets-rate: FaucetsRate takes a number from 0 to 1000000, not 'lots'"));
}
