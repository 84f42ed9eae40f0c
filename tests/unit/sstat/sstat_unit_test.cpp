// sstat's pure parts (tools/node/job_stats, tools/slurm/sstat).
#include <doctest/doctest.h>

#include "slurm/slurm_commands.hpp"
#include "slurm/sstat.hpp"
#include "job_stats.hpp"

using namespace aqs;

namespace {

const std::string k_environ = std::string("PATH=/bin\0SLURM_STEP_ID=3\0SLURM_PROCID=1\0", 40);

}  // namespace

TEST_CASE("a /proc stat line, status and environ give a process's memory, CPU time, step and task") {
  // pid (comm with ") x") state ppid pgrp session ... utime=14 stime=15 cutime=16 cstime=17 ... vsize=23 rss=24
  const std::string stat =
      "4242 (a) x) S 1 4200 4100 0 -1 0 0 0 0 0 150 50 100 0 20 0 1 0 100 104857600 2560 18446744073709551615";
  const auto u = node::parse_proc_usage(stat, "Name:\ta\nUid:\t1001\t1001\t1001\t1001\nVmHWM:\t  20480 kB\n", k_environ,
                                        4, 100);
  REQUIRE(u);
  CHECK(u->pid == 4242);
  CHECK(u->pgid == 4200);
  CHECK(u->sid == 4100);
  CHECK(u->uid == 1001);
  CHECK(u->rss_kb == 2560 * 4);
  CHECK(u->vsize_kb == 102400);
  CHECK(u->hwm_kb == 20480);
  CHECK(u->cpu_ms == 3000);  // (150 + 50 + 100 + 0) ticks at 100 per second
  CHECK(u->step == "3");
  CHECK(u->task == 1);
  // Without Slurm's step in its environment: the batch step's one task.
  const auto b = node::parse_proc_usage(stat, "", std::string("SLURM_PROCID=5\0", 15), 4, 100);
  REQUIRE(b);
  CHECK(b->step == "batch");
  CHECK(b->task == 0);
  CHECK_FALSE(node::parse_proc_usage("4242 (a) S 1 2", "", "", 4, 100));
  CHECK_FALSE(node::parse_proc_usage("garbage", "", "", 4, 100));
}

TEST_CASE("processes are summed per task, steps come in Slurm's order and peaks only rise") {
  std::vector<node::proc_usage> p(3);
  p[0].pid = 10, p[0].step = "batch", p[0].rss_kb = 100, p[0].cpu_ms = 5;
  p[1].pid = 11, p[1].step = "0", p[1].task = 1, p[1].rss_kb = 300, p[1].vsize_kb = 900, p[1].hwm_kb = 500;
  p[2].pid = 12, p[2].step = "0", p[2].task = 1, p[2].rss_kb = 200, p[2].cpu_ms = 7;
  node::peak_table peaks;
  auto steps = node::group_usage(p, peaks);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].step == "0");
  CHECK(steps[1].step == "batch");
  REQUIRE(steps[0].tasks.size() == 1);
  CHECK(steps[0].tasks[0].rss_kb == 500);
  CHECK(steps[0].tasks[0].max_rss_kb == 500);
  CHECK(steps[0].tasks[0].cpu_ms == 7);
  CHECK(steps[0].tasks[0].pids == std::vector<pid_t>{11, 12});
  // Later, less memory: the peak stays.
  p[1].rss_kb = 10, p[2].rss_kb = 10, p[1].hwm_kb = 0;
  steps = node::group_usage(p, peaks);
  CHECK(steps[0].tasks[0].rss_kb == 20);
  CHECK(steps[0].tasks[0].max_rss_kb == 500);
  CHECK(steps[0].tasks[0].max_vsize_kb == 900);
}

TEST_CASE("the agent's stat socket is named per aqsd and node (one function, protocol/stat_socket, for both sides)") {
  CHECK(protocol::stat_socket_name("/a.sock", "n1") != protocol::stat_socket_name("/b.sock", "n1"));
  CHECK(protocol::stat_socket_name("/a.sock", "n1") != protocol::stat_socket_name("/a.sock", "n2"));
  CHECK(protocol::stat_socket_name("/a.sock", "n1") == protocol::stat_socket_name("/a.sock", "n1"));
  CHECK(protocol::stat_socket_name("/a.sock", "n1").front() == '\0');  // abstract: no file to squat on or leave behind
}

