// Slurm users at home (issue 33): inside every job Slurm's names are AQS's
// whatever else is installed, srun runs N tasks as Slurm's does (per-task
// variables, -l, --multi-prog, MPI programs wired up), and what scripts and
// engines call around that (sbatch --wait, scontrol show config, ...).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "e2e.hpp"
#include "run_users.hpp"
#include "slurm_env.hpp"

namespace {

test::cluster::options two_nodes(const test::test_database& db, int procs = 2) {
  return test::nodes_of(db, 2, procs);
}

// A site's own Slurm client, earlier on the submitter's PATH than AQS's:
// srun and squeue that say so and fail.
fs::path fake_slurm(const test::cluster& c) {
  const fs::path dir = c.dir() / "site-slurm";
  fs::create_directories(dir);
  for (const char* n : {"srun", "squeue", "sbatch", "scontrol", "sacct"}) {
    std::ofstream(dir / n) << "#!/bin/sh\necho SLURM\nexit 1\n";
    fs::permissions(dir / n, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
  }
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec);
  return dir;
}

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  std::sort(out.begin(), out.end());
  return out;
}

// Lines of `text` that match `re`, sorted.
std::vector<std::string> matching(const std::string& text, const std::string& re) {
  std::vector<std::string> out;
  for (const auto& l : sorted_lines(text)) {
    if (std::regex_match(l, std::regex(re))) out.push_back(l);
  }
  return out;
}

// Two tasks "PROCID:NODEID", one on each node.
bool one_per_node(const std::string& out) {
  const auto l = sorted_lines(out);
  return l == std::vector<std::string>{"0:0", "1:1"} || l == std::vector<std::string>{"0:1", "1:0"};
}

}  // namespace

TEST_CASE("inside a job srun, squeue and scontrol are AQS's even with Slurm's client first on the submitter's PATH") {
  test::slurm_case fixture(two_nodes, 4, "aqs-slurmhome-a");
  auto& [db, c, s, u] = fixture;
  const fs::path site = fake_slurm(c);

  std::ofstream(u.home / "job.sh") << "#!/bin/sh\n"
                                      "#SBATCH -n 4 -o out.txt\n"
                                      "d=$(dirname \"$(command -v srun)\")\n"
                                      "echo \"srun in $d\"\n"
                                      "stat -c 'dir %U %a' \"$d\"\n"
                                      "echo links $(ls \"$d\" | tr '\\n' ' ')\n"
                                      "[ -w \"$d\" ] && echo 'dir writable'\n"
                                      "srun -l -n 2 sh -c 'echo task $SLURM_PROCID'\n"
                                      "squeue -h -j $SLURM_JOB_ID -o 'queue %i %t'\n"
                                      "scontrol show job $SLURM_JOB_ID | grep -o 'JobState=[A-Z]*'\n"
                                      "srun -n 1 sh -c 'exit 3'\n"
                                      "echo \"step rc=$?\"\n"
                                      "srun -n 1 sh -c 'echo step id $SLURM_STEP_ID'\n"
                                      "srun -n 4 hostname | wc -l | sed 's/^/hostnames /'\n"
                                      "printf '0-1 echo mp-a %%t\\n* echo mp-b %%t\\n' > mp.conf\n"
                                      "srun -n 4 --multi-prog mp.conf | sort | tr '\\n' ' ' | sed 's/^/multi /'; echo\n"
                                      "sbatch --wait -n 1 -o /dev/null --wrap 'exit 9' > /dev/null\n"
                                      "echo \"inner wait rc=$?\"\n"
                                      "scontrol show config | grep '^MinJobAge'\n"
                                      "sacct -X -n -P --format=JobID,State -j $SLURM_JOB_ID | sed 's/^/acct /'\n";
  fs::permissions(u.home / "job.sh", fs::perms::owner_all, fs::perm_options::add);
  ::chown((u.home / "job.sh").c_str(), u.uid, u.gid);
  // The user submits with Slurm's own client earlier on the PATH than AQS's.
  std::map<std::string, std::string> env = s.env(u.name);
  env["PATH"] = site.string() + ":" + s.bin.string() + ":/usr/local/bin:/usr/bin:/bin";
  const auto r = test::run({(s.bin / "sbatch").string(), "--parsable", "job.sh"}, env, u.uid, u.gid, u.home.string());
  INFO("sbatch: " << r.out << r.err);
  REQUIRE(r.status == 0);
  const std::int64_t id = std::stoll(r.out);
  const auto done = c.wait_state(id, {job_state::completed, job_state::failed, job_state::cancelled}, 120s);
  const std::string out = test::slurp(u.home / "out.txt");
  INFO("job output:\n" << out);
  CHECK(done.state == job_state::completed);
  CHECK(out.find("SLURM") == std::string::npos);
  CHECK(std::regex_search(out, std::regex("srun in /.*/slurm-bin\n")));
  CHECK(out.find("dir root 755\n") != std::string::npos);
  CHECK(out.find("links sacct salloc sbatch scancel scontrol sinfo squeue srun sstat\n") != std::string::npos);
  CHECK(out.find("dir writable") == std::string::npos);
  CHECK(matching(out, "[0-9]: task [0-9]") == std::vector<std::string>{"0: task 0", "1: task 1"});
  CHECK(out.find("queue " + std::to_string(id) + " R\n") != std::string::npos);
  CHECK(out.find("JobState=RUNNING\n") != std::string::npos);
  // A failed step: the script sees the task's exit code as srun's.
  CHECK(out.find("step rc=3\n") != std::string::npos);
  // Steps are numbered in the job: 0, 1, then this third one.
  CHECK(out.find("step id 2\n") != std::string::npos);
  CHECK(out.find("hostnames 4\n") != std::string::npos);
  CHECK(out.find("multi mp-a 0 mp-a 1 mp-b 2 mp-b 3 \n") != std::string::npos);
  // sbatch --wait from inside a job: another job, its code as sbatch's.
  CHECK(out.find("inner wait rc=9\n") != std::string::npos);
  CHECK(std::regex_search(out, std::regex("\nMinJobAge += 300 sec\n")));
  CHECK(out.find("acct " + std::to_string(id) + "|RUNNING\n") != std::string::npos);
}

