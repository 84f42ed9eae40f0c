// End to end, MPI launch: a rigid job's plain `mpirun ./app` under real aqsd
// and agents starts exactly one rank per processor of its map, each bound to
// that processor's cpu, and fkill or a time limit takes every rank down;
// `frun -n N ./app` does the same for an MPI program, as srun does.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "e2e.hpp"
#include "probe_report.hpp"

using test::job_processes_mentioning;

namespace {

// Two virtual nodes of 3 processors: a 5-processor job spans both.
test::cluster::options two_nodes_of_three(const test::test_database& db) { return test::nodes_of(db, 2, 3); }

}  // namespace

TEST_CASE("a rigid job's plain mpirun runs one rank per processor, each on its cpu, and fkill or a time limit ends them all") {
  test::test_database db;
  test::cluster c(two_nodes_of_three(db));
  c.wait_nodes_up(2);
  const fs::path work = c.workdir();

  // 5 processors over both (virtual) nodes; no -np, no hostfile: the agent's
  // environment says it all.
  const fs::path script = work / "probe.sh";
  std::ofstream(script) << "#!/bin/bash\necho \"cpus $AQS_CPUS\"\nexec " MPIEXEC " " MPI_PROBE "\n";
  const std::int64_t id = c.submit({"-n", "5", "-o", (work / "probe.out").string(), script.string()});
  const auto j = c.wait_state(id, {job_state::completed, job_state::failed}, 120s);
  const std::string out = slurp(work / "probe.out");
  REQUIRE_MESSAGE(j.state == job_state::completed, out);
  // Which cpu each processor of the map is pinned to, as the agent said.
  const auto report = test::read_probe_report(out);
  const auto& cpus = report.cpus;
  REQUIRE(cpus.size() == 5);
  REQUIRE_MESSAGE(report.ranks.size() == 5, out);
  for (int r = 0; r < 5; ++r) {
    CHECK_MESSAGE(report.ranks.at(r).second == cpus[static_cast<std::size_t>(r)], "rank " << r);
  }

  // A long run, killed: no rank survives (mpirun and 4 ranks name the probe).
  const fs::path long_script = work / "long.sh";
  std::ofstream(long_script) << "#!/bin/bash\nexec " MPIEXEC " " MPI_PROBE " 300\n";
  const std::int64_t k = c.submit({"-n", "4", "-o", (work / "long.out").string(), long_script.string()});
  c.wait_state(k, {job_state::running});
  for (int i = 0; i < 300 && job_processes_mentioning(MPI_PROBE).size() < 5; ++i) std::this_thread::sleep_for(50ms);
  CHECK(job_processes_mentioning(MPI_PROBE).size() >= 5);
  CHECK(c.cmd(bin().fkill, {std::to_string(k)}).status == 0);
  CHECK(c.wait_state(k, {job_state::cancelled, job_state::failed}, 60s).state == job_state::cancelled);
  CHECK(eventually([] { return job_processes_mentioning(MPI_PROBE).empty(); }, 15s));

  // The same at a time limit.
  const std::int64_t t = c.submit({"-n", "4", "-t", "0:02", "-o", (work / "limit.out").string(), long_script.string()});
  CHECK(c.wait_state(t, {job_state::timeout, job_state::failed, job_state::completed}, 60s).state == job_state::timeout);
  CHECK(eventually([] { return job_processes_mentioning(MPI_PROBE).empty(); }, 15s));
}

TEST_CASE("frun -n 5 on an MPI program runs one rank per processor, each on its cpu, like srun; other commands run once") {
  test::test_database db;
  test::cluster c(two_nodes_of_three(db));
  c.wait_nodes_up(2);

  // No mpirun on the command line: frun sees that the probe needs libmpi.so.
  const auto r = c.cmd(bin().frun, {"-n", "5", MPI_PROBE});
  INFO("frun's stdout: " << r.out);
  INFO("frun's stderr: " << r.err);
  REQUIRE(r.status == 0);
  const auto report = test::read_probe_report(r.out);
  const auto& cpus = report.cpus;
  REQUIRE(cpus.size() == 5);
  REQUIRE(report.ranks.size() == 5);
  for (int rank = 0; rank < 5; ++rank) {
    CHECK_MESSAGE(report.ranks.at(rank).second == cpus[static_cast<std::size_t>(rank)], "rank " << rank);
  }

  // --no-mpi: the same program once, as an MPI singleton.
  const auto once = c.cmd(bin().frun, {"--no-mpi", "-n", "2", MPI_PROBE});
  INFO("--no-mpi stdout: " << once.out);
  INFO("--no-mpi stderr: " << once.err);
  CHECK(once.status == 0);
  const auto single = test::read_probe_report(once.out);
  CHECK(single.ranks.size() == 1);
  CHECK(single.ranks.count(0) == 1);

  // Not an MPI program: once, as always.
  const auto hello = c.cmd(bin().frun, {"-n", "2", "echo", "hello"});
  CHECK(hello.status == 0);
  CHECK(hello.out == "hello\n");

  // frun exits with mpirun's code: here that of the ranks (--mpi forces the
  // launch of what is no MPI program).
  const auto failing = c.cmd(bin().frun, {"--mpi", "-n", "2", "/bin/sh", "-c", "exit 3"});
  INFO("--mpi sh stderr: " << failing.err);
  CHECK(failing.status == 3);
}
