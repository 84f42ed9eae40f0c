// srun's tasks: its task options, the --multi-prog file, which node each
// task is on, and the plan passed to the task wrapper.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "slurm/slurm_commands.hpp"
#include "slurm/srun_step.hpp"
#include "cmdline/usage_error.hpp"

using namespace aqs;

namespace {

std::vector<std::string> words(std::initializer_list<const char*> w) { return {w.begin(), w.end()}; }

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("srun's -l, --multi-prog and --overlap shape the tasks and are taken off what goes to the allocation") {
  const auto t = slurm::split_task_options(words({"-n", "4", "-l", "--multi-prog", "--overlap", "-t", "5"}));
  CHECK(t.label);
  CHECK(t.multi_prog);
  CHECK(t.overlap);
  CHECK_FALSE(slurm::split_task_options(words({"-l"})).overlap);
  CHECK(t.rest == words({"-n", "4", "-t", "5"}));
  CHECK_FALSE(slurm::split_task_options(words({"--label"})).multi_prog);
  CHECK(slurm::split_task_options(words({"--label"})).label);
}

TEST_CASE("a --multi-prog file picks each task's command with %t and %o, as Slurm's") {
  const auto lines = slurm::parse_multi_prog(
      "# comment\n"
      "\n"
      "0      echo master %t\n"
      "1-3,6  echo 'worker x' %t %o  # trailing comment\n"
      "*      echo \"rest\" %t\n");
  REQUIRE(lines.size() == 3);
  CHECK(slurm::multi_prog_command(lines, 0) == words({"echo", "master", "0"}));
  CHECK(slurm::multi_prog_command(lines, 2) == words({"echo", "worker x", "2", "1"}));
  CHECK(slurm::multi_prog_command(lines, 6) == words({"echo", "worker x", "6", "3"}));
  CHECK(slurm::multi_prog_command(lines, 4) == words({"echo", "rest", "4"}));
  slurm::check_multi_prog(lines, 8);

  const auto partial = slurm::parse_multi_prog("0-1 true\n3 false\n");
  CHECK_FALSE(slurm::multi_prog_command(partial, 2).has_value());
  CHECK(error_of([&] { slurm::check_multi_prog(partial, 4); }) == "--multi-prog: no program for task 2 (the step has 4 tasks)");
  slurm::check_multi_prog(partial, 2);
  CHECK(error_of([] { slurm::parse_multi_prog("x-1 true\n"); }) == "--multi-prog line 1: invalid task list 'x-1'");
  CHECK(error_of([] { slurm::parse_multi_prog("\n3-1 true\n"); }) == "--multi-prog line 2: invalid task list '3-1'");
  CHECK(error_of([] { slurm::parse_multi_prog("0\n"); }) == "--multi-prog line 1: no program for tasks '0'");
  CHECK(error_of([] { slurm::parse_multi_prog("0 echo 'open\n"); }) == "--multi-prog line 1: unterminated quote");
}

TEST_CASE("each task's node is its node's place in the job's sorted node list") {
  // Map order node3 then node1; SLURM_NODEID counts in the sorted list.
  CHECK(slurm::task_node_ids("node3:4-5,node1:0-1", "2(x2)", "node[1,3]", 4) ==
        std::vector<std::int64_t>{1, 1, 0, 0});
  CHECK(slurm::task_node_ids("a:0-3,b:4-5", "4,2", "a,b", 3) == std::vector<std::int64_t>{0, 0, 0});
  CHECK(slurm::task_node_ids("a:0-1,b:2-3", "1(x2)", "a,b", 2) == std::vector<std::int64_t>{0, 1});
  // Entries of one node (processors not contiguous) are one node.
  CHECK(slurm::task_node_ids("a:0,a:2,b:5", "2,1", "a,b", 3) == std::vector<std::int64_t>{0, 0, 1});
  CHECK(slurm::join_runs({0, 0, 1, 1, 1}) == "0*2,1*3");
  CHECK(slurm::split_runs("0*2,1*3") == std::vector<std::int64_t>{0, 0, 1, 1, 1});
  CHECK(slurm::split_runs("") .empty());
}

TEST_CASE("a step's own -c and --ntasks-per-node place its tasks over the job's processors, block by node") {
  // A job of 4 tasks, 2 on each of node3 (map order first) and node1.
  const std::string text = "rank 0=node3 slot=4\nrank 1=node3 slot=5\nrank 2=node1 slot=0\nrank 3=node1 slot=1\n";
  const auto job = slurm::read_job_slots(text, "node3:4-5,node1:0-1", "2(x2)", "node[1,3]");
  REQUIRE(job.count == 4);
  REQUIRE(job.nodes.size() == 2);
  CHECK(job.nodes[0].id == 1);
  CHECK(job.nodes[1].tasks == std::vector<std::vector<std::size_t>>{{2}, {3}});
  auto placed = slurm::place_step(job, {2, std::nullopt, 1, std::nullopt});
  CHECK(placed.rankfile == "rank 0=node3 slot=4\nrank 1=node1 slot=0\n");
  CHECK(placed.node_ids == std::vector<std::int64_t>{1, 0});
  CHECK(placed.slots == std::vector<std::size_t>{0, 2});
  placed = slurm::place_step(job, {2, 2, std::nullopt, std::nullopt});
  CHECK(placed.rankfile == "rank 0=node3 slot=4,5\nrank 1=node1 slot=0,1\n");
  CHECK(placed.node_ids == std::vector<std::int64_t>{1, 0});
  // Fewer tasks than the job's: the first node first, as Slurm's block.
  placed = slurm::place_step(job, {3, std::nullopt, 2, std::nullopt});
  CHECK(placed.node_ids == std::vector<std::int64_t>{1, 1, 0});
  // Without a layout of its own: the job's first tasks, as the job's rankfile.
  placed = slurm::place_step(job, {3, std::nullopt, std::nullopt, std::nullopt});
  CHECK(placed.rankfile == "rank 0=node3 slot=4\nrank 1=node3 slot=5\nrank 2=node1 slot=0\n");
  // A -c job's ranks have several slots; the step may cut them otherwise.
  const auto wide = slurm::read_job_slots("rank 0=a slot=0,1\nrank 1=b slot=2-3\n", "a:0-1,b:2-3", "1(x2)", "a,b");
  placed = slurm::place_step(wide, {4, 1, std::nullopt, std::nullopt});
  CHECK(placed.rankfile == "rank 0=a slot=0\nrank 1=a slot=1\nrank 2=b slot=2\nrank 3=b slot=3\n");
  CHECK(placed.node_ids == std::vector<std::int64_t>{0, 0, 1, 1});
  placed = slurm::place_step(wide, {2, std::nullopt, std::nullopt, std::nullopt});
  CHECK(placed.rankfile == "rank 0=a slot=0,1\nrank 1=b slot=2-3\n");  // the job's own lines
  // What does not fit is Slurm's refusal, with the room there is.
  CHECK(error_of([&] { slurm::place_step(job, {3, 2, std::nullopt, std::nullopt}); }) ==
        "More processors requested than permitted: the job's allocation has room for 2 tasks of 2 processors, not 3");
  CHECK(error_of([&] { slurm::place_step(job, {3, 1, 1, std::nullopt}); }) ==
        "More processors requested than permitted: the job's allocation has room for 2 tasks of 1 processor at 1 "
        "per node, not 3");
  // A rankfile that is not the agent's, or disagrees with the job's layout.
  CHECK(error_of([&] { slurm::read_job_slots("rank 0 node3\n", "node3:4", "1", "node3"); }).find("line 1") !=
        std::string::npos);
  CHECK(error_of([&] { slurm::read_job_slots(text, "node3:4-5,node1:0-1", "2", "node[1,3]"); }) ==
        "the job's rankfile has 4 ranks where SLURM_TASKS_PER_NODE has 2 tasks");
}

TEST_CASE("an agent's --procs beyond its cores: a node's processors are the map's, several on one cpu") {
  // 4 processors on cpus 0 and 1 of each node (round-robin), 2 tasks of -c 2.
  const std::string text = "rank 0=a slot=0,1\nrank 1=a slot=0,1\nrank 2=b slot=0,1\nrank 3=b slot=0,1\n";
  const auto job = slurm::read_job_slots(text, "a:0-3,b:4-7", "2(x2)", "a,b");
  CHECK(job.count == 8);
  CHECK(job.nodes[0].cpus == std::vector<std::string>{"0", "1", "0", "1"});
  CHECK(job.nodes[1].tasks == std::vector<std::vector<std::size_t>>{{4, 5}, {6, 7}});
  // 8 tasks of one processor fit; two steps of 4 take different ones.
  auto placed = slurm::place_step(job, {8, 1, std::nullopt, std::nullopt});
  CHECK(placed.node_ids == std::vector<std::int64_t>{0, 0, 0, 0, 1, 1, 1, 1});
  CHECK(placed.rankfile.starts_with("rank 0=a slot=0\nrank 1=a slot=1\nrank 2=a slot=0\n"));
  placed = slurm::place_step(job, {1, 4, std::nullopt, std::nullopt});
  CHECK(placed.rankfile == "rank 0=a slot=0,1\n");
  placed = slurm::place_step(job, {2, std::nullopt, std::nullopt, std::nullopt}, {true, true, false, false});
  CHECK(placed.slots == std::vector<std::size_t>{2, 3, 4, 5});
  // One processor a rank (no -c): 4 ranks on 2 cpus, each its own slot.
  const auto one = slurm::read_job_slots("rank 0=a slot=0\nrank 1=a slot=1\nrank 2=a slot=0\nrank 3=a slot=1\n",
                                         "a:0-3", "4", "a");
  CHECK(one.nodes[0].tasks == std::vector<std::vector<std::size_t>>{{0}, {1}, {2}, {3}});
  CHECK(slurm::place_step(one, {2, std::nullopt, std::nullopt, std::nullopt}, {true, false, false, false}).slots ==
        std::vector<std::size_t>{1, 2});
}

TEST_CASE("a step's -N spreads its tasks over that many of the job's nodes, each at least one") {
  const std::string text = "rank 0=a slot=0\nrank 1=a slot=1\nrank 2=b slot=0\nrank 3=b slot=1\n"
                           "rank 4=c slot=0\nrank 5=c slot=1\n";
  const auto job = slurm::read_job_slots(text, "a:0-1,b:2-3,c:4-5", "2(x3)", "a,b,c");
  auto placed = slurm::place_step(job, {2, std::nullopt, std::nullopt, 2});
  CHECK(placed.node_ids == std::vector<std::int64_t>{0, 1});
  placed = slurm::place_step(job, {4, std::nullopt, std::nullopt, 3});
  CHECK(placed.node_ids == std::vector<std::int64_t>{0, 0, 1, 2});
  placed = slurm::place_step(job, {2, std::nullopt, std::nullopt, 1});
  CHECK(placed.node_ids == std::vector<std::int64_t>{0, 0});
  // Fewer tasks than nodes: as many nodes as tasks.
  placed = slurm::place_step(job, {1, std::nullopt, std::nullopt, 3});
  CHECK(placed.node_ids == std::vector<std::int64_t>{0});
  // Nodes whose processors other steps hold are passed over.
  placed = slurm::place_step(job, {2, std::nullopt, std::nullopt, 2}, {true, true, false, false, false, false});
  CHECK(placed.node_ids == std::vector<std::int64_t>{1, 2});
  CHECK(error_of([&] { slurm::place_step(job, {4, std::nullopt, std::nullopt, 4}); }) ==
        "More processors requested than permitted: 4 nodes asked for, 3 in the job's allocation");
  CHECK(error_of([&] { slurm::place_step(job, {3, std::nullopt, std::nullopt, 1}); }).starts_with(
      "More processors requested than permitted: the job's allocation has room for 2 tasks"));
}

TEST_CASE("a step takes only the processors other running steps of the job do not hold") {
  const std::string text = "rank 0=a slot=0\nrank 1=a slot=1\nrank 2=b slot=0\nrank 3=b slot=1\n";
  const auto job = slurm::read_job_slots(text, "a:0-1,b:2-3", "2(x2)", "a,b");
  // Slots 0 and 2 (a's cpu 0, b's cpu 0) held by another step.
  const std::vector<bool> busy{true, false, true, false};
  auto placed = slurm::place_step(job, {2, std::nullopt, std::nullopt, std::nullopt}, busy);
  CHECK(placed.rankfile == "rank 0=a slot=1\nrank 1=b slot=1\n");
  CHECK(placed.slots == std::vector<std::size_t>{1, 3});
  CHECK(placed.node_ids == std::vector<std::int64_t>{0, 1});
  placed = slurm::place_step(job, {1, 1, std::nullopt, std::nullopt}, busy);
  CHECK(placed.rankfile == "rank 0=a slot=1\n");
  CHECK(error_of([&] { slurm::place_step(job, {3, std::nullopt, std::nullopt, std::nullopt}, busy); }) ==
        "More processors requested than permitted: the job's allocation has room for 2 more tasks of 1 processor, not 3");
  CHECK(error_of([&] { slurm::place_step(job, {1, 2, std::nullopt, std::nullopt}, busy); }).starts_with("More processors requested"));
}

TEST_CASE("steps of one job claim their processors from each other, and a step waits while they are held") {
  const std::string text = "rank 0=a slot=0\nrank 1=a slot=1\n";
  const auto job = slurm::read_job_slots(text, "a:0-1", "2", "a");
  const std::int64_t job_id = 900000000 + ::getpid();
  auto place = [&](std::int64_t n) {
    return [&job, n](const std::vector<bool>& busy) { return slurm::place_step(job, {n, std::nullopt, std::nullopt, std::nullopt}, busy); };
  };
  std::optional<slurm::step_claim> first(std::in_place, job_id, "cafe");
  const auto p1 = first->claim(job.count, place(1), [] {});
  CHECK(p1.slots == std::vector<std::size_t>{0});
  // A second step (another open file, as another srun) gets the other cpu.
  slurm::step_claim second(job_id, "cafe");
  const auto p2 = second.claim(job.count, place(1), [] {});
  CHECK(p2.slots == std::vector<std::size_t>{1});
  // A third must wait: it gets slot 0 once the first step ends.
  slurm::step_claim third(job_id, "cafe");
  bool waited = false;
  std::thread ender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    first.reset();
  });
  const auto p3 = third.claim(job.count, place(1), [&] { waited = true; });
  ender.join();
  CHECK(waited);
  CHECK(p3.slots == std::vector<std::size_t>{0});
  // What can never fit is refused at once, not waited for.
  slurm::step_claim fourth(job_id, "cafe");
  CHECK(error_of([&] { fourth.claim(job.count, place(3), [] {}); }).starts_with("More processors requested"));
  std::filesystem::remove("/tmp/aqs-steps-" + std::to_string(::getuid()) + "-cafe-" + std::to_string(job_id) + ".slots");
}

