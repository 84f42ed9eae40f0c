// The Faucets events on a real adaptive MPI app (jacobi2d): a job that asks
// for more processors in its expensive phase (AQS_Request_range) gets them
// once they are free and gives them back after; a suspended adaptive job
// resumed on other processors finishes bit-identical to a run never resized.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <thread>

#include "aqs_cluster.hpp"
#include "client/client_connection.hpp"
#include "file_text.hpp"
#include "test_pg.hpp"

namespace fs = std::filesystem;
using namespace aqs;
using namespace std::chrono_literals;
using core::job_state;
using test::bin;
using test::slurp;

namespace {

const char* k_mpi_env = "export OMPI_MCA_btl_vader_single_copy_mechanism=none\n";

test::cluster::options small(const test::test_database& db, int nodes, int procs) {
  test::cluster::options o;
  o.db = db.conninfo();
  o.nodes = nodes;
  o.procs_per_node = procs;
  return o;
}

// jacobi2d never resized: the grid every run must end with.
fs::path reference(const fs::path& work, int iters) {
  const fs::path ref = work / "ref.grid";
  auto r = test::run({MPIEXEC, "--oversubscribe", "--bind-to", "none", "-np", "2", JACOBI2D_BINARY, "--rows", "64",
                      "--cols", "48", "--iters", std::to_string(iters), "--out", ref.string()},
                     {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  return ref;
}

void write_script(const fs::path& script, const std::string& range, const std::string& args) {
  std::ofstream(script) << "#!/bin/bash\n#AQS --adaptive " << range << "\n" << k_mpi_env
                        << "exec " MPIEXEC " --oversubscribe --bind-to none -np $AQS_NPROCS " JACOBI2D_BINARY " "
                        << args << "\n";
}

nlohmann::json history(const test::cluster& c, std::int64_t id) {
  client::connection conn(c.socket());
  return conn.call(protocol::job_history{conn.next_id(), id})["events"];
}

std::size_t ones(const std::string& map) { return static_cast<std::size_t>(std::count(map.begin(), map.end(), '1')); }

}  // namespace

TEST_CASE("an adaptive job asks to grow from 4 to 8, gets it once 8 are free, and gives them back after") {
  test::test_database db;
  test::cluster c(small(db, 2, 4));
  c.wait_nodes_up(2);
  const fs::path work = c.workdir();
  // 130 iterations (5 s) after the ask for 4..4: 50 (2 s) left a loaded
  // machine too little for aqsd's decision and the map to reach the job
  // before its end (range 4-4 stored, the job done 1.4 s later on 8).
  const int iters = 480;
  const fs::path ref = reference(work, iters);

  // A rigid job holds half the cluster for a while.
  const std::int64_t rigid = c.submit({"-n", "4", "--wrap", "sleep 8"});
  c.wait_state(rigid, {job_state::running});
  // The solver starts on 4 (4..4); at iteration 30 it asks for 4..8, at 350
  // for 4..4 again.
  const fs::path grid = work / "grow.grid", script = work / "grow.sh", out = work / "grow.out";
  write_script(script, "--min 4 --max 4",
               "--rows 64 --cols 48 --iters " + std::to_string(iters) +
                   " --pace-ms 40 --ask 30:4:8 --ask 350:4:4 --out " + grid.string());
  const std::int64_t a = c.submit({"-o", out.string(), script.string()});
  auto ja = c.wait_state(a, {job_state::running});
  CHECK(ja.nprocs == 4);

  // It cannot grow while the rigid job runs; then it does.
  std::size_t most = 0;
  bool grew_while_rigid_ran = false;
  job_state rigid_state = job_state::running;
  const auto until = std::chrono::steady_clock::now() + 120s;
  while (std::chrono::steady_clock::now() < until) {
    std::optional<protocol::job_info> ga, gr;
    for (const auto& j : c.jobs()) {
      if (j.id == a) ga = j;
      if (j.id == rigid) gr = j;
    }
    REQUIRE(ga);
    if (gr) rigid_state = gr->state;
    if (ga->nprocs > 4 && rigid_state == job_state::running) grew_while_rigid_ran = true;
    most = std::max<std::size_t>(most, static_cast<std::size_t>(ga->nprocs));
    if (core::is_final(ga->state)) break;
    std::this_thread::sleep_for(100ms);
  }
  CHECK_FALSE(grew_while_rigid_ran);
  CHECK(most == 8);
  const auto done = c.wait_state(a, {job_state::completed, job_state::failed}, 60s);
  CHECK(done.state == job_state::completed);
  CHECK(slurp(grid) == slurp(ref));
  CHECK(slurp(out).find("asked for 4-8 processors") != std::string::npos);

  // The history shows both requests and the maps that followed: 8, then 4.
  bool asked_up = false, asked_down = false;
  std::vector<std::size_t> sizes;
  for (const auto& e : history(c, a)) {
    const std::string reason = e.value("reason", "");
    if (reason.find("range 4-8 requested by the job") != std::string::npos) asked_up = true;
    if (reason.find("range 4-4 requested by the job") != std::string::npos) asked_down = true;
    if (reason.find("resize acknowledged") != std::string::npos) sizes.push_back(ones(e.value("new_procs", "")));
  }
  CHECK(asked_up);
  CHECK(asked_down);
  REQUIRE(sizes.size() >= 2);
  CHECK(sizes.front() == 8);
  CHECK(sizes.back() == 4);

  // A range the cluster can never give is refused with the reason; nothing changes.
  const std::int64_t p = c.submit({"--adaptive", "--min", "1", "--max", "2", "--wrap", "sleep 20"});
  auto r = c.cmd(bin().fctl, {"update", std::to_string(p), "--min", "12", "--max", "16"});
  CHECK(r.status == 1);
  CHECK(r.err.find("can never have that: it needs 12 processors; there are 8") != std::string::npos);
  CHECK(c.job(p)->max_pe == 2);
  c.cmd(bin().fkill, {std::to_string(p)});
  c.wait_idle();
}

TEST_CASE("a suspended adaptive MPI job resumed on other processors finishes bit-identical") {
  test::test_database db;
  test::cluster c(small(db, 2, 4));
  c.wait_nodes_up(2);
  const fs::path work = c.workdir();
  const int iters = 240;
  const fs::path ref = reference(work, iters);
  const auto alice = c.user("aqsctla");

  const fs::path grid = alice.home / "susp.grid", script = alice.home / "susp.sh", out = alice.home / "susp.out";
  write_script(script, "--min 2 --max 4", "--rows 64 --cols 48 --iters " + std::to_string(iters) +
                                              " --pace-ms 40 --out " + grid.string());
  const std::int64_t a = c.submit({"-o", out.string(), script.string()}, &alice, alice.home.string());
  auto ja = c.wait_state(a, {job_state::running});
  for (int i = 0; i < 300 && slurp(out).find("iter ") == std::string::npos; ++i) std::this_thread::sleep_for(100ms);
  ja = *c.job(a);
  const std::string before = ja.procs;

  auto r = c.cmd(bin().fctl, {"suspend", std::to_string(a)}, &alice);
  // A resize may be under way at that moment: try again once it is applied.
  for (int i = 0; i < 50 && r.status != 0 && r.err.find("being resized") != std::string::npos; ++i) {
    std::this_thread::sleep_for(200ms);
    r = c.cmd(bin().fctl, {"suspend", std::to_string(a)}, &alice);
  }
  REQUIRE_MESSAGE(r.status == 0, r.err);
  c.wait_state(a, {job_state::suspended});
  // Another job takes 6 of the 8 processors, the freed ones among them.
  const std::int64_t b = c.submit({"-n", "6", "--wrap", "sleep 6"});
  auto jb = c.wait_state(b, {job_state::running});
  r = c.cmd(bin().fctl, {"resume", std::to_string(a)}, &alice);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  // It resumes on the 2 left: another processor set than it stopped on.
  auto resumed = c.wait_state(a, {job_state::running, job_state::resizing});
  CHECK(resumed.procs != before);
  CHECK(resumed.nprocs == 2);
  const auto done = c.wait_state(a, {job_state::completed, job_state::failed}, 180s);
  CHECK(done.state == job_state::completed);
  CHECK(slurp(grid) == slurp(ref));
  c.wait_state(b, {job_state::completed});
  CHECK(test::job_processes_mentioning(grid.string()).empty());
}