TEST_CASE("srun -n N runs N tasks that know who they are, labels their lines and reads --multi-prog") {
  test::slurm_case fixture(two_nodes, 2, "aqs-slurmhome-b");
  auto& [db, c, s, u] = fixture;

  // -n 4 over two nodes of two processors: 4 tasks, two per node.
  auto r = s.run("srun", {"-n", "4", "-l", "sh", "-c",
                          "echo $SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURM_NTASKS $SLURM_STEP_ID"},
                 &u, 120s);
  INFO("srun: " << r.out << r.err);
  CHECK(r.status == 0);
  // Tasks 0-1 on one node, 2-3 on the other (which one comes first in the
  // job's map is the registration order: SLURM_NODEID is the node's place
  // in SLURM_JOB_NODELIST, node[0-1]).
  const auto lines = sorted_lines(r.out);
  REQUIRE(lines.size() == 4);
  std::vector<std::string> node_of(4);
  for (int k = 0; k < 4; ++k) {
    std::smatch m;
    REQUIRE(std::regex_match(lines[k], m, std::regex("([0-9]): ([0-9]) ([0-9]) ([01]) 4 0")));
    CHECK(m[1] == std::to_string(k));
    CHECK(m[2] == std::to_string(k));
    CHECK(m[3] == std::to_string(k % 2));
    node_of[k] = m[4];
  }
  CHECK(node_of[0] == node_of[1]);
  CHECK(node_of[2] == node_of[3]);
  CHECK(node_of[0] != node_of[2]);
  CHECK(r.err.find("frun") == std::string::npos);

  // -n 2 hostname: two lines, not one.
  r = s.run("srun", {"-n", "2", "hostname"}, &u, 120s);
  CHECK(r.status == 0);
  CHECK(sorted_lines(r.out).size() == 2);

  // --ntasks-per-node=1: one task on each node.
  r = s.run("srun", {"-n", "2", "--ntasks-per-node=1", "sh", "-c", "echo $SLURM_PROCID:$SLURM_NODEID"}, &u, 120s);
  CHECK(r.status == 0);
  CHECK(one_per_node(r.out));

  // -c 2: two tasks of two processors, so one per node.
  r = s.run("srun", {"-n", "2", "-c", "2", "sh", "-c", "echo $SLURM_PROCID:$SLURM_NODEID"}, &u, 120s);
  CHECK(r.status == 0);
  CHECK(one_per_node(r.out));

  // --multi-prog: Slurm's file (ranks, ranges, *, %t and %o).
  std::ofstream(u.home / "multi.conf") << "# a comment\n0 echo zero %t\n1-2 echo pair %t %o\n* echo other '%t'\n";
  ::chown((u.home / "multi.conf").c_str(), u.uid, u.gid);
  r = s.run("srun", {"-n", "4", "--multi-prog", "multi.conf"}, &u, 120s);
  INFO("multi-prog: " << r.out << r.err);
  CHECK(r.status == 0);
  CHECK(sorted_lines(r.out) == std::vector<std::string>{"other 3", "pair 1 0", "pair 2 1", "zero 0"});
  // A file that leaves a task without a program is refused before anything runs.
  std::ofstream(u.home / "short.conf") << "0-1 true\n";
  r = s.run("srun", {"-n", "4", "--multi-prog", "short.conf"}, &u, 120s);
  CHECK(r.status != 0);
  CHECK(r.err.find("no program for task 2") != std::string::npos);

  // A failing task: srun's exit code is the task's.
  r = s.run("srun", {"-n", "2", "sh", "-c", "exit $((SLURM_PROCID * 5))"}, &u, 120s);
  CHECK(r.status == 5);

  // Warnings are srun's.
  r = s.run("srun", {"-n", "1", "--cpu-bind=cores", "true"}, &u, 120s);
  CHECK(r.status == 0);
  CHECK(r.err.find("srun: warning: --cpu-bind=cores") != std::string::npos);
  CHECK(r.err.find("frun") == std::string::npos);

  // An MPI program under srun -n 4 is one MPI job of 4 ranks, as under mpirun.
  r = s.run("srun", {"-n", "4", MPI_PROBE}, &u, 120s);
  INFO("mpi: " << r.out << r.err);
  CHECK(r.status == 0);
  CHECK(matching(r.out, "rank [0-9] .*").size() == 4);
  for (int k = 0; k < 4; ++k) CHECK(r.out.find("rank " + std::to_string(k) + " ") != std::string::npos);
}