TEST_CASE("the task plan goes to the wrapper and back, and tells each task who it is") {
  slurm::task_plan p;
  p.ntasks = 4;
  p.step_id = 2;
  p.node_ids = {0, 0, 1, 1};
  p.label = true;
  p.multi_prog = "/home/a/m.conf";
  p.command = words({"sh", "-c", "echo --"});
  const auto back = slurm::parse_task_plan(slurm::task_plan_words(p));
  CHECK(back.ntasks == 4);
  CHECK(back.step_id == 2);
  CHECK(back.node_ids == p.node_ids);
  CHECK(back.label);
  CHECK(back.multi_prog == p.multi_prog);
  CHECK(back.command == p.command);
  const auto v = slurm::task_variables(p, 3, 1);
  auto get = [&](const std::string& k) {
    for (const auto& [key, value] : v) {
      if (key == k) return value;
    }
    return std::string("(unset)");
  };
  CHECK(get("SLURM_PROCID") == "3");
  CHECK(get("SLURM_LOCALID") == "1");
  CHECK(get("SLURM_NODEID") == "1");
  CHECK(get("SLURM_NTASKS") == "4");
  CHECK(get("SLURM_STEP_ID") == "2");
  CHECK(get("SLURM_STEP_NUM_NODES") == "2");
  CHECK(get("SLURM_CPUS_PER_TASK") == "(unset)");
  // A step's own -c reaches its tasks through the plan, on every node.
  p.cpus_per_task = 2;
  const auto wide = slurm::parse_task_plan(slurm::task_plan_words(p));
  CHECK(wide.cpus_per_task == 2);
  bool told = false;
  for (const auto& [key, value] : slurm::task_variables(wide, 0, 0)) told = told || (key == "SLURM_CPUS_PER_TASK" && value == "2");
  CHECK(told);
  CHECK(error_of([] { slurm::parse_task_plan(words({"ntasks=2"})); }) == "a task plan ends with -- COMMAND");
  CHECK(error_of([] { slurm::parse_task_plan(words({"bogus=1", "--", "true"})); }) == "unknown task plan word 'bogus=1'");
}

