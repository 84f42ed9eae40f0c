// Nextflow, dask-jobqueue and submitit against the Slurm-compatible commands.
// None of the three is packaged in Debian, so their calls are replayed: each
// test writes the job script the tool generates, runs the exact command lines
// the tool runs (by their Slurm names, as an unprivileged user, from the
// directory the tool runs them in) and parses the output with the tool's own
// rules, re-implemented here from the sources read:
//   nextflow-io/nextflow 2aad02f65758 (2026-08-21), modules/nextflow/src/main/
//     groovy/nextflow/executor/{SlurmExecutor,AbstractGridExecutor,GridTaskHandler}.groovy
//   dask/dask-jobqueue 49db60adfe1e (2025-10-01), dask_jobqueue/{core,slurm}.py
//   facebookincubator/submitit e49d5e7f3890 (2025-12-17), submitit/slurm/slurm.py,
//     submitit/core/{core,utils}.py
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "e2e.hpp"
#include "slurm_env.hpp"

namespace {

// Nodes of the harness's default size (4 processors).
test::cluster::options small(const test::test_database& db, int nodes = 2) {
  return test::nodes_of(db, nodes, test::cluster::options{}.procs_per_node);
}

// A file of the user's, as the tool (running as them) writes it.
void write_as(const fs::path& p, const std::string& text, const test::test_user& u, bool executable = false) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
  REQUIRE(::chown(p.c_str(), u.uid, u.gid) == 0);
  ::chmod(p.c_str(), executable ? 0755 : 0644);
}

void mkdir_as(const fs::path& d, const test::test_user& u) {
  fs::create_directories(d);
  for (fs::path p = d; p != u.home && p.has_parent_path(); p = p.parent_path()) {
    REQUIRE(::chown(p.c_str(), u.uid, u.gid) == 0);
  }
}

// Calls `done` until it says so or `limit` passes (then fails with `what`).
void poll_until(const std::function<bool()>& done, const std::string& what, std::chrono::seconds limit = 90s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) FAIL("timed out waiting for " << what);
    std::this_thread::sleep_for(300ms);
  }
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}


// ------------------------------------------------------------------ Nextflow

// SlurmExecutor.groovy:185 STATUS_MAP (squeue's compact states).
enum class nf_status { pending, running, hold, error, done, unknown };
const std::map<std::string, nf_status> k_nf_status_map = {
    {"PD", nf_status::pending}, {"R", nf_status::running}, {"CA", nf_status::error}, {"CF", nf_status::pending},
    {"CG", nf_status::running}, {"CD", nf_status::done},   {"F", nf_status::error},  {"TO", nf_status::error},
    {"NF", nf_status::error},   {"S", nf_status::hold},    {"ST", nf_status::hold},  {"PR", nf_status::error},
    {"BF", nf_status::error}};

// SlurmExecutor.groovy:138 parseJobId: the first line matching
// /Submitted batch job (\d+)/ (Matcher.find), else the whole text if it is a
// number. Nextflow reads sbatch with stderr merged into stdout
// (GridTaskHandler.groovy:120 redirectErrorStream(true)).
std::string nf_parse_job_id(const test::run_result& r) {
  const std::string text = r.out + r.err;
  static const std::regex submit("Submitted batch job (\\d+)");
  for (const auto& line : lines_of(text)) {
    std::smatch m;
    if (std::regex_search(line, m, submit)) return m[1];
  }
  std::string t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.erase(0, 1);
  if (!t.empty() && std::all_of(t.begin(), t.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) return t;
  FAIL("Invalid SLURM submit response: " << text);
  return {};
}

// SlurmExecutor.groovy:202 parseQueueStatus: each line split on /\s+/, kept
// when it has exactly two columns (Groovy's split keeps a leading empty
// column, so a right-justified id would be dropped), state by STATUS_MAP.
// AbstractGridExecutor.groovy:294 reads squeue with stderr merged too.
std::map<std::string, nf_status> nf_parse_queue_status(const test::run_result& r) {
  std::map<std::string, nf_status> out;
  static const std::regex ws("\\s+");
  for (const auto& line : lines_of(r.out + r.err)) {
    std::vector<std::string> cols(std::sregex_token_iterator(line.begin(), line.end(), ws, -1), std::sregex_token_iterator());
    if (cols.size() != 2) continue;
    const auto it = k_nf_status_map.find(cols[1]);
    out[cols[0]] = it == k_nf_status_map.end() ? nf_status::unknown : it->second;
  }
  return out;
}

// The .command.run Nextflow writes: its #SBATCH header (SlurmExecutor.groovy:57
// getDirectives, one "#SBATCH opt value" line per pair, AbstractGridExecutor
// .groovy:96 getHeaders), NXF_CHDIR, then a wrapper that runs .command.sh and
// leaves .exitcode (trimmed here to what the scheduler sees).
std::string nf_command_run(const std::vector<std::string>& directives, const fs::path& workdir, const std::string& body) {
  std::string s = "#!/bin/bash\n";
  for (const auto& d : directives) s += "#SBATCH " + d + "\n";
  s += "NXF_CHDIR=" + workdir.string() + "\n";
  s += "### ---\n### name: 'task'\nset -e\nset -u\n";
  s += body;
  return s;
}

std::string nf_task_wrapper() {
  return "nxf_main() {\n"
         "  [[ \"${NXF_CHDIR:-}\" ]] && cd \"$NXF_CHDIR\"\n"
         "  trap 'printf -- \"$?\" > .exitcode' EXIT\n"
         "  trap 'exit 140' USR2\n"
         "  /bin/bash -ue .command.sh > .command.out 2> .command.err\n"
         "}\n"
         "nxf_main\n";
}

}  // namespace