TEST_CASE("inside a job, srun's own -c and --ntasks-per-node place its step over the job's processors, and steps do not share them") {
  test::slurm_case fixture(two_nodes, 2, "aqs-h33-layout");
  auto& [db, c, s, u] = fixture;
  // A job of 4 tasks, 2 on each node; each task's cpus are what its
  // binding allows (the step's rankfile binds a -c 2 task to two).
  std::ofstream(u.home / "lay.sh")
      << "#!/bin/sh\n"
         "export TMPDIR=$PWD/steps; mkdir -p $TMPDIR\n"
         "srun -n 2 --ntasks-per-node=1 sh -c 'echo npn $SLURM_PROCID:$SLURM_NODEID'\n"
         "srun -n 2 -c 2 sh -c 'echo cpt $SLURM_PROCID:$SLURM_NODEID:$SLURM_CPUS_PER_TASK:"
         "$(grep Cpus_allowed_list /proc/self/status | cut -f2)'\n"
         "srun -n 2 sh -c 'echo plain $SLURM_PROCID:$SLURM_NODEID'\n"
         "srun -N 2 -n 2 sh -c 'echo twonodes $SLURM_PROCID:$SLURM_NODEID'\n"
         "srun -n 3 -c 2 true 2>&1 | sed 's/^/big /'\n"
         "srun -n 1 -c 2 sh -c 'exit 4'; echo \"layout rc=$?\"\n"
         "echo left $(ls $TMPDIR | wc -l)\n"
         // Two steps at once take different processors (here: nodes); a
         // third, while they hold all four, waits for them as Slurm's does.
         "mkdir m\n"
         // (B starts once A runs: two mpiruns' daemons on one host starting
         // at the same moment may race to make OpenMPI's session directory.)
         "srun -n 2 sh -c 'echo stepA $SLURM_NODEID; touch m/a$SLURM_PROCID; sleep 20' &\n"
         "for i in $(seq 120); do [ $(ls m | wc -l) -ge 2 ] && break; sleep 0.5; done\n"
         "srun -n 2 sh -c 'echo stepB $SLURM_NODEID; touch m/b$SLURM_PROCID; sleep 20' &\n"
         "for i in $(seq 120); do [ $(ls m | wc -l) -ge 4 ] && break; sleep 0.5; done\n"
         "srun -n 1 --overlap sh -c 'echo stepD $SLURM_NODEID' 2>&1 | sed 's/^/D /'\n"
         "srun -n 1 sh -c 'echo stepC $SLURM_NODEID' 2>&1 | sed 's/^/C /'\n"
         "wait\n";
  fs::permissions(u.home / "lay.sh", fs::perms::owner_all, fs::perm_options::add);
  ::chown((u.home / "lay.sh").c_str(), u.uid, u.gid);
  const auto r = s.run("sbatch", {"--parsable", "-N", "2", "-n", "4", "-o", "lay.txt", "lay.sh"}, &u);
  INFO("sbatch: " << r.out << r.err);
  REQUIRE(r.status == 0);
  const std::int64_t id = std::stoll(r.out);
  c.wait_state(id, {job_state::completed, job_state::failed, job_state::cancelled}, 180s);
  const std::string out = test::slurp(u.home / "lay.txt");
  INFO("lay.txt:\n" << out);
  // --ntasks-per-node=1: one task on each node (without it, the job's
  // first two tasks, both on its first node).
  std::string npn;
  for (const auto& l : matching(out, "npn .*")) npn += l.substr(4) + "\n";
  CHECK(one_per_node(npn));
  // -N 2: the two tasks on two nodes.
  std::string two;
  for (const auto& l : matching(out, "twonodes .*")) two += l.substr(9) + "\n";
  CHECK(one_per_node(two));
  std::string plain;
  for (const auto& l : matching(out, "plain .*")) plain += l.substr(6) + "\n";
  const auto p = sorted_lines(plain);
  REQUIRE(p.size() == 2);
  CHECK(p[0].substr(2) == p[1].substr(2));
  // -c 2: one task of both processors on each node, told so.
  const auto cpt = matching(out, "cpt .*");
  REQUIRE(cpt.size() == 2);
  std::string nodes;
  for (const auto& l : cpt) {
    std::smatch m;
    REQUIRE(std::regex_match(l, m, std::regex("cpt ([01]):([01]):2:(.*)")));
    nodes += std::string(m[1]) + ":" + std::string(m[2]) + "\n";
    CHECK(m[3] == "0-1");
  }
  CHECK(one_per_node(nodes));
  // What does not fit is refused before anything runs, as Slurm's.
  CHECK(out.find("big srun: error: More processors requested than permitted: the job's allocation has room for 2 "
                 "tasks of 2 processors, not 3\n") != std::string::npos);
  CHECK(out.find("layout rc=4\n") != std::string::npos);
  // The step's rankfile is gone with its step.
  CHECK(out.find("left 0\n") != std::string::npos);
  // Concurrent steps: each on a node of its own, the third after them.
  const auto a = matching(out, "stepA [01]"), b = matching(out, "stepB [01]");
  REQUIRE(a.size() == 2);
  REQUIRE(b.size() == 2);
  CHECK(a[0] == a[1]);
  CHECK(b[0] == b[1]);
  CHECK(a[0].back() != b[0].back());
  CHECK(std::regex_search(out, std::regex("C srun: Job [0-9]+ step creation temporarily disabled, retrying "
                                          "\\(Requested nodes are busy\\)\n")));
  CHECK(std::regex_search(out, std::regex("C srun: Step created for StepId=[0-9]+\\.[0-9]+\n")));
  CHECK(matching(out, "C stepC [01]").size() == 1);
  // --overlap, while A and B hold every processor: it runs at once, on
  // the job's first task's, and says nothing about waiting.
  const auto d = matching(out, "D .*");
  REQUIRE(d.size() == 1);
  CHECK(std::regex_match(d[0], std::regex("D stepD [01]")));
}

