// Unit tests of the listed job and node objects (fjobs/fnodes --json).
#include <doctest/doctest.h>

#include <string>

#include "protocol/errors.hpp"
#include "protocol/results.hpp"
#include "samples.hpp"

using namespace aqs::protocol;
using aqs::core::job_state;
using nlohmann::json;

namespace {
using aqs::test::sample_job_info;

std::string error_of(const json& j) {
  try {
    parse_job_list(j);
  } catch (const protocol_error& e) {
    CHECK(e.code() == error_code::bad_request);
    return e.what();
  }
  FAIL("no error");
  return "";
}
}  // namespace

TEST_CASE("a job object carries every field the fjobs --json contract names") {
  const json j = to_json(sample_job_info());
  for (const char* key : {"id", "name", "user", "state", "adaptive", "min_pe", "max_pe", "procs", "nprocs",
                          "submit_time", "start_time", "end_time", "exit_code"}) {
    CAPTURE(key);
    CHECK(j.contains(key));
  }
  CHECK(j["end_time"].is_null());
  CHECK(j["exit_code"].is_null());
  CHECK(j["state"] == "RUNNING");
}

TEST_CASE("job and node objects round-trip through JSON") {
  const job_info j = sample_job_info();
  CHECK(parse_job_info(to_json(j)) == j);
  node_info n;
  n.name = "node1";
  n.state = node_state::drain;
  n.first_proc = 4;
  n.nprocs = 4;
  n.procs = "4-7";
  n.jobs = {42};
  n.memory_mb = 16000;
  CHECK(parse_node_info(to_json(n)) == n);
  const json reply = {{"nodes", json::array({to_json(n)})}};
  CHECK(parse_node_list(reply) == std::vector<node_info>{n});
}

TEST_CASE("a bad job in a list reply is named by its index and field") {
  json bad = to_json(sample_job_info());
  bad["state"] = "SLEEPING";
  const json reply = {{"jobs", json::array({to_json(sample_job_info()), bad})}};
  CHECK(error_of(reply).find("'jobs[1].state'") != std::string::npos);
  json mism = to_json(sample_job_info());
  mism["nprocs"] = 3;
  CHECK(error_of(json{{"jobs", json::array({mism})}}).find("'jobs[0].nprocs'") != std::string::npos);
  CHECK(error_of(json{{"jobs", 3}}).find("'jobs'") != std::string::npos);
  CHECK(error_of(json{{"jobs", json::array({1})}}).find("'jobs[0]'") != std::string::npos);
  CHECK(error_of(json::object()).find("'jobs' is missing") != std::string::npos);
}

TEST_CASE("node states have the spellings fnodes shows") {
  CHECK(to_string(node_state::up) == "UP");
  CHECK(parse_node_state("DOWN") == node_state::down);
  CHECK_FALSE(parse_node_state("down").has_value());
  json n = to_json(node_info{"n", node_state::up, 0, 1, "0", {}, 0, 0, {}, {}});
  n["state"] = "IDLE";
  CHECK_THROWS_AS(parse_node_info(n), protocol_error);
}

TEST_CASE("a job written as text is the same bytes as the JSON object dumped") {
  job_info j = sample_job_info();
  std::string out;
  append_json(out, j);
  CHECK(out == to_json(j).dump());
  // Unset times, an exit code, and names that need escaping.
  j.start_time.reset();
  j.walltime_s.reset();
  j.end_time = "2026-11-21T21:05:00.000Z";
  j.exit_code = 3;
  j.adaptive = false;
  j.name = std::string("q\"b\\s/\n\t\r\b\f\x01\x1f\x7f") + "h\xc3\xa9";
  j.user = "";
  j.procs.clear();
  j.nprocs = 0;
  out.clear();
  append_json(out, j);
  CHECK(out == to_json(j).dump());
  // What a client reads back (names with control characters are refused there).
  j.name = "q\"b\\s/h\xc3\xa9";
  j.user = "alice";
  out.clear();
  append_json(out, j);
  CHECK(out == to_json(j).dump());
  CHECK(parse_job_info(json::parse(out)) == j);
  // An adaptive job's preferred size (--pref) only when it gave one.
  CHECK(out.find("pref_pe") == std::string::npos);
  j.pref_pe = 6;
  out.clear();
  append_json(out, j);
  CHECK(out == to_json(j).dump());
  CHECK(out.find("\"pref_pe\":6") != std::string::npos);
  CHECK(parse_job_info(json::parse(out)) == j);
}

TEST_CASE("a job's usage fields (issue 32) are left out until set, and written as text in nlohmann's order") {
  job_info j = sample_job_info();
  std::string out;
  append_json(out, j);
  for (const char* key : {"account", "alloc_cpu_ms", "user_cpu_us", "system_cpu_us", "max_rss_kb", "measured_nodes",
                          "mem_per_node_mb", "mem_per_cpu_mb"}) {
    CHECK(out.find(std::string("\"") + key + "\"") == std::string::npos);
  }
  j.account = "physics";
  j.alloc_cpu_ms = 195'400;
  j.user_cpu_us = 2'000'123;
  j.system_cpu_us = 10'000;
  j.max_rss_kb = 102'456;
  j.measured_nodes = 2;
  j.mem_per_node_mb = 1024;
  j.mem_per_cpu_mb = 256;
  out.clear();
  append_json(out, j);
  CHECK(out == to_json(j).dump());
  CHECK(parse_job_info(json::parse(out)) == j);
  // Only some of them.
  j.user_cpu_us.reset();
  j.account.reset();
  j.mem_per_cpu_mb.reset();
  out.clear();
  append_json(out, j);
  CHECK(out == to_json(j).dump());
  CHECK(parse_job_info(json::parse(out)) == j);
  // Nonsense is refused with the field named.
  json bad = to_json(j);
  bad["max_rss_kb"] = -1;
  CHECK_THROWS_AS(parse_job_info(bad), protocol_error);
}
