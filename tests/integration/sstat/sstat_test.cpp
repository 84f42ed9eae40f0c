// aqs-sstat (issue 33): a running job's steps, measured by the agents of its
// nodes (/proc: memory now and at its peak, CPU time), in Slurm's fields;
// the owner and root are answered, another user is refused by the agent.
#include <fstream>
#include <regex>
#include <sstream>

#include "e2e.hpp"
#include "run_users.hpp"

namespace {

fs::path slurm_dir() { return fs::path(AQS_SLURM_BIN_DIR); }

std::map<std::string, std::string> env_of(const test::cluster& c) {
  return {{"AQS_SOCKET", c.socket()}, {"PATH", slurm_dir().string() + ":/usr/local/bin:/usr/bin:/bin"}};
}

test::run_result sstat(const test::cluster& c, std::vector<std::string> args, const test::test_user* u) {
  args.insert(args.begin(), (slurm_dir() / "aqs-sstat").string());
  if (u == nullptr) return test::run(args, env_of(c));
  return test::run(args, env_of(c), u->uid, u->gid, u->home.string());
}

// "5.0|61.20M|..." -> fields.
std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  for (std::string f; std::getline(ss, f, sep);) out.push_back(f);
  if (!line.empty() && line.back() == sep) out.emplace_back();
  return out;
}

// Slurm's memory text back to KiB ("61.20M" -> 62668).
double kib(const std::string& s) {
  if (s.empty()) return -1;
  const double v = std::stod(s);
  switch (s.back()) {
    case 'K': return v;
    case 'M': return v * 1024;
    case 'G': return v * 1024 * 1024;
    default: return v / 1024;
  }
}

// "00:01:02" / "00:01.500" -> seconds.
double seconds(const std::string& s) {
  std::smatch m;
  if (std::regex_match(s, m, std::regex("(\\d+):(\\d+):(\\d+)"))) {
    return std::stod(m[1]) * 3600 + std::stod(m[2]) * 60 + std::stod(m[3]);
  }
  return -1;
}

}  // namespace

