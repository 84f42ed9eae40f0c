// The Slurm-compatible commands end to end: real aqsd and aqs-node agents,
// the commands called by their Slurm names through symlinks, as scripts and
// workflow tools call Slurm.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "aqs_cluster.hpp"
#include "file_text.hpp"
#include "slurm_env.hpp"
#include "test_pg.hpp"

namespace fs = std::filesystem;
using namespace aqs;
using namespace std::chrono_literals;
using core::job_state;

namespace {

// The batch jobs' logs Snakemake keeps, for a failure's message.
std::string slurm_logs(const fs::path& workflow) {
  std::string out;
  const fs::path logs = workflow / ".snakemake" / "slurm_logs";
  if (!fs::exists(logs)) return out;
  int shown = 0;
  for (const auto& e : fs::recursive_directory_iterator(logs)) {
    if (!e.is_regular_file() || shown++ >= 3) continue;
    out += "--- " + e.path().string() + "\n" + test::slurp(e.path());
  }
  return out;
}

std::int64_t parsable_id(const test::run_result& r) {
  INFO("stdout: " << r.out << " stderr: " << r.err);
  REQUIRE(r.status == 0);
  REQUIRE(std::regex_match(r.out, std::regex("[0-9]+\n")));
  return std::stoll(r.out);
}

test::cluster::options small(const test::test_database& db, int nodes = 2) {
  test::cluster::options o;
  o.db = db.conninfo();
  o.nodes = nodes;
  return o;
}

}  // namespace

TEST_CASE("sbatch, squeue, scancel and sacct print exactly what scripts parsing Slurm's output expect") {
  test::test_database db;
  test::cluster c(small(db));
  const test::slurm_env s{c, test::slurm_bin(c)};
  const fs::path w = c.workdir();
  std::ofstream(w / "job.sh") << "#!/bin/sh\n#SBATCH --job-name=sleeper\n#SBATCH --time=10\nsleep 300\n";

  // sbatch: "Submitted batch job N" by default, "N" alone with --parsable.
  const auto plain = s.run("sbatch", {"job.sh"});
  REQUIRE(plain.status == 0);
  std::smatch m;
  REQUIRE(std::regex_match(plain.out, m, std::regex("Submitted batch job ([0-9]+)\n")));
  const std::int64_t first = std::stoll(m[1]);
  const std::int64_t second = parsable_id(s.run("sbatch", {"--parsable", "-J", "second", "--wrap", "sleep 300"}));
  c.wait_state(first, {job_state::running});
  c.wait_state(second, {job_state::running});

  // squeue -h -o "%i %t": one "ID ST" line per job, nothing else.
  auto q = s.run("squeue", {"-h", "-o", "%i %t"});
  REQUIRE(q.status == 0);
  CHECK(q.out == std::to_string(first) + " R\n" + std::to_string(second) + " R\n");
  // The default table: Slurm's header and right-justified columns.
  q = s.run("squeue", {});
  REQUIRE(q.status == 0);
  std::istringstream lines(q.out);
  std::string header, row;
  std::getline(lines, header);
  CHECK(header == "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)");
  std::getline(lines, row);
  CHECK(std::regex_match(row, std::regex(" +" + std::to_string(first) + " +main +sleeper +root +R +[0-9]+:[0-9]{2} +1 node[0-9]")));

  // A script that loops on squeue until its job is gone, as pipelines do.
  const std::string script =
      "id=$(sbatch --parsable --wrap 'sleep 1') || exit 9\n"
      "case \"$id\" in *[!0-9]*|'') echo \"bad id '$id'\"; exit 8;; esac\n"
      "while squeue -h -o '%i %t' | grep -q \"^$id \"; do sleep 0.2; done\n"
      "sacct -X -P -n --format=JobID,State,ExitCode -j \"$id\"\n";
  const auto looped = s.sh(script);
  INFO(looped.err);
  REQUIRE(looped.status == 0);
  CHECK(std::regex_match(looped.out, std::regex("[0-9]+\\|COMPLETED\\|0:0\n")));

  // scancel is quiet on success; the job ends CANCELLED.
  auto k = s.run("scancel", {std::to_string(first)});
  CHECK(k.status == 0);
  CHECK(k.out.empty());
  CHECK(k.err.empty());
  c.wait_state(first, {job_state::cancelled});
  // ... and an id that is no job gets Slurm's error and exit 1.
  k = s.run("scancel", {"987654"});
  CHECK(k.status == 1);
  CHECK(k.err == "scancel: error: Kill job error on job id 987654: Invalid job id specified\n");
  // scancel -n NAME
  k = s.run("scancel", {"-n", "second"});
  CHECK(k.status == 0);
  c.wait_state(second, {job_state::cancelled});

  // sacct -P: Slurm's fields; a job killed by SIGTERM exits 0:15.
  const auto a = s.run("sacct", {"-X", "-P", "--format=JobID,JobName,State,ExitCode,NNodes,NodeList,User,Partition,AllocCPUS",
                                 "-j", std::to_string(first)});
  REQUIRE(a.status == 0);
  CHECK(std::regex_match(a.out, std::regex("JobID\\|JobName\\|State\\|ExitCode\\|NNodes\\|NodeList\\|User\\|Partition\\|AllocCPUS\n" +
                                           std::to_string(first) + "\\|sleeper\\|CANCELLED\\|0:15\\|1\\|node[0-9]\\|root\\|main\\|1\n")));
  // squeue with nothing queued: the header alone.
  q = s.run("squeue", {});
  CHECK(q.out == header + "\n");
  // sinfo: every node idle in the default partition.
  const auto i = s.run("sinfo", {});
  CHECK(i.out ==
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
        "main*        up   infinite      2   idle node[0-1]\n");
  // srun: the command's output and exit status.
  const auto r = s.run("srun", {"-n1", "--cpu-bind=q", "sh", "-c", "echo in $AQS_JOB_ID; exit 4"});
  CHECK(r.status == 4);
  CHECK(std::regex_match(r.out, std::regex("in [0-9]+\n")));
  // Bad options fail as Slurm's do: a message and exit 1.
  CHECK(s.run("squeue", {"--bogus"}).status == 1);
  CHECK(s.run("sacct", {"--format=Bogus"}).err == "sacct: error: Invalid field requested: \"Bogus\"\n");
}