TEST_CASE("Nextflow's Slurm executor: its .command.run header, sbatch in the task directory, squeue -t all polling, scancel") {
  test::slurm_case fixture(small, 2, "aqs-wf-nf");
  auto& [db, c, s, u] = fixture;
  const fs::path sbatch = s.bin / "sbatch";

  // SlurmExecutor.groovy:159 queueStatusCommand(queue): -p when the process
  // has a queue, -u the user.name of the Nextflow JVM.
  auto queue_status = [&] {
    const auto r = s.run("squeue", {"--noheader", "-o", "%i %t", "-t", "all", "-p", "main", "-u", u.name}, &u);
    INFO("squeue: " << r.out << r.err);
    REQUIRE(r.status == 0);
    return nf_parse_queue_status(r);
  };
  auto status_of = [&](const std::string& id) {
    const auto q = queue_status();
    const auto it = q.find(id);
    return it == q.end() ? nf_status::unknown : it->second;
  };

  SUBCASE("a task runs to completion and squeue shows it CD") {
    const fs::path work = u.home / "work" / "3f" / "a1b2c3d4e5";
    mkdir_as(work, u);
    // Task "hello (1)": the job name's blank becomes '_' (AbstractGridExecutor.groovy:44).
    write_as(work / ".command.run",
             nf_command_run({"-J nf-hello_(1)", "-o " + (work / ".command.log").string(), "--no-requeue",
                             "--signal B:USR2@30", "-c 2", "-t 00:10:00", "--mem 1024M", "-p main"},
                            work, nf_task_wrapper()),
             u);
    write_as(work / ".command.sh",
             "#!/bin/bash -ue\necho \"Hello from $SLURM_JOB_ID with $SLURM_CPUS_PER_TASK cpus\"\n", u);
    // SlurmExecutor.groovy:125 getSubmitCommandLine: sbatch and the file name,
    // run in the task directory (GridTaskHandler.groovy:122).
    const auto r = s.run_argv({sbatch.string(), ".command.run"}, &u, 60s, work.string());
    INFO("sbatch: " << r.out << r.err);
    REQUIRE(r.status == 0);
    const std::string id = nf_parse_job_id(r);
    const auto job = c.job(std::stoll(id));
    REQUIRE(job.has_value());
    CHECK(job->name == "nf-hello_(1)");

    poll_until([&] { return status_of(id) == nf_status::done; }, "squeue to show the task CD");
    CHECK(test::slurp(work / ".exitcode") == "0");
    CHECK(test::slurp(work / ".command.out") == "Hello from " + id + " with 2 cpus\n");
  }

  SUBCASE("a running task is killed with scancel, and squeue then shows it CA") {
    std::vector<std::string> ids;
    for (const std::string t : {"aa/0001", "bb/0002"}) {
      const fs::path work = u.home / "work" / t;
      mkdir_as(work, u);
      write_as(work / ".command.run",
               nf_command_run({"-J nf-sleepy_" + t.substr(3), "-o " + (work / ".command.log").string(), "--no-requeue",
                               "--signal B:USR2@30", "-t 01:00:00", "--mem 100M"},
                              work, nf_task_wrapper()),
               u);
      write_as(work / ".command.sh", "#!/bin/bash -ue\nsleep 300\n", u);
      const auto r = s.run_argv({sbatch.string(), ".command.run"}, &u, 60s, work.string());
      REQUIRE(r.status == 0);
      ids.push_back(nf_parse_job_id(r));
    }
    for (const auto& id : ids) poll_until([&] { return status_of(id) == nf_status::running; }, "task " + id + " to run");
    // AbstractGridExecutor.groovy:258 killTaskCommand: scancel and every id
    // of the batch of tasks to kill.
    const auto k = s.run("scancel", {ids[0], ids[1]}, &u);
    INFO("scancel: " << k.out << k.err);
    CHECK(k.status == 0);
    for (const auto& id : ids) poll_until([&] { return status_of(id) == nf_status::error; }, "task " + id + " to show CA");
  }

  SUBCASE("a task array: --array 0-N, output to /dev/null, each task's status as JOBID_INDEX") {
    std::vector<fs::path> dirs;
    std::string list;
    for (int i = 0; i < 3; ++i) {
      const fs::path work = u.home / "work" / "cc" / ("task" + std::to_string(i));
      mkdir_as(work, u);
      write_as(work / ".command.sh", "#!/bin/bash -ue\necho " + std::to_string(i * i) + "\n", u);
      write_as(work / ".command.run", nf_command_run({}, work, nf_task_wrapper()), u);
      dirs.push_back(work);
      list += " " + work.string();
    }
    const fs::path array_dir = u.home / "work" / "cc";
    // SlurmExecutor.groovy:60: an array's directives start with --array
    // 0-(size-1) and send the job's output to /dev/null; the launcher picks
    // its task's directory by SLURM_ARRAY_TASK_ID (getArrayIndexName).
    write_as(array_dir / ".command.run",
             nf_command_run({"--array 0-2", "-J nf-square", "-o /dev/null", "--no-requeue", "--signal B:USR2@30",
                             "-t 00:10:00"},
                            array_dir,
                            "array=(" + list + " )\n"
                            "export task_dir=${array[$SLURM_ARRAY_TASK_ID]}\n"
                            "/bin/bash $task_dir/.command.run 2>&1 > $task_dir/.command.log\n"),
             u);
    const auto r = s.run_argv({sbatch.string(), ".command.run"}, &u, 60s, array_dir.string());
    INFO("sbatch: " << r.out << r.err);
    REQUIRE(r.status == 0);
    const std::string id = nf_parse_job_id(r);
    // SlurmExecutor.groovy:247 getArrayTaskId: "<jobId>_<index>".
    for (int i = 0; i < 3; ++i) {
      const std::string tid = id + "_" + std::to_string(i);
      poll_until([&] { return status_of(tid) == nf_status::done; }, "array task " + tid + " to show CD");
      CHECK(test::slurp(dirs[i] / ".command.out") == std::to_string(i * i) + "\n");
      CHECK(test::slurp(dirs[i] / ".exitcode") == "0");
    }
  }

  SUBCASE("with onlyJobState, squeue --only-job-state (no -p, no -u) is accepted") {
    // SlurmExecutor.groovy:159: onlyJobState replaces -p and -u.
    const auto r = s.run("squeue", {"--noheader", "-o", "%i %t", "-t", "all", "--only-job-state"}, &u);
    INFO(r.err);
    CHECK(r.status == 0);
  }
}

