// usage_format (issue 32): sacct's usage fields and fjobs --efficiency,
// checked against what Slurm 22.05's sacct and seff print.
#include <doctest/doctest.h>

#include <ctime>

#include <nlohmann/json.hpp>

#include "slurm/slurm_format.hpp"

using namespace aqs;
using core::job_state;

namespace {

// A finished job that ran 65 s (10:00:05 to 10:01:10) on 4 processors of node1.
protocol::job_info finished(std::int64_t id = 7) {
  protocol::job_info j;
  j.id = id;
  j.name = "burn";
  j.user = "alice";
  j.state = job_state::completed;
  j.min_pe = j.max_pe = 4;
  j.exit_code = 0;
  j.submit_time = "2026-03-01T10:00:00.000Z";
  j.start_time = "2026-03-01T10:00:05.000Z";
  j.end_time = "2026-03-01T10:01:10.000Z";
  return j;
}

slurm::job_view view(const protocol::job_info& j, std::vector<std::string> hosts = {"node1"}) {
  slurm::job_view v = slurm::make_view(j, nullptr);
  v.hosts = std::move(hosts);  // a finished job's hosts come from its history
  return v;
}

constexpr std::time_t k_now = 1772359300;

std::string one_field(const char* field, const slurm::job_view& v) {
  return slurm::render_sacct(slurm::parse_sacct_fields(field), {v}, false, slurm::sacct_style::parsable2, k_now);
}

}  // namespace