TEST_CASE("sbatch --begin holds the job with reason BeginTime until its time, then it runs") {
  // 10 s ahead: room for a slow sbatch and squeue on a loaded machine.
  test::test_database db;
  test::cluster c(small(db, 1));
  const test::slurm_env s{c, test::slurm_bin(c)};
  const auto t0 = std::chrono::system_clock::now();
  const std::int64_t id = parsable_id(s.run("sbatch", {"--parsable", "--begin=now+10", "-o", "/dev/null", "--wrap", "true"}));
  // Room to start at once, but not before its time.
  const auto q = s.run("squeue", {"-h", "-j", std::to_string(id), "-o", "%t %r"});
  CHECK(q.out == "PD BeginTime\n");
  const auto done = c.wait_state(id, {job_state::completed}, 120s);
  // The begin time is whole seconds (now+10 from sbatch's clock, truncated):
  // at least 9 s after t0, which was taken before sbatch ran.
  CHECK(std::chrono::system_clock::now() - t0 >= 9s);
  REQUIRE(done.start_time);
  // A bad time is one line and nothing is submitted.
  const auto bad = s.run("sbatch", {"--begin=someday", "--wrap", "true"});
  CHECK(bad.status != 0);
  CHECK(bad.err.find("invalid --begin time 'someday'") != std::string::npos);
  CHECK(c.jobs().size() == 1);
}