TEST_CASE("sbatch --wait exits with the job's code; scontrol show config answers; a job's partition and nodes are squeue's") {
  test::slurm_case fixture(two_nodes, 2, "aqs-slurmhome-c");
  auto& [db, c, s, u] = fixture;

  // --wait: Slurm's "Submitted batch job N", then the job's exit code.
  auto r = s.run("sbatch", {"--wait", "-o", "/dev/null", "--wrap", "sleep 1; exit 7"}, &u, 120s);
  INFO("sbatch --wait: " << r.out << r.err);
  CHECK(r.status == 7);
  CHECK(std::regex_match(r.out, std::regex("Submitted batch job [0-9]+\n")));
  r = s.run("sbatch", {"-W", "--parsable", "-o", "/dev/null", "--wrap", "true"}, &u, 120s);
  CHECK(r.status == 0);
  REQUIRE(std::regex_match(r.out, std::regex("[0-9]+\n")));
  CHECK(c.job(std::stoll(r.out))->state == job_state::completed);

  // scontrol show config: Key = Value lines, MinJobAge as engines parse it.
  r = s.run("scontrol", {"show", "config"}, &u);
  CHECK(r.status == 0);
  CHECK(r.out.starts_with("Configuration data as of "));
  CHECK(std::regex_search(r.out, std::regex("\nMinJobAge +=\\s*300 sec\n")));
  CHECK(std::regex_search(r.out, std::regex("\nNodeCount +=\\s*2\n")));

  // A refused option is named once.
  r = s.run("sbatch", {"--hold", "--wrap", "true"}, &u);
  CHECK(r.status == 1);
  CHECK(r.err.find("(--hold)") != std::string::npos);
  CHECK(r.err.find("(--hold) (--hold)") == std::string::npos);

  // A job's SLURM_JOB_PARTITION is the partition squeue shows for it; a
  // finished 2-node job shows 2 nodes in squeue and sacct.
  r = s.run("sbatch", {"--parsable", "-N", "2", "-n", "4", "-o", "part.txt", "--wrap",
                       "echo part=$SLURM_JOB_PARTITION; squeue -h -j $SLURM_JOB_ID -o 'queue=%P'"},
            &u);
  REQUIRE(r.status == 0);
  const std::int64_t id = std::stoll(r.out);
  c.wait_state(id, {job_state::completed, job_state::failed}, 120s);
  const std::string part = test::slurp(u.home / "part.txt");
  INFO("part.txt: " << part);
  CHECK(part.find("part=main\n") != std::string::npos);
  CHECK(part.find("queue=main\n") != std::string::npos);
  r = s.run("squeue", {"-h", "-j", std::to_string(id), "-o", "%D %t"}, &u);
  CHECK(r.out == "2 CD\n");
  r = s.run("sacct", {"-X", "-n", "-P", "--format=NNodes,State", "-j", std::to_string(id)}, &u);
  CHECK(r.out == "2|COMPLETED\n");
}