// ------------------------------------------------------------ dask-jobqueue

namespace {

// core.py:146 _script_template with slurm.py:66-110's header for
// SLURMCluster(cores=2, memory="1GB", account="dask-project",
// walltime="00:30:00", log_directory=LOGS, job_extra_directives=["--export=ALL"],
// job_script_prologue=["export OMP_NUM_THREADS=1"]): --mem is
// slurm_format_bytes_ceil(1e9) = 954M (slurm.py:116).
std::string dask_job_script(const fs::path& logs, const std::string& worker_command) {
  return "#!/usr/bin/env bash\n"
         "\n"
         "#SBATCH -J dask-worker\n"
         "#SBATCH -e " + logs.string() + "/dask-worker-%J.err\n"
         "#SBATCH -o " + logs.string() + "/dask-worker-%J.out\n"
         "#SBATCH -A dask-project\n"
         "#SBATCH -n 1\n"
         "#SBATCH -N 1\n"
         "#SBATCH --cpus-per-task=2\n"
         "#SBATCH --mem=954M\n"
         "#SBATCH -t 00:30:00\n"
         "#SBATCH --export=ALL\n"
         "export OMP_NUM_THREADS=1\n" +
         worker_command + "\n\n";
}

// core.py:445 _job_id_from_submit_output: re.search(r"(?P<job_id>\d+)") over
// sbatch's stdout (core.py:478 _call keeps stderr apart), the first digits.
std::string dask_job_id(const test::run_result& r) {
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(r.out, m, std::regex("(\\d+)")), "Could not parse job id from: " << r.out);
  return m[1];
}

}  // namespace