TEST_CASE("an unprivileged user's scancel of another user's job is refused with Slurm's error, and their own work goes through") {
  test::test_database db;
  test::cluster c(small(db));
  const test::slurm_env s{c, test::slurm_bin(c)};
  const test::test_user u = c.user("aqs-slurm-t1");
  const std::int64_t roots = parsable_id(s.run("sbatch", {"--parsable", "--wrap", "sleep 300"}));
  c.wait_state(roots, {job_state::running});

  auto k = s.run("scancel", {std::to_string(roots)}, &u);
  CHECK(k.status == 1);
  CHECK(k.err == "scancel: error: Kill job error on job id " + std::to_string(roots) + ": Access/permission denied\n");
  CHECK(c.job(roots)->state == job_state::running);

  // The user's own job: submitted, listed (--me), accounted, cancelled.
  const std::int64_t mine = parsable_id(s.run("sbatch", {"--parsable", "--wrap", "sleep 300"}, &u));
  c.wait_state(mine, {job_state::running});
  const auto q = s.run("squeue", {"--me", "-h", "-o", "%i %u %t"}, &u);
  CHECK(q.out == std::to_string(mine) + " aqs-slurm-t1 R\n");
  const auto a = s.run("sacct", {"-X", "-n", "-P", "--format=JobID,User,State"}, &u);
  CHECK(a.out == std::to_string(mine) + "|aqs-slurm-t1|RUNNING\n");
  k = s.run("scancel", {"-u", "aqs-slurm-t1"}, &u);
  CHECK(k.status == 0);
  c.wait_state(mine, {job_state::cancelled});
  // Root's job is untouched by all this.
  CHECK(c.job(roots)->state == job_state::running);
  CHECK(s.run("scancel", {std::to_string(roots)}).status == 0);
}

TEST_CASE("a Snakemake workflow of 20 jobs with dependencies completes through sbatch, sacct, sinfo and srun (Snakemake's --slurm)") {
  const auto have = test::run({"/bin/sh", "-c", "command -v snakemake"});
  if (have.status != 0) {
    FAIL("snakemake is not installed (scripts/setup-deps installs Debian's)");
  }
  test::test_database db;
  test::cluster c(small(db, 4));
  const test::slurm_env s{c, test::slurm_bin(c)};
  const fs::path w = c.workdir() / "workflow";
  fs::create_directories(w);
  // 12 producers, 6 pair sums, 2 totals: 20 cluster jobs in three waves.
  std::ofstream(w / "Snakefile") << R"(
localrules: all

rule all:
    input: "t1.txt", "t2.txt"

rule gen:
    output: "g{i}.txt"
    shell: "echo {wildcards.i} > {output}"

rule pair:
    input: lambda w: [f"g{2 * int(w.k) - 1}.txt", f"g{2 * int(w.k)}.txt"]
    output: "p{k}.txt"
    shell: "cat {input} | awk '{{s += $1 * $1}} END {{print s}}' > {output}"

rule total:
    input: lambda w: [f"p{k}.txt" for k in range(3 * int(w.t) - 2, 3 * int(w.t) + 1)]
    output: "t{t}.txt"
    shell: "cat {input} | awk '{{s += $1}} END {{print s}}' > {output}"
)";
  // Snakemake 7's --slurm polls sacct every 33 s unless told to check at
  // most once a second (a value above 1 is replaced by 1/33). 8 jobs at a time: each batch job and the srun inside it hold a processor
  // each, 16 in all, so they never wait on each other.
  std::string snakemake = have.out;
  while (!snakemake.empty() && snakemake.back() == '\n') snakemake.pop_back();
  const auto r = s.run_argv({snakemake, "--slurm", "--jobs", "8", "--latency-wait", "10", "--max-status-checks-per-second", "1"}, nullptr, 800s, w.string());
  INFO("snakemake stdout: " << r.out);
  INFO("snakemake stderr: " << r.err);
  INFO("job logs: " << slurm_logs(w));
  REQUIRE(r.status == 0);
  // sum of squares 1..6 = 91, 7..12 = 559
  CHECK(test::slurp(w / "t1.txt") == "91\n");
  CHECK(test::slurp(w / "t2.txt") == "559\n");
  // Every rule ran as a batch job of its own through sbatch.
  int batch = 0;
  for (const auto& j : c.jobs()) {
    if (j.name.starts_with("snakejob_")) {
      ++batch;
      CHECK(j.state == job_state::completed);
    }
  }
  CHECK(batch == 20);
  const std::string log = r.out + r.err;
  CHECK(log.find("20 of 21 steps") != std::string::npos);
}
