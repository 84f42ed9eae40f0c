// Slurm-style jobs end to end on a real cluster (aqsd, agents, the
// commands as processes, as an unprivileged user): geometry refused at
// submission with its reason, Slurm's variables in the job, a job over its
// --mem ending OUT_OF_MEMORY, job arrays (one request, throttle, %A_%a
// output names, fkill of one task and of a whole array), and frun inside a
// job starting a step in the job's own allocation.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <unistd.h>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "e2e.hpp"

namespace {

// Three nodes of 4 processors, 4G of memory and 2 GPUs each, all up.
struct small_cluster {
  test::test_database db;
  test::cluster c{test::nodes_of(db, 3, 4, {"--memory", "4G", "--gpus", "2"})};
  small_cluster() { c.wait_nodes_up(3); }
};

std::int64_t id_of(const test::run_result& r) {
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  return std::stoll(r.out);
}

std::map<std::string, std::string> env_of(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

}  // namespace

TEST_CASE_FIXTURE(small_cluster, "a geometry the cluster can never give is refused at submission with its reason") {
  const auto u = c.user("aqs-test-geo");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-N", "2", "-n", "32"}, "tasks"},
      {{"-c", "8"}, "largest node has 4"},
      {{"--mem=8G"}, "MB of memory"},
      {{"--gres=gpu:3"}, "GPUs per node"},
      {{"-N", "4"}, "at least 4 nodes"},
  };
  for (const auto& [opts, why] : cases) {
    std::vector<std::string> args = opts;
    args.insert(args.end(), {"--wrap", "true"});
    CAPTURE(opts.front());
    const auto r = c.cmd(bin().fsub, args, &u);
    CHECK(r.status != 0);
    CHECK(r.err.find("can never run on this cluster") != std::string::npos);
    CHECK(r.err.find(why) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  CHECK(c.jobs().empty());  // nothing was stored
  // A misspelt option is refused before anything is sent.
  const auto typo = c.cmd(bin().fsub, {"--ntask-per-node=2", "--wrap", "true"}, &u);
  CHECK(typo.status != 0);
  CHECK(typo.err.find("did you mean '--ntasks-per-node'") != std::string::npos);
}

TEST_CASE_FIXTURE(small_cluster, "a Slurm batch job gets its geometry and Slurm's variables, and a step inside it uses its allocation") {
  const auto u = c.user("aqs-test-env");
  const fs::path script = u.home / "env.sh";
  {
    std::ofstream s(script);
    s << "#!/bin/sh\n"
         "#SBATCH -N 2 --ntasks-per-node=2 -c 2 --mem=1G -J envjob -A myproj\n"
         "#SBATCH -o env-%j-%N.out\n"
         "env | grep -E '^(SLURM|AQS)_' | sort\n"
         "echo STEP\n"
         "'" << bin().frun << "' --no-mpi /bin/sh -c 'echo task $(hostname) $OMPI_COMM_WORLD_RANK'\n";
  }
  REQUIRE(::chown(script.c_str(), u.uid, u.gid) == 0);
  const auto r = c.cmd(bin().fsub, {"--parsable", script.string()}, &u, u.home.string());
  // -A is kept on the job and acted on by aqsd's accounting: no warning.
  CHECK(r.err.find("--account") == std::string::npos);
  const std::int64_t id = id_of(r);
  const auto done = c.wait_state(id, {job_state::completed, job_state::failed}, 120s);
  CHECK(done.state == job_state::completed);
  // %N: the node its script ran on.
  fs::path out;
  for (const auto& f : fs::directory_iterator(u.home)) {
    if (f.path().filename().string().rfind("env-" + std::to_string(id) + "-node", 0) == 0) out = f.path();
  }
  REQUIRE_FALSE(out.empty());
  const std::string text = slurp(out);
  auto env = env_of(text.substr(0, text.find("STEP")));
  CHECK(env["SLURM_JOB_ID"] == std::to_string(id));
  CHECK(env["SLURM_JOB_NAME"] == "envjob");
  CHECK(env["SLURM_NTASKS"] == "4");
  CHECK(env["SLURM_CPUS_PER_TASK"] == "2");
  CHECK(env["SLURM_NNODES"] == "2");
  CHECK(env["SLURM_TASKS_PER_NODE"] == "2(x2)");
  CHECK(env["SLURM_JOB_CPUS_PER_NODE"] == "4(x2)");
  CHECK(env["SLURM_MEM_PER_NODE"] == "1024");
  CHECK(env["SLURM_JOB_ACCOUNT"] == "myproj");
  CHECK(env["SLURM_SUBMIT_DIR"] == u.home.string());
  CHECK(env["SLURM_JOB_NODELIST"].find("node[") == 0);
  CHECK(env.count("OMP_NUM_THREADS") == 0);  // left to the script, as Slurm does
  // The step ran one task per task of the job, two on each of its nodes.
  std::multiset<std::string> ranks;
  std::istringstream lines(text.substr(text.find("STEP")));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("task ", 0) == 0) ranks.insert(line);
  }
  CHECK(ranks.size() == 4);
  // No second job was made for the step.
  CHECK(c.jobs().size() == 1);
}