TEST_CASE("sstat shows a running step's memory and CPU time to its owner and root, and refuses another user") {
  test::test_database db;
  test::cluster c(test::nodes_of(db, 1, 2));
  test::users().ensure("aqs-slurm-sa");
  test::users().ensure("aqs-slurm-sb");
  const test::test_user a = c.user("aqs-slurm-sa");
  const test::test_user b = c.user("aqs-slurm-sb");

  // Each task holds 64 MiB it has written (perl's copy makes it 128) and
  // does a fixed amount of work (several CPU seconds, however loaded the
  // machine), then sleeps; the batch script itself only waits.
  std::ofstream(a.home / "job.sh")
      << "#!/bin/sh\n"
         "#SBATCH -n 2 -o out.txt\n"
         "srun -n 2 perl -e '$x = \"x\" x (64 << 20); $i = 0; $i++ while $i < 2e8; sleep 300' &\n"
         // sstat inside the job: Slurm's name, from the job's slurm-bin.
         "sleep 1; sstat -j $SLURM_JOB_ID.batch -n -P -o JobID,NTasks > inside.txt 2>&1\n"
         "wait\n";
  ::chown((a.home / "job.sh").c_str(), a.uid, a.gid);
  const auto sub = test::run({(slurm_dir() / "aqs-sbatch").string(), "--parsable", "job.sh"}, env_of(c), a.uid, a.gid,
                             a.home.string());
  INFO("sbatch: " << sub.out << sub.err);
  REQUIRE(sub.status == 0);
  const std::int64_t id = std::stoll(sub.out);
  const std::string ids = std::to_string(id);
  c.wait_state(id, {job_state::running}, 60s);

  // Until both tasks have their memory and their CPU time.
  std::vector<std::string> row;
  test::run_result r;
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (std::chrono::steady_clock::now() < deadline) {
    r = sstat(c, {"-j", ids, "-P", "-n", "-o", "JobID,MaxRSS,AveRSS,AveCPU,NTasks,MaxVMSize,MaxRSSNode"}, &a);
    row = split(r.out.substr(0, r.out.find('\n')), '|');
    if (r.status == 0 && row.size() == 7 && row[4] == "2" && kib(row[1]) >= 64 * 1024 && seconds(row[3]) >= 1) break;
    std::this_thread::sleep_for(1s);
  }
  INFO("sstat: " << r.status << "\n" << r.out << r.err);
  REQUIRE(row.size() == 7);
  CHECK(row[0] == ids + ".0");  // the first normal step: srun's
  CHECK(kib(row[1]) >= 64 * 1024);
  CHECK(kib(row[1]) < 1024 * 1024);
  CHECK(kib(row[2]) >= 64 * 1024);  // each task holds its 64 MiB still
  CHECK(seconds(row[3]) >= 1);
  CHECK(row[4] == "2");
  CHECK(kib(row[5]) >= kib(row[1]));
  CHECK(row[6] == "node0");
  CHECK(r.err.empty());

  // The table, with Slurm's header; the batch step and all steps.
  r = sstat(c, {"-j", ids, "--format=JobID,NTasks"}, &a);
  CHECK(r.status == 0);
  CHECK(std::regex_search(r.out, std::regex("^JobID +NTasks \n-{12} -{8} \n" + ids + "\\.0 +2 \n$")));
  r = sstat(c, {"-j", ids + ".batch", "-P", "-n", "-o", "jobid,ntasks"}, &a);
  CHECK(r.out == ids + ".batch|1\n");
  r = sstat(c, {"-a", "-j", ids, "-p", "-n", "-o", "JobID"}, &a);
  CHECK(r.out == ids + ".0|\n" + ids + ".batch|\n");
  r = sstat(c, {"-j", ids + ".7", "-P", "-n"}, &a);
  CHECK(r.out.empty());
  CHECK(r.err == "sstat: error: StepId=" + ids + ".7 not found running.\n");
  // From inside the job, by its Slurm name.
  for (int i = 0; i < 120 && test::slurp(a.home / "inside.txt").find('\n') == std::string::npos; ++i) {
    std::this_thread::sleep_for(500ms);
  }
  CHECK(test::slurp(a.home / "inside.txt") == ids + ".batch|1\n");
  // Root is answered too.
  r = sstat(c, {"-j", ids, "-P", "-n", "-o", "NTasks"}, nullptr);
  CHECK(r.out == "2\n");

  // Another user: the agent refuses (whatever sstat would print), and the
  // request straight to the agent's socket gets nothing either.
  r = sstat(c, {"-j", ids, "-P", "-n", "-o", "JobID,MaxRSS,Pids"}, &b);
  INFO("as b: " << r.out << r.err);
  CHECK(r.out.empty());
  CHECK(r.err == "sstat: error: problem getting step_layout for JobId=" + ids + ": Invalid user id\n");
  r = sstat(c, {"-a", "-j", ids + ".batch", "-i"}, &b);
  CHECK(r.out.find(ids + ".") == std::string::npos);

  // Bad input.
  r = sstat(c, {}, &a);
  CHECK(r.status == 1);
  CHECK(r.err == "sstat: error: You didn't give me any jobs to stat.\n");
  r = sstat(c, {"-j", ids, "-o", "MaxBogus"}, &a);
  CHECK(r.status == 1);
  CHECK(r.err == "sstat: error: Invalid field requested: \"MaxBogus\"\n");
  r = sstat(c, {"-j", "x1"}, &a);
  CHECK(r.status == 1);
  r = sstat(c, {"--nope"}, &a);
  CHECK(r.status == 1);
  CHECK(r.err.find("unrecognized option '--nope'") != std::string::npos);

  // Not running: Slurm's words, exit status 0 as Slurm's.
  c.cmd(test::bin().fkill, {ids});
  c.wait_state(id, {job_state::cancelled}, 60s);
  r = sstat(c, {"-j", ids, "-n"}, &a);
  CHECK(r.status == 0);
  CHECK(r.out.empty());
  CHECK(r.err == "sstat: error: No steps running for job " + ids + "\n");
  r = sstat(c, {"-j", "999999", "-n"}, &a);
  CHECK(r.status == 0);
  CHECK(r.err == "sstat: error: couldn't get steps for job 999999\n");
}
