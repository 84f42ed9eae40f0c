// Unit tests of job_environment: the variables a job and a step of a job get, who they run as, and their MPI placement.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "file_text.hpp"
#include "job_environment.hpp"
#include "temp_dir.hpp"

using namespace aqs;
using namespace aqs::node;

namespace {

// Every entry of `env` named `key` ("KEY=VALUE"), in order.
std::vector<std::string> values_of(const std::vector<std::string>& env, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& kv : env) {
    if (kv.rfind(key + "=", 0) == 0) out.push_back(kv.substr(key.size() + 1));
  }
  return out;
}

// The one value of `key`; "<unset>" or "<N times>" otherwise.
std::string value_of(const std::vector<std::string>& env, const std::string& key) {
  const auto v = values_of(env, key);
  if (v.empty()) return "<unset>";
  if (v.size() > 1) return "<" + std::to_string(v.size()) + " times>";
  return v.front();
}

node_environment node_n1() {
  node_environment n;
  n.node_name = "n1";
  n.socket_path = "/run/aqs/aqsd.sock";
  return n;
}

// A batch job of uid 1000 on two processors of node n1, with no placement.
protocol::launch batch_job() {
  protocol::launch l;
  l.id = 7;
  l.job_id = 42;
  l.job.name = "sim";
  l.job.workdir = "/home/ann/run";
  l.job.environment = {"HOME=/home/ann", "PATH=/usr/bin:/bin"};
  l.user = "ann";
  l.uid = 1000;
  l.gid = 100;
  l.procs = "0110";
  l.nprocs = 2;
  l.local_cpus = {1, 2};
  l.nodelist = "n1";
  l.job_token = "secret-42";
  return l;
}

// What aqsd sends for a step of job 42 that aqs-rsh starts on another host
// (remote_exec): the job's token and placement, a shell command.
protocol::launch step_of_job() {
  protocol::launch l = batch_job();  // the same job, user and token
  l.id = 9;
  l.job.name = "step";
  l.job.argv = {"/bin/sh", "-c", "orted --foo"};
  l.job.workdir = "/";
  l.job.environment = {"PATH=/usr/bin:/bin", "AQS_JOB_ID=42"};
  l.job.stdout_pattern = "/dev/null";
  l.procs = "111";
  l.nprocs = 3;
  l.local_cpus = {1};
  l.nodelist = "a,b";
  l.proc_hosts = {"a", "a", "b"};
  l.proc_cpus = {3, 0, 1};
  return l;
}

// batch_job() made adaptive with -c 2 (at least one rank), on six
// processors (`procs` in the cluster's map): four on a, two on b.
protocol::launch adaptive_c2(std::string procs) {
  protocol::launch l = batch_job();
  l.job.adaptive = true;
  protocol::job_geometry g;
  g.ntasks = 1;  // its minimum, in ranks
  g.cpus_per_task = 2;
  l.job.geometry = g;
  l.procs = std::move(procs);
  l.nprocs = 6;
  l.nodelist = "a:0-3,b:0-1";
  return l;
}

// CHECKs that each key of `want` has its one value in `env` ("<unset>": none).
void check_values(const std::vector<std::string>& env, const std::vector<std::pair<std::string, std::string>>& want) {
  for (const auto& [key, value] : want) {
    CAPTURE(key);
    CHECK(value_of(env, key) == value);
  }
}

struct warnings {
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& w) { lines.push_back(w); };
  }
};

}  // namespace

TEST_CASE("a job gets its own variables first, then AQS's, each once") {
  test::temp_dir spool;
  warnings w;
  const launch_spec spec = job_environment(batch_job(), node_n1(), false, spool.path() / "job-42.mpi", w.sink());
  const auto& env = spec.env;
  REQUIRE(env.size() >= 2);
  CHECK(env[0] == "HOME=/home/ann");
  // Slurm's names (the spool's slurm-bin) first on its PATH, then the job's own.
  CHECK(env[1] == "PATH=" + (spool.path() / "slurm-bin").string() + ":/usr/bin:/bin");
  check_values(env, {{"AQS_JOB_ID", "42"}, {"AQS_JOB_NAME", "sim"}, {"AQS_PROCS", "0110"}, {"AQS_NPROCS", "2"},
                     {"AQS_NODELIST", "n1"}, {"AQS_NODENAME", "n1"}, {"AQS_SOCKET", "/run/aqs/aqsd.sock"},
                     {"AQS_SERVER", "<unset>"}, {"AQS_JOB_TOKEN", "secret-42"}});
  // No placement: no MPI variables, no launch files, nothing to warn about.
  check_values(env, {{"AQS_CPUS", "<unset>"}, {"OMPI_MCA_orte_default_hostfile", "<unset>"},
                     {"OMPI_ALLOW_RUN_AS_ROOT", "<unset>"}});
  CHECK_FALSE(std::filesystem::exists(spool.path() / "job-42.mpi"));
  CHECK(w.lines.empty());
  for (const auto& kv : env) CHECK_MESSAGE(kv.find('=') != std::string::npos, kv);
}