TEST_CASE_FIXTURE(small_cluster, "a job over its --mem ends OUT_OF_MEMORY, and one within it completes") {
  const auto u = c.user("aqs-test-oom");
  // tail holds a 200 MB line for 5 s: over a 100 MB limit, within a 1 GB one (tail may hold twice the line while it grows its buffer).
  const std::string hog = "{ head -c 200000000 /dev/zero; sleep 5; } | tail -n 1 | wc -c";
  const auto over = id_of(c.cmd(bin().fsub, {"--parsable", "--mem=100M", "--wrap", hog}, &u, u.home.string()));
  const auto within = id_of(c.cmd(bin().fsub, {"--parsable", "--mem=1G", "--wrap", hog}, &u, u.home.string()));
  CHECK(c.wait_state(over, {job_state::out_of_memory, job_state::completed, job_state::failed}, 60s).state ==
        job_state::out_of_memory);
  CHECK(c.wait_state(within, {job_state::out_of_memory, job_state::completed, job_state::failed}, 60s).state ==
        job_state::completed);
  const auto h = c.cmd(bin().fjobs, {"--history", std::to_string(over)}, &u);
  CHECK(h.out.find("memory limit exceeded") != std::string::npos);
}

TEST_CASE_FIXTURE(small_cluster, "a job array is one request: each task runs with its index, a throttle holds the rest, fkill takes one or all") {
  const auto u = c.user("aqs-test-array");
  // Six tasks, at most two at once, each writing its own file.
  const auto r = c.cmd(bin().fsub,
                       {"--parsable", "--array=0-5%2", "-o", "a-%A_%a.out", "--wrap",
                        "echo $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT; sleep 1"},
                       &u, u.home.string());
  const std::int64_t array = id_of(r);
  int most_running = 0;
  for (int i = 0; i < 300; ++i) {
    int running = 0, left = 0;
    for (const auto& j : c.jobs(true)) {
      if (j.array_job_id != array) continue;
      running += j.state == job_state::running ? 1 : 0;
      left += core::is_final(j.state) ? 0 : 1;
    }
    most_running = std::max(most_running, running);
    if (left == 0) break;
    std::this_thread::sleep_for(100ms);
  }
  CHECK(most_running <= 2);
  CHECK(most_running >= 1);
  std::set<int> seen;
  for (int t = 0; t < 6; ++t) {
    const fs::path f = u.home / ("a-" + std::to_string(array) + "_" + std::to_string(t) + ".out");
    REQUIRE(fs::exists(f));
    std::istringstream in(slurp(f));
    std::int64_t a = 0;
    int task = -1, count = 0;
    in >> a >> task >> count;
    CHECK(a == array);
    CHECK(task == t);
    CHECK(count == 6);
    seen.insert(task);
  }
  CHECK(seen.size() == 6);
  const auto listed = c.cmd(bin().fjobs, {"--all", "--json"}, &u);
  const auto all = nlohmann::json::parse(listed.out);
  int tasks = 0;
  for (const auto& j : all) tasks += j["array_job_id"] == array ? 1 : 0;
  CHECK(tasks == 6);

  // A long array: one task cancelled by A_T, then the whole array by its id.
  const auto big = id_of(c.cmd(bin().fsub, {"--parsable", "--array=1-20", "--wrap", "sleep 300"}, &u, u.home.string()));
  // Its tasks become jobs of their own as aqsd splits them off its compact
  // record (the whole window at once here: 20 tasks, 12 processors); until
  // then fjobs lists the record alone and an index is cancelled inside it.
  // What follows is about the split tasks: wait for them (on a loaded
  // machine fjobs can run before the split is written).
  const auto split_deadline = std::chrono::steady_clock::now() + 60s;
  bool split = false;
  while (!split && std::chrono::steady_clock::now() < split_deadline) {
    for (const auto& j : c.jobs(true)) split = split || (j.array_job_id == big && j.array_task_id == 20);
    if (!split) std::this_thread::sleep_for(100ms);
  }
  REQUIRE(split);
  const auto q = c.cmd(bin().fjobs, {}, &u);
  INFO("fjobs (status " << q.status << ") said: " << q.out << q.err);
  CHECK(q.out.find(std::to_string(big) + "_[") != std::string::npos);  // the pending ones collapsed
  const auto expanded = c.cmd(bin().fjobs, {"-r"}, &u);
  INFO("fjobs -r (status " << expanded.status << ") said: " << expanded.out << expanded.err);
  CHECK(expanded.out.find(std::to_string(big) + "_20") != std::string::npos);
  CHECK(c.cmd(bin().fkill, {std::to_string(big) + "_20"}, &u).status == 0);
  int cancelled = 0;
  for (const auto& j : c.jobs(true)) {
    if (j.array_job_id == big && j.array_task_id == 20) cancelled += j.state == job_state::cancelled ? 1 : 0;
  }
  CHECK(cancelled == 1);
  // Another user may not cancel it.
  const auto other = c.user("aqs-test-array2");
  CHECK(c.cmd(bin().fkill, {std::to_string(big)}, &other).status != 0);
  CHECK(c.cmd(bin().fkill, {std::to_string(big)}, &u).status == 0);
  c.wait_idle(60s);
  for (const auto& j : c.jobs(true)) {
    if (j.array_job_id == big) CHECK(j.state == job_state::cancelled);
  }
}