TEST_CASE("dask-jobqueue's SLURMCluster: its worker script through sbatch from a temporary file, job id by its regex, scancel on close") {
  test::slurm_case fixture(small, 2, "aqs-wf-dask");
  auto& [db, c, s, u] = fixture;
  const fs::path logs = u.home / "dask-logs";
  mkdir_as(logs, u);

  // core.py:421 _submit_job: shlex.split("sbatch") + [the script], the script
  // a temporary file removed as soon as sbatch returns (core.py:409 job_file).
  auto start_worker = [&](const std::string& tmpname, const std::string& worker) {
    const fs::path script = u.home / tmpname;
    write_as(script, dask_job_script(logs, worker), u);
    const auto r = s.run("sbatch", {script.string()}, &u);
    fs::remove(script);
    INFO("sbatch: " << r.out << " stderr: " << r.err);
    REQUIRE(r.status == 0);
    return dask_job_id(r);
  };

  // The stand-in for "python -m distributed.cli.dask_worker tcp://...": a
  // worker that outlives its scheduler by --death-timeout, and one that stays.
  const std::string short_id = start_worker("tmpq8w2r1ab.sh", "echo \"worker $SLURM_JOB_ID cpus $SLURM_CPUS_PER_TASK\"");
  const std::string long_id = start_worker("tmpz0x9c7de.sh", "echo \"worker $SLURM_JOB_ID\"; sleep 300");
  auto j = c.wait_state(std::stoll(short_id), {job_state::completed});
  CHECK(j.name == "dask-worker");
  // -o LOGS/dask-worker-%J.out: %J is the job id.
  CHECK(test::slurp(logs / ("dask-worker-" + short_id + ".out")) == "worker " + short_id + " cpus 2\n");
  CHECK(fs::exists(logs / ("dask-worker-" + short_id + ".err")));

  c.wait_state(std::stoll(long_id), {job_state::running});
  // core.py:471 _close_job: shlex.split("scancel") + [job_id]; a non-zero
  // exit (a job already gone) is suppressed, so only the running one matters.
  const auto k = s.run("scancel", {long_id}, &u);
  CHECK(k.status == 0);
  c.wait_state(std::stoll(long_id), {job_state::cancelled});
  s.run("scancel", {short_id}, &u);
}

// ------------------------------------------------------------------ submitit

namespace {

// submitit/slurm/slurm.py:396 _make_sbatch_string for
// update_parameters(timeout_min=5, mem_gb=1, cpus_per_task=2, tasks_per_node=1)
// on SlurmExecutor(folder=F): "#SBATCH --key=value" lines sorted by key, then
// "srun --unbuffered --output F/%j_%t_log.out --error F/%j_%t_log.err" and the
// command (python -u -m submitit.core._submit F; a shell stand-in here that
// leaves the task's result file). An array (map_count) adds
// --array=0-(n-1)%min(n, 256) and uses %A_%a for %j in the log names.
std::string submitit_script(const fs::path& folder, const std::string& command, int map_count = 0) {
  const std::string f = folder.string();
  const std::string j = map_count > 0 ? "%A_%a" : "%j";
  std::string s = "#!/bin/bash\n\n# Parameters\n";
  if (map_count > 0) s += "#SBATCH --array=0-" + std::to_string(map_count - 1) + "%" + std::to_string(map_count) + "\n";
  s += "#SBATCH --cpus-per-task=2\n"
       "#SBATCH --error=" + f + "/" + j + "_0_log.err\n"
       "#SBATCH --job-name=submitit\n"
       "#SBATCH --mem=1GB\n"
       "#SBATCH --nodes=1\n"
       "#SBATCH --ntasks-per-node=1\n"
       "#SBATCH --open-mode=append\n"
       "#SBATCH --output=" + f + "/" + j + "_0_log.out\n"
       "#SBATCH --signal=USR2@90\n"
       "#SBATCH --time=5\n"
       "#SBATCH --wckey=submitit\n"
       "\n# command\n"
       "export SUBMITIT_EXECUTOR=slurm\n"
       "srun --unbuffered --output " + f + "/" + j + "_%t_log.out --error " + f + "/" + j + "_%t_log.err " +
       command + "\n";
  return s;
}

// slurm.py:369 _get_job_id_from_submission_command: re.search(r"job (?P<id>[0-9]+)").
std::string submitit_job_id(const test::run_result& r) {
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(r.out, m, std::regex("job ([0-9]+)")), "Could not make sense of sbatch output " << r.out);
  return m[1];
}