TEST_CASE("sbatch's -W/--wait is taken off its options, never off the script's arguments") {
  auto a = words({"-J", "--wait", "--wait", "-t", "5", "job.sh", "--wait"});
  CHECK(slurm::take_flag(a, {"-W", "--wait"}));
  CHECK(a == words({"-J", "--wait", "-t", "5", "job.sh", "--wait"}));
  auto b = words({"-W", "--wrap=true"});
  CHECK(slurm::take_flag(b, {"-W", "--wait"}));
  CHECK(b == words({"--wrap=true"}));
  auto c = words({"job.sh", "-W"});
  CHECK_FALSE(slurm::take_flag(c, {"-W", "--wait"}));
}

TEST_CASE("steps are numbered per job and cluster from the user's own counter") {
  const std::int64_t job = 900'000'000 + ::getpid();
  const std::string file = "/tmp/aqs-steps-" + std::to_string(::getuid()) + "-abc-" + std::to_string(job);
  std::filesystem::remove(file);
  CHECK(slurm::next_step_id(job, "abc") == 0);
  CHECK(slurm::next_step_id(job, "abc") == 1);
  CHECK(slurm::next_step_id(job, "def") == 0);  // another cluster's job of that number
  CHECK(slurm::next_step_id(job, "abc") == 2);
  std::filesystem::remove(file);
  std::filesystem::remove("/tmp/aqs-steps-" + std::to_string(::getuid()) + "-def-" + std::to_string(job));
}

TEST_CASE("a job's first step removes the user's step counters untouched for 30 days, and only those") {
  const std::int64_t job = 800'000'000 + ::getpid();
  const std::string dir = "/tmp/aqs-steps-" + std::to_string(::getuid()) + "-";
  const std::string old_file = dir + "aaa-" + std::to_string(job);
  const std::string recent = dir + "bbb-" + std::to_string(job);
  std::ofstream(old_file) << "3";
  std::ofstream(recent) << "5";
  const auto long_ago = std::filesystem::file_time_type::clock::now() - std::chrono::hours(24 * 40);
  std::filesystem::last_write_time(old_file, long_ago);
  CHECK(slurm::next_step_id(job, "ccc") == 0);
  CHECK_FALSE(std::filesystem::exists(old_file));
  CHECK(std::filesystem::exists(recent));
  CHECK(slurm::next_step_id(job, "bbb") == 5);
  for (const char* c : {"bbb-", "ccc-"}) std::filesystem::remove(dir + c + std::to_string(job));
}