TEST_CASE("what the submitter's environment says about AQS never reaches the job; AQS's own values do") {
  // fsub run inside another job captures that job's variables.
  protocol::launch l = batch_job();
  l.job.environment = {"AQS_JOB_ID=5", "AQS_JOB_TOKEN=other-job", "AQS_CPUS=7", "AQS_HOSTS=x*1",
                       "AQS_NODENAME=elsewhere", "AQS_SOCKET=/tmp/fake", "KEEP=me"};
  l.job_token.reset();
  const launch_spec spec = job_environment(l, node_n1(), false, "/nonexistent/job-42.mpi", {});
  check_values(spec.env, {{"AQS_JOB_ID", "42"}, {"AQS_JOB_TOKEN", "<unset>"}, {"AQS_CPUS", "<unset>"},
                          {"AQS_HOSTS", "<unset>"}, {"AQS_NODENAME", "n1"}, {"AQS_SOCKET", "/run/aqs/aqsd.sock"},
                          {"KEEP", "me"}});
}

TEST_CASE("a job runs as its user only when the agent is root, in its directory, with its umask and cpus") {
  protocol::launch l = batch_job();
  const launch_spec as_user = job_environment(l, node_n1(), false, "/nonexistent", {});
  CHECK_FALSE(as_user.uid.has_value());
  CHECK_FALSE(as_user.gid.has_value());
  CHECK(as_user.workdir == "/home/ann/run");
  CHECK(as_user.umask == 022);  // an old client sends none
  CHECK(as_user.cpus == std::vector<int>{1, 2});
  CHECK(as_user.argv.empty());
  CHECK(as_user.stdout_path.empty());

  l.job.umask = 01027;  // only the permission bits count
  const launch_spec as_root = job_environment(l, node_n1(), true, "/nonexistent", {});
  REQUIRE(as_root.uid.has_value());
  REQUIRE(as_root.gid.has_value());
  CHECK(*as_root.uid == 1000);
  CHECK(*as_root.gid == 100);
  CHECK(as_root.umask == 027);
}

TEST_CASE("a job of root may run mpirun as root") {
  protocol::launch l = batch_job();
  l.uid = 0;
  const launch_spec spec = job_environment(l, node_n1(), true, "/nonexistent", {});
  check_values(spec.env, {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}});
}

TEST_CASE("over TCP a job learns aqsd's address instead of its socket") {
  node_environment n = node_n1();
  n.socket_path.reset();
  n.server = "head:7123";
  const launch_spec spec = job_environment(batch_job(), n, false, "/nonexistent", {});
  check_values(spec.env, {{"AQS_SERVER", "head:7123"}, {"AQS_SOCKET", "<unset>"}});
}

TEST_CASE("a step of a job gets the job's token, its placement and MPI launch files for its mpirun") {
  test::temp_dir spool;
  node_environment n = node_n1();
  n.rsh_agent = "/usr/libexec/aqs-rsh";
  const auto mpi_dir = spool.path() / "job-42.mpi";
  warnings w;
  const launch_spec spec = job_environment(step_of_job(), n, true, mpi_dir, w.sink());
  CHECK(w.lines.empty());
  check_values(spec.env, {{"AQS_JOB_ID", "42"}, {"AQS_JOB_NAME", "step"}, {"AQS_JOB_TOKEN", "secret-42"},
                          {"AQS_CPUS", "3,0,1"}, {"AQS_HOSTS", "a*2,b*1"},
                          {"OMPI_MCA_plm_rsh_agent", "/usr/libexec/aqs-rsh"},
                          {"OMPI_MCA_orte_default_hostfile", (mpi_dir / "hostfile").string()},
                          {"OMPI_MCA_rmaps_rank_file_path", (mpi_dir / "rankfile").string()}});
  CHECK(std::filesystem::is_regular_file(mpi_dir / "hostfile"));
  CHECK(std::filesystem::is_regular_file(mpi_dir / "rankfile"));
  CHECK(spec.cpus == std::vector<int>{1});
  // AQS_JOB_ID from the step's environment is replaced, not repeated.
  CHECK(values_of(spec.env, "AQS_JOB_ID").size() == 1);
}