// slurm.py:23 read_job_id: "N_[a-b,c%p]" ranges, else "N" or "N_i".
std::vector<std::vector<std::string>> submitit_read_job_id(const std::string& job_id) {
  std::vector<std::vector<std::string>> out;
  std::smatch m;
  if (std::regex_search(job_id, m, std::regex("(\\d+)_\\[((\\d+(-\\d+)?(,)?)+)(%\\d+)?\\]"))) {
    std::istringstream ranges(m[2].str());
    for (std::string r; std::getline(ranges, r, ',');) {
      std::vector<std::string> t{m[1].str()};
      const auto dash = r.find('-');
      t.push_back(r.substr(0, dash));
      if (dash != std::string::npos) t.push_back(r.substr(dash + 1));
      out.push_back(t);
    }
    return out;
  }
  const auto us = job_id.find('_');
  if (us == std::string::npos) return {{job_id}};
  return {{job_id.substr(0, us), std::to_string(std::stoi(job_id.substr(us + 1)))}};
}

// slurm.py:68 read_info: the first line names the '|'-separated columns;
// rows whose JobID is empty or has a '.' (steps) are skipped; array ranges
// are expanded to one entry per task.
std::map<std::string, std::map<std::string, std::string>> submitit_read_info(const std::string& text) {
  std::map<std::string, std::map<std::string, std::string>> all;
  const auto lines = lines_of(text);
  if (lines.size() < 2) return all;
  auto split = [](const std::string& l) {
    std::vector<std::string> v;
    std::string cur;
    for (const char ch : l) {
      if (ch == '|') {
        v.push_back(cur);
        cur.clear();
      } else {
        cur += ch;
      }
    }
    v.push_back(cur);
    return v;
  };
  const auto names = split(lines[0]);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto vals = split(lines[i]);
    std::map<std::string, std::string> stats;
    for (std::size_t k = 0; k < names.size() && k < vals.size(); ++k) {
      std::string v = vals[k];
      while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
      stats[names[k]] = v;
    }
    const std::string jid = stats["JobID"];
    if (jid.empty() || jid.find('.') != std::string::npos) continue;
    for (const auto& t : submitit_read_job_id(jid)) {
      all[t.size() >= 2 ? t[0] + "_" + t[1] : t[0]] = stats;
      if (t.size() >= 3) {
        for (int x = std::stoi(t[1]); x <= std::stoi(t[2]); ++x) all[t[0] + "_" + std::to_string(x)] = stats;
      }
    }
  }
  return all;
}