TEST_CASE("salloc runs a command in an allocation where srun starts steps, and says so as Slurm's does") {
  test::slurm_case fixture(two_nodes, 2, "aqs-slurmhome-e");
  auto& [db, c, s, u] = fixture;
  auto r = s.run("salloc", {"-n", "2", "srun", "true"}, &u, 120s);
  INFO("salloc: " << r.out << r.err);
  CHECK(r.status == 0);
  CHECK(std::regex_search(r.err, std::regex("salloc: Granted job allocation [0-9]+\n")));
  CHECK(std::regex_search(r.err, std::regex("salloc: Relinquishing job allocation [0-9]+\n")));
  r = s.run("salloc", {"-n", "4", "srun", "-l", "sh", "-c", "echo in $SLURM_JOB_ID"}, &u, 120s);
  CHECK(r.status == 0);
  const auto lines = sorted_lines(r.out);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].starts_with("0: in "));
  CHECK(lines[3].starts_with("3: in "));
  CHECK(c.jobs().size() == 2);  // one job per salloc; srun's steps are no jobs
  r = s.run("salloc", {"-n", "1", "sh", "-c", "exit 6"}, &u, 120s);
  CHECK(r.status == 6);
  // Without a command: the shell, here reading its commands from a pipe
  // (tests/integration/sstat/salloc_test.cpp drives it on a terminal).
  r = s.sh("echo 'srun hostname | wc -l; exit 4' | SHELL=/bin/sh salloc -n 2", &u);
  INFO("salloc shell: " << r.out << r.err);
  CHECK(r.status == 4);
  CHECK(r.out == "2\n");
  CHECK(std::regex_search(r.err, std::regex("salloc: Granted job allocation [0-9]+\n")));
  CHECK(std::regex_search(r.err, std::regex("salloc: Relinquishing job allocation [0-9]+\n")));
}

TEST_CASE("an MPI program under srun -n 8 across two namespace hosts is one MPI job of 8 ranks on both hosts") {
  if (!testbed::netns_hosts::available()) {
    MESSAGE("skipped: needs root and ip netns");
    return;
  }
  test::test_database db;
  test::cluster::options o = two_nodes(db, 4);
  o.netns = true;
  o.heartbeat_timeout_s = 30;
  test::cluster c(o);
  c.wait_nodes_up(2);
  const test::slurm_env s{c, test::slurm_bin(c)};
  test::users().ensure("aqs-slurmhome-d");
  const test::test_user u = c.user("aqs-slurmhome-d");
  const auto r = s.run("srun", {"-n", "8", "-l", MPI_PROBE}, &u, 240s);
  INFO("srun: " << r.out << r.err);
  CHECK(r.status == 0);
  std::set<std::string> hosts;
  std::set<std::string> ranks;
  const std::regex line("( ?[0-9]): rank ([0-9]) host (\\S+) cpus .*");
  for (const auto& l : sorted_lines(r.out)) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) continue;
    CHECK(std::stoi(m[1]) == std::stoi(m[2]));  // srun's task number is the MPI rank
    ranks.insert(m[2]);
    hosts.insert(m[3]);
  }
  CHECK(ranks.size() == 8);
  CHECK(hosts.size() == 2);
}