TEST_CASE("an adaptive job whose launch files cannot be written still gets mpirun's adaptive placement and a warning") {
  test::temp_dir spool;
  const auto blocker = spool.path() / "not-a-directory";
  std::ofstream(blocker) << "x";
  protocol::launch l = step_of_job();
  l.job.name = "grow";
  l.job.adaptive = true;
  warnings w;
  const launch_spec spec = job_environment(l, node_n1(), false, blocker / "job-42.mpi", w.sink());
  // (The agent's Slurm names cannot be made there either: said once per agent.)
  std::erase_if(w.lines, [](const std::string& x) { return x.find("no Slurm names on their PATH") != std::string::npos; });
  REQUIRE(w.lines.size() == 1);
  CHECK(w.lines[0].find("job 42: no MPI launch files") == 0);
  check_values(spec.env, {{"OMPI_MCA_hwloc_base_binding_policy", "none"}, {"OMPI_MCA_rmaps_base_oversubscribe", "1"},
                          {"OMPI_MCA_orte_default_hostfile", "<unset>"}});
  CHECK(value_of(spec.env, "AQS_CPUS") == "3,0,1");  // the shim still pins its ranks
}

TEST_CASE("an adaptive job with -c counts its ranks as Slurm's tasks: whole ranks of its processors per node") {
  test::temp_dir spool;
  const protocol::launch l = adaptive_c2("1111000011");
  const launch_spec spec = job_environment(l, node_n1(), false, spool.path() / "job-42.mpi", {});
  check_values(spec.env, {{"SLURM_CPUS_PER_TASK", "2"}, {"SLURM_NTASKS", "3"}, {"SLURM_TASKS_PER_NODE", "2,1"},
                          {"SLURM_JOB_CPUS_PER_NODE", "4,2"}, {"AQS_NPROCS", "6"}});
  // The shim's processors per rank.
  CHECK(value_of(spec.env, "AQS_CPUS_PER_TASK") == "2");
}

TEST_CASE("an adaptive job with -c starts one rank per C processors under plain mpirun, and C=1 changes nothing") {
  test::temp_dir spool;
  protocol::launch l = adaptive_c2("111111");
  l.proc_hosts = {"a", "a", "a", "a", "b", "b"};
  l.proc_cpus = {0, 1, 2, 3, 0, 1};
  l.job.environment = {"AQS_CPUS_PER_TASK=8"};  // another job's, as fsub inside a job passes it on
  const auto mpi_dir = spool.path() / "job-42.mpi";
  node_environment n = node_n1();
  n.rsh_agent = "/usr/libexec/aqs-rsh";
  const launch_spec spec = job_environment(l, n, false, mpi_dir, {});
  CHECK(values_of(spec.env, "AQS_CPUS_PER_TASK") == std::vector<std::string>{"2"});
  CHECK(test::slurp(mpi_dir / "hostfile") == "a slots=2\nb slots=1\n");
  // Without -c: one slot per processor, and no AQS_CPUS_PER_TASK (not even another job's).
  l.job.geometry.reset();
  const launch_spec plain = job_environment(l, n, false, mpi_dir, {});
  CHECK(value_of(plain.env, "AQS_CPUS_PER_TASK") == "<unset>");
  CHECK(test::slurp(mpi_dir / "hostfile") == "a slots=4\nb slots=2\n");
}

TEST_CASE("every job finds Slurm's names first on its PATH: the agent's own links to the aqs- commands") {
  test::temp_dir spool;
  warnings w;
  protocol::launch l = batch_job();
  const auto dir = spool.path() / "slurm-bin";
  // A PATH that already has it (fsub inside a job): once, first.
  l.job.environment = {"PATH=/opt/slurm/bin:" + dir.string() + ":/usr/bin"};
  const launch_spec spec = job_environment(l, node_n1(), false, spool.path() / "job-42.mpi", w.sink());
  CHECK(value_of(spec.env, "PATH") == dir.string() + ":/opt/slurm/bin:/usr/bin");
  CHECK(w.lines.empty());
  struct stat sb {};
  REQUIRE(::lstat(dir.c_str(), &sb) == 0);
  CHECK(S_ISDIR(sb.st_mode));
  CHECK((sb.st_mode & 07777) == 0755);
  CHECK(sb.st_uid == ::geteuid());
  for (const char* n : {"srun", "sbatch", "squeue", "scancel", "scontrol", "sacct", "sinfo"}) {
    CAPTURE(n);
    const auto link = dir / n;
    REQUIRE(std::filesystem::is_symlink(link));
    CHECK(std::filesystem::read_symlink(link).filename() == std::string("aqs-") + n);
    CHECK(::access(link.c_str(), X_OK) == 0);
  }
  // A link someone changed is put back at the next launch; no PATH: the default after it.
  std::filesystem::remove(dir / "srun");
  std::filesystem::create_symlink("/bin/false", dir / "srun");
  l.job.environment = {};
  const launch_spec again = job_environment(l, node_n1(), false, spool.path() / "job-43.mpi", w.sink());
  CHECK(std::filesystem::read_symlink(dir / "srun").filename() == "aqs-srun");
  CHECK(value_of(again.env, "PATH") == dir.string() + ":/usr/local/bin:/usr/bin:/bin");
}