// core/core.py:102 is_done: the state is not one of these.
bool submitit_is_done(const std::string& state) {
  std::string up = state;
  for (auto& ch : up) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  for (const char* w : {"READY", "PENDING", "RUNNING", "UNKNOWN", "REQUEUED", "COMPLETING", "PREEMPTED"}) {
    if (up == w) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("submitit's SlurmExecutor: its sbatch file, sacct -o JobID,State,NodeList --parsable2 polling, srun's log names, arrays, scancel") {
  test::slurm_case fixture(small, 3, "aqs-wf-submitit");
  auto& [db, c, s, u] = fixture;
  const fs::path folder = u.home / "log_test";
  mkdir_as(folder, u);

  // slurm.py:43 _make_command: sacct -o JobID,State,NodeList --parsable2
  // and -j for each main id still being watched; get_state (slurm.py:54)
  // answers "UNKNOWN" for an id not (yet) listed.
  auto state_of = [&](const std::string& main_id, const std::string& job_id) {
    const auto r = s.run("sacct", {"-o", "JobID,State,NodeList", "--parsable2", "-j", main_id}, &u);
    INFO("sacct: " << r.out << r.err);
    REQUIRE(r.status == 0);
    const auto info = submitit_read_info(r.out);
    const auto it = info.find(job_id);
    if (it == info.end()) return std::string("UNKNOWN");
    const auto st = it->second.find("State");
    return st == it->second.end() || st->second.empty() ? std::string("UNKNOWN") : st->second;
  };
  auto wait_done = [&](const std::string& main_id, const std::string& job_id) {
    std::string state;
    poll_until([&] { return submitit_is_done(state = state_of(main_id, job_id)); }, "sacct to show " + job_id + " done");
    return state;
  };
  // core/core.py:945: the file is written in the folder as
  // .submission_file_<uuid>.sh and submitted as "sbatch PATH" (slurm.py:365).
  auto submit = [&](const std::string& uuid, const std::string& script) {
    const fs::path file = folder / (".submission_file_" + uuid + ".sh");
    write_as(file, script, u);
    const auto r = s.run("sbatch", {file.string()}, &u);
    INFO("sbatch: " << r.out << " stderr: " << r.err);
    REQUIRE(r.status == 0);
    return submitit_job_id(r);
  };
  const std::string task =
      "/bin/sh -c 'echo \"task $SLURM_PROCID of $SLURM_NTASKS on $SLURM_JOB_NODELIST\"; "
      "echo done > " + folder.string() + "/${SLURM_JOB_ID}_${SLURM_PROCID}_result.pkl'";

  SUBCASE("a job runs through srun, its logs named by %j and %t, sacct reports it COMPLETED") {
    const std::string id = submit("0c4e3b1f9a7d4c2e8b5a6f7d8e9c0a1b", submitit_script(folder, task));
    CHECK(c.job(std::stoll(id))->name == "submitit");
    CHECK(wait_done(id, id) == "COMPLETED");
    CHECK(fs::exists(folder / (id + "_0_result.pkl")));
    // Job and task logs share F/<id>_0_log.out (--open-mode=append).
    const std::string log = test::slurp(folder / (id + "_0_log.out"));
    CHECK(log.find("task 0 of 1 on node") != std::string::npos);
    CHECK(fs::exists(folder / (id + "_0_log.err")));
    for (const auto& e : fs::directory_iterator(folder)) {
      CHECK_MESSAGE(e.path().filename().string().find('%') == std::string::npos, "unexpanded pattern: " << e.path());
    }
  }

  SUBCASE("a cancelled job: scancel ID, then sacct's state is done and CANCELLED") {
    const std::string id = submit("1d5f4c2a0b8e4d3f9c6b7a8e9f0d1b2c", submitit_script(folder, "sleep 300"));
    poll_until([&] { return state_of(id, id) == "RUNNING"; }, "sacct to show the job RUNNING");
    // core/core.py:262 cancel: [_cancel_command, job_id].
    const auto k = s.run("scancel", {id}, &u);
    CHECK(k.status == 0);
    CHECK(wait_done(id, id).starts_with("CANCELLED"));
  }

  SUBCASE("a map of 3 is one array job; its tasks are ID_0..ID_2 in sacct; one is cancelled as ID_1") {
    const std::string body =
        "/bin/sh -c 'if [ \"$SLURM_ARRAY_TASK_ID\" = 1 ]; then sleep 300; fi; "
        "echo done > " + folder.string() + "/${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}_result.pkl'";
    const std::string id = submit("2e6a5d3b1c9f4e4a0d7c8b9f0a1e2c3d", submitit_script(folder, body, 3));
    const std::string t1 = id + "_1";
    poll_until([&] { return state_of(id, t1) == "RUNNING"; }, "sacct to show " + t1 + " RUNNING");
    const auto k = s.run("scancel", {t1}, &u);
    INFO("scancel: " << k.out << k.err);
    CHECK(k.status == 0);
    for (const std::string t : {"0", "2"}) {
      CHECK(wait_done(id, id + "_" + t) == "COMPLETED");
      CHECK(fs::exists(folder / (id + "_" + t + "_result.pkl")));
      CHECK(fs::exists(folder / (id + "_" + t + "_0_log.out")));
    }
    CHECK(wait_done(id, t1).starts_with("CANCELLED"));
  }
}