TEST_CASE("TotalCPU prints as Slurm's _elapsed_time: MM:SS.mmm, 00:MM:SS, HH:MM:SS and D-HH:MM:SS") {
  CHECK(slurm::sacct_cpu_time(2'345'678) == "00:02.345");
  CHECK(slurm::sacct_cpu_time(62'000'000) == "00:01:02");  // whole seconds: no milliseconds
  CHECK(slurm::sacct_cpu_time(61'500'000) == "01:01.500");
  CHECK(slurm::sacct_cpu_time(3'723'250'000) == "01:02:03");  // from an hour: no milliseconds
  CHECK(slurm::sacct_cpu_time(90'061'000'000) == "1-01:01:01");
  CHECK(slurm::sacct_cpu_time(0) == "00:00:00");
  CHECK(slurm::sacct_cpu_time(-5) == "00:00:00");
}

TEST_CASE("MaxRSS and memory TRES are converted exactly, as sacct's CONVERT_NUM_UNIT_EXACT does") {
  CHECK(slurm::sacct_memory(3'543'568) == "3543568K");  // not a multiple of 512 KiB: stays in K
  CHECK(slurm::sacct_memory(102'400) == "100M");
  CHECK(slurm::sacct_memory(1'234) == "1234K");
  CHECK(slurm::sacct_memory(2'621'440) == "2.50G");  // half values count as exact
  CHECK(slurm::sacct_memory(0) == "0");
  CHECK(slurm::slurm_exact_units(16384, 2) == "16G");
  CHECK(slurm::slurm_exact_units(4000, 2) == "4000M");
  CHECK(slurm::slurm_exact_units(1000, 2) == "1000M");
}

TEST_CASE("AllocTRES is billing, cpu, mem (only when asked), node, as Slurm prints it") {
  auto j = finished();
  CHECK(slurm::alloc_tres(view(j)) == "billing=4,cpu=4,node=1");
  j.mem_per_node_mb = 16384;
  CHECK(slurm::alloc_tres(view(j)) == "billing=4,cpu=4,mem=16G,node=1");
  j.mem_per_node_mb.reset();
  j.mem_per_cpu_mb = 1000;
  CHECK(slurm::alloc_tres(view(j)) == "billing=4,cpu=4,mem=4000M,node=1");
  CHECK(slurm::alloc_tres(view(j, {"node1", "node2"})) == "billing=4,cpu=4,mem=4000M,node=2");
  auto pending = finished();
  pending.state = job_state::pending;
  pending.start_time.reset();
  pending.end_time.reset();
  CHECK(slurm::alloc_tres(view(pending)) == "");
  CHECK(one_field("AllocTRES", view(pending)) == "\n");
}

TEST_CASE("sacct's usage fields: measured ones empty until measured, CPUTime from the usage record when there is one") {
  auto j = finished();
  // Nothing recorded: CPUTime is Elapsed x AllocCPUS, the measured fields are empty.
  CHECK(one_field("JobID,Elapsed,CPUTime,CPUTimeRAW,TotalCPU,UserCPU,SystemCPU,MaxRSS,Account", view(j)) ==
        "7|00:01:05|00:04:20|260|||||\n");
  // An adaptive job's usage record: the integral of its maps (here 3 processors on average).
  j.adaptive = true;
  j.alloc_cpu_ms = 195'400;
  j.account = "physics";
  j.user_cpu_us = 120'250'000;
  j.system_cpu_us = 1'500'000;
  j.max_rss_kb = 102'456;
  CHECK(one_field("JobID,CPUTime,CPUTimeRAW,TotalCPU,UserCPU,SystemCPU,MaxRSS,Account", view(j)) ==
        "7|00:03:15|195|02:01.750|02:00.250|00:01.500|102456K|physics\n");
  // Names match by prefix as sacct's do; User is not UserCPU.
  CHECK(slurm::parse_sacct_fields("totalcpu,maxrss,user,usercpu,sys")[2].name == "User");
  CHECK(slurm::parse_sacct_fields("totalcpu,maxrss,user,usercpu,sys")[3].name == "UserCPU");
  CHECK(slurm::parse_sacct_fields("totalcpu,maxrss,user,usercpu,sys")[4].name == "SystemCPU");
  // The table's widths are Slurm's (10), right-justified.
  const std::string table = slurm::render_sacct(slurm::parse_sacct_fields("TotalCPU,MaxRSS"), {view(j)}, true,
                                                slurm::sacct_style::table, k_now);
  CHECK(table == "  TotalCPU     MaxRSS \n---------- ---------- \n 02:01.750    102456K \n");
}

TEST_CASE("sacct --json carries CPU used and allocated TRES as Slurm 22.05's job objects do") {
  auto j = finished();
  j.mem_per_node_mb = 1024;
  j.user_cpu_us = 2'000'000;
  j.system_cpu_us = 500'000;
  const auto doc = nlohmann::json::parse(slurm::sacct_json({view(j)}, k_now));
  const auto& job = doc["jobs"][0];
  CHECK(job["time"]["total"]["seconds"] == 2);
  CHECK(job["time"]["total"]["microseconds"] == 500'000);
  CHECK(job["time"]["user"]["seconds"] == 2);
  CHECK(job["tres"]["allocated"][0]["type"] == "cpu");
  CHECK(job["tres"]["allocated"][1]["type"] == "mem");
  CHECK(job["tres"]["allocated"][1]["count"] == 1024);
  // Not measured: no CPU times at all (not zeros).
  const auto bare = nlohmann::json::parse(slurm::sacct_json({view(finished())}, k_now));
  CHECK_FALSE(bare["jobs"][0]["time"].contains("total"));
}

TEST_CASE("fjobs --efficiency prints seff's lines; CPU against core-walltime, memory against --mem") {
  auto j = finished();
  j.user_cpu_us = 60'000'000;
  j.system_cpu_us = 5'000'000;
  j.max_rss_kb = 102'400;
  j.mem_per_node_mb = 1024;
  const std::string text = slurm::efficiency_text(view(j), k_now);
  CHECK(text.find("Job ID: 7\n") != std::string::npos);
  CHECK(text.find("State: COMPLETED (exit code 0)\n") != std::string::npos);
  CHECK(text.find("Cores: 4\n") != std::string::npos);
  CHECK(text.find("CPU Utilized: 00:01:05\n") != std::string::npos);
  CHECK(text.find("CPU Efficiency: 25.00% of 00:04:20 core-walltime\n") != std::string::npos);
  CHECK(text.find("Job Wall-clock time: 00:01:05\n") != std::string::npos);
  CHECK(text.find("Memory Utilized: 100.00 MB\n") != std::string::npos);
  CHECK(text.find("Memory Efficiency: 9.77% of 1.00 GB\n") != std::string::npos);
  const auto doc = nlohmann::json::parse(slurm::efficiency_json(view(j), k_now));
  CHECK(doc["cpu_efficiency_pct"].get<double>() == doctest::Approx(25.0));
  CHECK(doc["core_walltime_s"].get<double>() == doctest::Approx(260.0));
  CHECK(doc["memory_efficiency_pct"].get<double>() == doctest::Approx(9.765625));
}

TEST_CASE("an adaptive job's efficiency is of the integral of its maps") {
  auto j = finished();
  j.adaptive = true;
  j.alloc_cpu_ms = 130'000;  // 2 processors on average over 65 s
  j.user_cpu_us = 65'000'000;
  j.system_cpu_us = 0;
  const std::string text = slurm::efficiency_text(view(j), k_now);
  CHECK(text.find("CPU Efficiency: 50.00% of 00:02:10 core-walltime (the integral of its processor maps)\n") !=
        std::string::npos);
}

TEST_CASE("an unmeasured job says so instead of printing zeros; a running job gets one line") {
  auto j = finished();
  const std::string text = slurm::efficiency_text(view(j), k_now);
  CHECK(text.find("CPU Utilized: (not measured)\n") != std::string::npos);
  CHECK(text.find("Memory Utilized: (not measured)\n") != std::string::npos);
  CHECK(text.find("Memory Efficiency: (no --mem or --mem-per-cpu was asked)\n") != std::string::npos);
  const auto doc = nlohmann::json::parse(slurm::efficiency_json(view(j), k_now));
  CHECK(doc["cpu_utilized_s"].is_null());
  CHECK(doc["cpu_efficiency_pct"].is_null());

  auto running = finished();
  running.state = job_state::running;
  running.end_time.reset();
  CHECK(slurm::efficiency_text(view(running), k_now) ==
        "Job 7 is RUNNING: its efficiency is known once it has ended\n");
  const auto r = nlohmann::json::parse(slurm::efficiency_json(view(running), k_now));
  CHECK(r["ended"] == false);
  CHECK_FALSE(r.contains("cpu_efficiency_pct"));
}

TEST_CASE("the integral of a job's maps over its history: suspended time and waiting excluded") {
  auto ev = [](const char* time, job_state st, const char* procs, const char* old = "") {
    protocol::job_history_event e;
    e.time = time;
    e.new_state = st;
    e.new_procs = procs;
    e.old_procs = old;
    return e;
  };
  const std::vector<protocol::job_history_event> h = {
      ev("2026-03-01T10:00:00.000Z", job_state::pending, ""),
      ev("2026-03-01T10:00:10.000Z", job_state::running, "1110"),          // 3 for 10 s
      ev("2026-03-01T10:00:20.000Z", job_state::suspended, "1110", "1110"),  // nothing for 30 s
      ev("2026-03-01T10:00:50.000Z", job_state::running, "1110"),          // 3 for 5 s
      ev("2026-03-01T10:00:55.000Z", job_state::resizing, "1100", "1110"),  // 3 until acknowledged: 1 s
      ev("2026-03-01T10:00:56.000Z", job_state::running, "1100"),          // 2 for 4.5 s
      ev("2026-03-01T10:01:00.500Z", job_state::completed, ""),
  };
  const auto s = slurm::map_integral(h);
  REQUIRE(s);
  CHECK(*s == doctest::Approx(30 + 15 + 3 + 9));
  // CPUTime uses it when the job has no usage record.
  slurm::job_view v = view(finished());
  v.map_seconds = *s;
  CHECK(slurm::alloc_cpu_seconds(v, k_now) == doctest::Approx(260));  // a rigid job: Elapsed x AllocCPUS
  v.info.adaptive = true;
  CHECK(slurm::alloc_cpu_seconds(v, k_now) == doctest::Approx(57));
  v.info.alloc_cpu_ms = 56'000;  // the usage record wins
  CHECK(slurm::alloc_cpu_seconds(v, k_now) == doctest::Approx(56));
  CHECK_FALSE(slurm::map_integral({ev("2026-03-01T10:00:00.000Z", job_state::pending, "")}).has_value());
  CHECK_FALSE(slurm::map_integral({ev("yesterday", job_state::running, "1")}).has_value());
}