TEST_CASE("sstat's command line, as Slurm's getopt reads it") {
  auto parse = [](std::vector<std::string> a) { return slurm::parse_sstat_command_line(a); };
  auto c = parse({"-j", "12.batch,13", "-o", "JobID,MaxRSS", "--format=NTasks", "-P", "-n", "-a"});
  REQUIRE(c.jobs.size() == 2);
  CHECK(c.jobs[0].job_id == 12);
  CHECK(c.jobs[0].step == "batch");
  CHECK_FALSE(c.jobs[1].step);
  CHECK(c.fields == "JobID,MaxRSS,NTasks");
  CHECK(c.style == slurm::sacct_style::parsable2);
  CHECK_FALSE(c.header);
  CHECK(c.all_steps);
  CHECK(parse({"-j14.2"}).jobs.at(0).step == "2");
  CHECK(parse({"--jobs=15", "16"}).jobs.size() == 2);
  CHECK_THROWS_WITH_AS(parse({"--bogus"}), "unrecognized option '--bogus'\nTry \"sstat --help\" for more information",
                       slurm::usage_error);
  CHECK_THROWS_AS(parse({"-j"}), slurm::usage_error);
  CHECK_THROWS_WITH_AS(parse({"-j", "1.x"}), "Invalid job id: 1.x", slurm::command_error);
  CHECK_THROWS_AS(parse({"-j", "0"}), slurm::command_error);
}

TEST_CASE("sstat's fields match by prefix in its own order, with widths") {
  const auto f = slurm::parse_sstat_fields("jobid,maxrss%20,avecpu,ntask,maxvm");
  REQUIRE(f.size() == 5);
  CHECK(f[0].name == "JobID");
  CHECK(f[0].width == -12);
  CHECK(f[1].name == "MaxRSS");
  CHECK(f[1].width == 20);
  CHECK(f[2].name == "AveCPU");
  CHECK(f[3].name == "NTasks");
  CHECK(f[4].name == "MaxVMSize");
  CHECK(slurm::parse_sstat_fields("ave").at(0).name == "AveCPU");  // the first in the table
  CHECK_THROWS_WITH(slurm::parse_sstat_fields("JobID,Nope"), "Invalid field requested: \"Nope\"");
  CHECK(slurm::default_sstat_fields(false).size() == 47);
  CHECK(slurm::default_sstat_fields(true).size() == 3);
}

TEST_CASE("memory and CPU times are printed as Slurm's sstat prints them") {
  CHECK(slurm::sstat_memory(0, false) == "0");
  CHECK(slurm::sstat_memory(1, false) == "1K");
  CHECK(slurm::sstat_memory(65536, false) == "64M");
  CHECK(slurm::sstat_memory(1205, false) == "1.18M");
  CHECK(slurm::sstat_memory(3 * 1024 * 1024, false) == "3G");
  CHECK(slurm::sstat_memory(65536, true) == "65536K");
  CHECK(slurm::sstat_cpu_time(0) == "00:00:00");
  CHECK(slurm::sstat_cpu_time(75) == "00:01:15");
  CHECK(slurm::sstat_cpu_time(3725) == "01:02:05");
  CHECK(slurm::sstat_cpu_time(90061) == "1-01:01:01");
}

TEST_CASE("a step's tasks on several nodes aggregate as Slurm's: maxima with their task and node, averages per task") {
  std::vector<slurm::step_stat> steps;
  CHECK(slurm::merge_agent_reply(
            R"({"node":"n1","job_id":7,"steps":[{"step":"0","tasks":[{"task":0,"rss_kb":1024,"max_rss_kb":2048,"vsize_kb":4096,"max_vsize_kb":4096,"cpu_ms":4000,"pids":[5]}]},{"step":"batch","tasks":[{"task":0,"rss_kb":1,"max_rss_kb":1,"vsize_kb":1,"max_vsize_kb":1,"cpu_ms":0,"pids":[4]}]}]})",
            7, steps) == "");
  CHECK(slurm::merge_agent_reply(
            R"({"node":"n2","job_id":7,"steps":[{"step":"0","tasks":[{"task":1,"rss_kb":3072,"max_rss_kb":3072,"vsize_kb":2048,"max_vsize_kb":8192,"cpu_ms":2000,"pids":[9]}]}]})",
            7, steps) == "");
  CHECK(slurm::merge_agent_reply(R"({"error":"permission_denied","message":"no"})", 7, steps) == "permission_denied");
  CHECK_THROWS(slurm::merge_agent_reply("{", 7, steps));
  REQUIRE(steps.size() == 2);
  const auto first = slurm::select_steps(steps, std::nullopt, false);
  REQUIRE(first.size() == 1);
  CHECK(first[0].step == "0");
  CHECK(slurm::select_steps(steps, std::nullopt, true).size() == 2);
  CHECK(slurm::select_steps(steps, std::string("batch"), false).at(0).step == "batch");
  CHECK(slurm::select_steps(steps, std::string("3"), false).empty());
  const auto f = slurm::parse_sstat_fields(
      "JobID,MaxRSS,MaxRSSNode,MaxRSSTask,AveRSS,MaxVMSize,MaxVMSizeNode,AveCPU,MinCPU,MinCPUTask,NTasks,Nodelist,Pids,MaxPages");
  CHECK(slurm::render_sstat_row(f, first[0], slurm::sacct_style::parsable2, false) ==
        "7.0|3M|n2|1|2M|8M|n2|00:00:03|00:00:02|1|2|n[1-2]|5,9|\n");
  CHECK(slurm::render_sstat_header(slurm::parse_sstat_fields("JobID,NTasks"), slurm::sacct_style::table) ==
        "JobID          NTasks \n------------ -------- \n");
}