TEST_CASE_FIXTURE(small_cluster, "dependencies after, afterany, afterok, afternotok and '?' start, wait or cancel jobs as Slurm's do") {
  const auto u = c.user("aqs-test-deps");
  auto sub = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "--parsable");
    return id_of(c.cmd(bin().fsub, args, &u, u.home.string()));
  };
  const auto failing = sub({"--wrap", "sleep 3; exit 3"});
  const auto any = sub({"-d", "afterany:" + std::to_string(failing), "--wrap", "true"});
  const auto notok = sub({"-d", "afternotok:" + std::to_string(failing), "--wrap", "true"});
  const auto ok = sub({"-d", "afterok:" + std::to_string(failing), "--wrap", "true"});
  const auto either = sub({"-d", "afterok:" + std::to_string(failing) + "?afterany:" + std::to_string(failing),
                           "--wrap", "true"});
  // While its dependency runs, a job says why it waits.
  const auto waiting = c.job(any);
  REQUIRE(waiting);
  if (waiting->state == job_state::pending) CHECK(waiting->reason == "Dependency");
  const std::vector<job_state> done{job_state::completed, job_state::failed, job_state::cancelled};
  CHECK(c.wait_state(failing, done, 60s).state == job_state::failed);
  CHECK(c.wait_state(any, done, 60s).state == job_state::completed);
  CHECK(c.wait_state(notok, done, 60s).state == job_state::completed);
  CHECK(c.wait_state(ok, done, 60s).state == job_state::cancelled);
  CHECK(c.wait_state(either, done, 60s).state == job_state::completed);
  // after: starts once the other started, not when it ends.
  const auto longer = sub({"--wrap", "sleep 6"});
  const auto follower = sub({"-d", "after:" + std::to_string(longer), "--wrap", "true"});
  const auto f = c.wait_state(follower, done, 60s);
  CHECK(f.state == job_state::completed);
  const auto l = c.job(longer);
  REQUIRE(l);
  CHECK(l->state == job_state::running);  // the follower ended while it still ran
}

TEST_CASE_FIXTURE(small_cluster, "singleton: a job waits for every earlier job of its user and name, not for others'") {
  const auto u = c.user("aqs-test-deps");
  const auto v = c.user("aqs-test-deps2");
  auto sub = [&](const test::test_user& who, std::vector<std::string> args) {
    args.insert(args.begin(), "--parsable");
    return id_of(c.cmd(bin().fsub, args, &who, who.home.string()));
  };
  const fs::path log = u.home / "order.log";
  const auto first = sub(u, {"-J", "solo", "--wrap", "sleep 3; echo first >> " + log.string()});
  const auto second = sub(u, {"-J", "solo", "-d", "singleton", "--wrap", "echo second >> " + log.string()});
  // Another name, and another user's job of that name, do not wait.
  const auto other_name = sub(u, {"-J", "duo", "-d", "singleton", "--wrap", "true"});
  const auto other_user = sub(v, {"-J", "solo", "-d", "singleton", "--wrap", "true"});
  const std::vector<job_state> done{job_state::completed, job_state::failed, job_state::cancelled};
  CHECK(c.wait_state(other_name, done, 60s).state == job_state::completed);
  CHECK(c.wait_state(other_user, done, 60s).state == job_state::completed);
  const auto waiting = c.job(second);
  REQUIRE(waiting);
  if (c.job(first)->state != job_state::completed) {
    CHECK(waiting->state == job_state::pending);
    CHECK(waiting->reason == "Dependency");
  }
  CHECK(c.wait_state(second, done, 60s).state == job_state::completed);
  CHECK(test::slurp(log) == "first\nsecond\n");
}
