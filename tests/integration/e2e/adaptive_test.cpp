// End to end, adaptive: the jacobi2d example under real aqsd and agents,
// shrunk for a rigid job and grown back, its result bit-identical to a run
// that was never resized; the shim's faults (a failed spawn, a job that never
// calls MPI_Migrate) leave the cluster scheduling.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "aqs_cluster.hpp"
#include "client/client_connection.hpp"
#include "test_pg.hpp"
#include "file_text.hpp"

namespace fs = std::filesystem;
using namespace aqs;
using namespace std::chrono_literals;
using core::job_state;
using test::bin;

namespace {

using test::processes_mentioning;
using test::slurp;

std::size_t ones(const std::string& map) { return static_cast<std::size_t>(std::count(map.begin(), map.end(), '1')); }

// map a minus map b, as 0/1 text
std::string minus(const std::string& a, const std::string& b) {
  std::string out(std::max(a.size(), b.size()), '0');
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = (a[i] == '1' && (i >= b.size() || b[i] == '0')) ? '1' : '0';
  while (!out.empty() && out.back() == '0') out.pop_back();
  return out;
}
std::string trimmed(std::string s) {
  while (!s.empty() && s.back() == '0') s.pop_back();
  return s;
}

nlohmann::json history(const test::cluster& c, std::int64_t id) {
  client::connection conn(c.socket());
  return conn.call(protocol::job_history{conn.next_id(), id})["events"];
}

const char* k_mpi_env =
    "export OMPI_MCA_btl_vader_single_copy_mechanism=none\n";

std::string jacobi_args(const fs::path& out, int pace_ms) {
  return std::string(" --rows 64 --cols 48 --iters 240 --pace-ms ") + std::to_string(pace_ms) + " --out " + out.string();
}

// Whether one of the job's transitions gives a reason containing `text`.
bool history_says(const test::cluster& c, std::int64_t id, const std::string& text) {
  for (const auto& e : history(c, id)) {
    if (e.value("reason", "").find(text) != std::string::npos) return true;
  }
  return false;
}

// A job script running jacobi2d as an adaptive job of 2 to 4 processors.
void write_adaptive_jacobi(const fs::path& script, const std::string& args, const fs::path& grid) {
  std::ofstream(script) << "#!/bin/bash\n#AQS --adaptive --min 2 --max 4\n" << k_mpi_env
                        << "exec " MPIEXEC " --oversubscribe --bind-to none -np $AQS_NPROCS " JACOBI2D_BINARY " "
                        << args << " --out " << grid.string() << "\n";
}

// Waits (up to 20 s) until the job's output shows its first iterations.
void wait_for_iterations(const fs::path& out) {
  for (int i = 0; i < 200 && slurp(out).find("iter ") == std::string::npos; ++i) std::this_thread::sleep_for(100ms);
}

// The reference: jacobi_args' computation (240 iterations), never resized,
// 2 ranks of plain mpirun; returns the grid's path.
fs::path reference_grid(const fs::path& work) {
  const fs::path ref = work / "ref.grid";
  auto r = test::run({MPIEXEC, "--oversubscribe", "--bind-to", "none", "-np", "2", JACOBI2D_BINARY, "--rows", "64",
                      "--cols", "48", "--iters", "240", "--out", ref.string()},
                     {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  return ref;
}

test::cluster::options small(const test::test_database& db, int nodes, int procs) {
  test::cluster::options o;
  o.db = db.conninfo();
  o.nodes = nodes;
  o.procs_per_node = procs;
  return o;
}

}  // namespace

TEST_CASE("an adaptive jacobi2d shrinks for a rigid job, grows back, and ends bit-identical") {
  test::test_database db;
  test::cluster c(small(db, 2, 4));
  c.wait_nodes_up(2);
  const fs::path work = c.workdir();

  const fs::path ref = reference_grid(work);

  const fs::path out = work / "adaptive.grid";
  const fs::path script = work / "jacobi.sh";
  std::ofstream(script) << "#!/bin/bash\n#AQS --adaptive --min 2 --max 8\n" << k_mpi_env
                        << "exec " MPIEXEC " --oversubscribe --bind-to none -np $AQS_NPROCS " JACOBI2D_BINARY
                        << jacobi_args(out, 60) << "\n";
  const std::int64_t a = c.submit({"-J", "jacobi", "-o", (work / "jacobi.out").string(), script.string()});
  auto ja = c.wait_state(a, {job_state::running});
  // Alone on 8 processors, it gets all of them.
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (ja.nprocs != 8 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(100ms);
    ja = *c.job(a);
  }
  REQUIRE(ja.nprocs == 8);
  const std::string full = ja.procs;
  // Let it compute a while (its first progress line).
  wait_for_iterations(work / "jacobi.out");

  // Every state the job passes through, pushed by aqsd as it happens (a
  // RESIZING of a few milliseconds can fall between two polls).
  client::connection watch(c.socket());
  watch.call(protocol::watch_job{watch.next_id(), a});
  const std::int64_t b = c.submit({"-n", "4", "-J", "rigid", "-o", (work / "rigid.out").string(), "--wrap",
                                   "grep Cpus_allowed_list /proc/self/status; sleep 3"});
  // Watch the change as fjobs shows it.
  std::set<std::string> a_states;  // as fjobs showed them
  std::string a_after, b_procs;
  bool b_ran_before_ack = false;
  const auto t_end = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < t_end) {
    // Both jobs from one fjobs call: two calls could straddle the ack.
    std::optional<protocol::job_info> ja2, jb;
    for (const auto& j : c.jobs()) {
      if (j.id == a) ja2 = j;
      if (j.id == b) jb = j;
    }
    REQUIRE(ja2);
    REQUIRE(jb);
    a_states.insert(std::string(core::to_string(ja2->state)));
    if (jb->state == job_state::running && ja2->state == job_state::resizing) b_ran_before_ack = true;
    if (jb->state == job_state::running || jb->state == job_state::completed) {
      b_procs = jb->procs;
      a_after = ja2->procs;
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  CHECK_FALSE(b_ran_before_ack);
  REQUIRE_FALSE(b_procs.empty());
  // fjobs shows what aqsd pushes: the shrink went through RESIZING.
  std::set<std::string> pushed;
  while (auto m = watch.next(std::chrono::milliseconds(200))) {
    if (const auto* e = std::get_if<protocol::job_event>(&*m)) pushed.insert(std::string(core::to_string(e->state)));
  }
  CHECK(pushed.count("RESIZING") == 1);
  CHECK(a_states.count("RESIZING") + a_states.count("RUNNING") >= 1);
  CHECK(ones(a_after) == 4);
  // The rigid job runs on exactly the processors the adaptive one gave up.
  CHECK(trimmed(b_procs) == minus(full, a_after));

  c.wait_state(b, {job_state::completed});
  // Then the adaptive job grows back to 8 and finishes.
  auto jf = c.wait_state(a, {job_state::completed, job_state::failed}, 120s);
  CHECK(jf.state == job_state::completed);
  CHECK(jf.exit_code == 0);
  CHECK(slurp(out) == slurp(ref));
  CHECK(slurp(out).size() == 64u * 48u * sizeof(double));

  // The history holds every map with its times.
  const auto ev = history(c, a);
  int resizes = 0, acks = 0;
  std::vector<std::size_t> sizes;
  for (const auto& e : ev) {
    if (e["new_state"] == "RESIZING") ++resizes;
    const std::string reason = e.value("reason", "");
    if (reason.find("resize acknowledged") != std::string::npos) {
      ++acks;
      CHECK(reason.find("total") != std::string::npos);
      sizes.push_back(ones(e.value("new_procs", "")));
    }
  }
  CHECK(resizes >= 2);
  CHECK(acks >= 2);
  REQUIRE(sizes.size() >= 2);
  CHECK(sizes[0] == 4);
  CHECK(sizes.back() == 8);
  // Users see the same with fjobs --history.
  const auto shown = c.cmd(bin().fjobs, {"--history", std::to_string(a)});
  CHECK(shown.status == 0);
  CHECK(shown.out.find("RESIZING") != std::string::npos);
  CHECK(shown.out.find("resize acknowledged") != std::string::npos);
  const auto missing = c.cmd(bin().fjobs, {"--history", "999999"});
  CHECK(missing.status != 0);
  CHECK(missing.err.find("999999") != std::string::npos);
  // Every rank is gone, the parked ones included.
  CHECK(processes_mentioning(out.string()).empty());
}

namespace {

// The live jacobi2d processes (MPI ranks, parked ones included) of the job
// writing `out`: the processes mentioning it whose program is jacobi2d
// (not mpirun, whose command line names it too).
std::vector<pid_t> jacobi_ranks(const fs::path& out) {
  std::vector<pid_t> ranks;
  const fs::path jacobi = fs::canonical(JACOBI2D_BINARY);
  for (const pid_t p : processes_mentioning(out.string())) {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/" + std::to_string(p) + "/exe", ec);
    if (!ec && exe == jacobi) ranks.push_back(p);
  }
  return ranks;
}

// How many cpus a process may run on: its Cpus_allowed_list ("0-1,4").
int allowed_cpus(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("Cpus_allowed_list:")) continue;
    std::stringstream list(line.substr(line.find(':') + 1));
    int n = 0;
    std::string item;
    while (std::getline(list, item, ',')) {
      const auto dash = item.find('-');
      n += dash == std::string::npos ? 1 : std::stoi(item.substr(dash + 1)) - std::stoi(item.substr(0, dash)) + 1;
    }
    return n;
  }
  return -1;  // gone
}

// Polls (up to 60 s) until the job's output has a line containing `text`
// after offset `from`; returns the offset after it, or npos.
std::size_t wait_for_line(const fs::path& out, const std::string& text, std::size_t from) {
  for (int i = 0; i < 600; ++i) {
    const std::string all = slurp(out);
    const auto at = all.find(text, std::min(from, all.size()));
    if (at != std::string::npos) return at + text.size();
    std::this_thread::sleep_for(100ms);
  }
  return std::string::npos;
}

}  // namespace

TEST_CASE("an adaptive job with -c 2 runs one MPI rank per 2 processors, pinned to 2 cpus, as it shrinks and grows") {
  test::test_database db;
  test::cluster c(small(db, 1, 8));
  c.wait_nodes_up(1);
  const fs::path work = c.workdir();

  const fs::path ref = reference_grid(work);

  // Plain mpirun, no -np: the allocation's ranks (4 of 2 processors on 8).
  const fs::path out = work / "ranks.grid";
  const fs::path log = work / "ranks.out";
  const fs::path script = work / "ranks.sh";
  std::ofstream(script) << "#!/bin/bash\n" << k_mpi_env << "echo \"ntasks $SLURM_NTASKS c $AQS_CPUS_PER_TASK\"\n"
                        << "exec " MPIEXEC " " JACOBI2D_BINARY << jacobi_args(out, 60) << "\n";
  const std::int64_t a =
      c.submit({"--adaptive", "--min", "1", "--max", "4", "-c", "2", "-J", "ranks", "-o", log.string(), script.string()});
  auto ja = c.wait_state(a, {job_state::running});
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (ja.nprocs != 8 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(100ms);
    ja = *c.job(a);
  }
  REQUIRE(ja.nprocs == 8);
  std::size_t at = wait_for_line(log, " ranks 4 ", 0);
  REQUIRE_MESSAGE(at != std::string::npos, slurp(log));
  CHECK(slurp(log).starts_with("ntasks 4 c 2\n"));
  // 8 processors: 4 MPI processes, each allowed its rank's 2 cpus.
  auto ranks = jacobi_ranks(out);
  CHECK(ranks.size() == 4);
  for (const pid_t p : ranks) CHECK(allowed_cpus(p) == 2);

  // A rigid job of 4 takes half: the job shrinks to 2 ranks. It waits for
  // the test's go, so that the shrunk job is looked at before it grows back.
  const fs::path go = work / "go";
  const std::int64_t b = c.submit({"-n", "4", "-J", "rigid", "-o", (work / "rigid.out").string(), "--wrap",
                                   "while [ ! -e " + go.string() + " ]; do sleep 0.1; done"});
  c.wait_state(b, {job_state::running});
  at = wait_for_line(log, " ranks 2 ", at);
  REQUIRE_MESSAGE(at != std::string::npos, slurp(log));
  CHECK(c.job(a)->nprocs == 4);
  // The 2 ranks dropped wait parked (for the growth back): never more
  // processes than the widest map's ranks, each still on 2 cpus.
  ranks = jacobi_ranks(out);
  CHECK(ranks.size() <= 4);
  CHECK(ranks.size() >= 2);
  for (const pid_t p : ranks) CHECK(allowed_cpus(p) == 2);
  std::ofstream(go) << "go\n";
  c.wait_state(b, {job_state::completed});

  // It grows back to 4 ranks and ends with the unresized run's result.
  at = wait_for_line(log, " ranks 4 ", at);
  CHECK_MESSAGE(at != std::string::npos, slurp(log));
  const auto jf = c.wait_state(a, {job_state::completed, job_state::failed}, 120s);
  CHECK(jf.state == job_state::completed);
  CHECK(jf.exit_code == 0);
  CHECK(slurp(out) == slurp(ref));
  CHECK(slurp(out).size() == 64u * 48u * sizeof(double));
  // aqsd saw whole ranks acknowledged: 4 processors, then 8.
  std::vector<std::size_t> sizes;
  for (const auto& e : history(c, a)) {
    if (e.value("reason", "").find("resize acknowledged") != std::string::npos) {
      sizes.push_back(ones(e.value("new_procs", "")));
    }
  }
  CHECK(sizes == std::vector<std::size_t>{4, 8});
  CHECK(jacobi_ranks(out).empty());
}

TEST_CASE("a job that cannot spawn keeps its processors, and aqsd records the abandoned expand") {
  test::test_database db;
  test::cluster c(small(db, 1, 4));
  c.wait_nodes_up(1);
  const fs::path work = c.workdir();
  // Starts on 2 (a rigid 2-processor job holds the rest), cannot grow when
  // that job ends: its spawns fail.
  const std::int64_t hold = c.submit({"-n", "2", "--wrap", "sleep 2"});
  c.wait_state(hold, {job_state::running});
  const fs::path script = work / "nospawn.sh";
  std::ofstream(script) << "#!/bin/bash\n#AQS --adaptive --min 2 --max 4\n" << k_mpi_env
                        << "export AQS_TEST_SPAWN_FAIL=1\n"
                        << "exec " MPIEXEC " --oversubscribe --bind-to none -np $AQS_NPROCS " JACOBI2D_BINARY
                        << jacobi_args(work / "nospawn.grid", 40) << "\n";
  const std::int64_t a = c.submit({"-o", (work / "nospawn.out").string(), script.string()});
  auto ja = c.wait_state(a, {job_state::running});
  CHECK(ja.nprocs == 2);
  c.wait_state(hold, {job_state::completed});
  auto jf = c.wait_state(a, {job_state::completed, job_state::failed}, 120s);
  CHECK(jf.exit_code == 0);
  // An expand it claimed and gave up: undone, with the cause.
  CHECK(history_says(c, a, "expand to 4 abandoned after"));
  CHECK(history_says(c, a, "AQS_TEST_SPAWN_FAIL is set; running on 2"));
  CHECK(slurp(work / "nospawn.out").find("cannot apply map") != std::string::npos);
  CHECK(processes_mentioning((work / "nospawn.grid").string()).empty());
}

TEST_CASE("an expand whose new ranks stall before wire-up is undone: the job goes on at its old size, bit-identical") {
  // Issue 30: a grow that stalled inside OpenMPI (a new rank's first
  // connection never answered) left the running ranks blocked until the
  // claim timeout, and aqsd then killed the job FAILED. The shim now bounds
  // the wire-up of new ranks (AQS_EXPAND_TIMEOUT, 3 s here), takes the job
  // back to the map it had, and tells aqsd why; the job completes.
  test::test_database db;
  auto o = small(db, 1, 4);
  o.aqsd_args = {"--resize-claim-timeout", "12"};
  test::cluster c(o);
  c.wait_nodes_up(1);
  const fs::path work = c.workdir();
  const fs::path ref = reference_grid(work);
  // Starts on 2 while a rigid job holds the other 2; offered 4 when it ends.
  const std::int64_t hold = c.submit({"-n", "2", "--wrap", "sleep 2"});
  c.wait_state(hold, {job_state::running});
  const fs::path grid = work / "stall.grid", out = work / "stall.out";
  const fs::path script = work / "stall.sh";
  std::ofstream(script) << "#!/bin/bash\n#AQS --adaptive --min 2 --max 4\n" << k_mpi_env
                        << "export AQS_TEST_JOIN_STALL_S=25 AQS_EXPAND_TIMEOUT=3\n"
                        << "exec " MPIEXEC " --oversubscribe --bind-to none -np $AQS_NPROCS " JACOBI2D_BINARY
                        << jacobi_args(grid, 60) << "\n";
  const std::int64_t a = c.submit({"-o", out.string(), script.string()});
  REQUIRE(c.wait_state(a, {job_state::running}).nprocs == 2);
  c.wait_state(hold, {job_state::completed});
  const auto jf = c.wait_state(a, {job_state::completed, job_state::failed}, 150s);
  const std::string log = slurp(out);
  INFO(log);
  INFO(slurp(c.dir() / "aqsd.log"));
  CHECK(jf.state == job_state::completed);
  CHECK(jf.exit_code == 0);
  // It was offered 4, gave the expand up and never ran on 4 ranks.
  CHECK(history_says(c, a, "expand to 4 abandoned after"));
  CHECK(history_says(c, a, "running on 2"));
  for (const auto& e : history(c, a)) {
    if (e.value("reason", "").find("abandoned") != std::string::npos) MESSAGE("measured: " << e.value("reason", ""));
  }
  CHECK_FALSE(history_says(c, a, "resize acknowledged"));
  CHECK_FALSE(history_says(c, a, "killed"));
  CHECK(log.find(" ranks 4 ") == std::string::npos);
  CHECK(slurp(grid) == slurp(ref));
  CHECK(slurp(grid).size() == 64u * 48u * sizeof(double));
  // The stalled new ranks are gone too.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!processes_mentioning(grid.string()).empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(100ms);
  }
  CHECK(processes_mentioning(grid.string()).empty());
}

TEST_CASE("an --adaptive plain script never connects the shim: it is made rigid at its size and holds nothing RESIZING") {
  // Issue 30: a plain script submitted --adaptive was offered maps it could
  // never apply and held processors RESIZING until the resize timeout while
  // another job waited for them.
  test::test_database db;
  auto o = small(db, 1, 4);
  o.resize_timeout_s = 90;  // today's hold would outlast the wait below
  test::cluster c(o);
  c.wait_nodes_up(1);
  const fs::path work = c.workdir();
  const std::int64_t hold = c.submit({"-n", "2", "--wrap", "sleep 16"});
  c.wait_state(hold, {job_state::running});
  const fs::path script = work / "plain.sh";
  std::ofstream(script) << "#!/bin/bash\n#AQS --adaptive --min 1 --max 4\nsleep 120\n";
  const std::int64_t a = c.submit({"-o", (work / "plain.out").string(), script.string()});
  REQUIRE(c.wait_state(a, {job_state::running}).nprocs == 2);
  // When the rigid job ends (over 10 s after the plain job started) the
  // plain job would be grown onto its 2 processors; a job that arrives then
  // gets them at once instead.
  c.wait_state(hold, {job_state::completed});
  const std::int64_t b = c.submit({"-n", "2", "--wrap", "sleep 1"});
  INFO(slurp(c.dir() / "aqsd.log"));
  const auto jb = c.wait_state(b, {job_state::running, job_state::completed}, 45s);
  CHECK((jb.state == job_state::running || jb.state == job_state::completed));
  const auto ja = c.job(a);
  REQUIRE(ja);
  CHECK(ja->state == job_state::running);
  CHECK(ja->nprocs == 2);
  bool resizing = false;
  for (const auto& e : history(c, a)) resizing = resizing || e["new_state"] == "RESIZING";
  CHECK_FALSE(resizing);
  CHECK(history_says(c, a, "treated as rigid at 2 processors"));
  c.cmd(bin().fkill, {std::to_string(a)});
  c.wait_state(a, {job_state::cancelled, job_state::completed, job_state::failed}, 30s);
}

TEST_CASE("a job that never calls MPI_Migrate times out of its resize and the cluster goes on scheduling") {
  test::test_database db;
  auto o = small(db, 1, 4);
  o.resize_timeout_s = 1;
  test::cluster c(o);
  c.wait_nodes_up(1);
  const fs::path work = c.workdir();
  // It connects to aqsd (AQS_Init) and computes, but its only MPI_Migrate()
  // is at iteration 0, before any map arrives.
  const fs::path grid = work / "stubborn.grid";
  const fs::path script = work / "stubborn.sh";
  write_adaptive_jacobi(script, "--rows 64 --cols 48 --iters 60 --pace-ms 100 --migrate-every 1000000", grid);
  const std::int64_t a = c.submit({"-o", (work / "stubborn.out").string(), script.string()});
  auto ja = c.wait_state(a, {job_state::running});
  REQUIRE(ja.nprocs == 4);
  wait_for_iterations(work / "stubborn.out");
  // A rigid job asks for 2: aqsd sends a map the job never applies.
  const std::int64_t b = c.submit({"-n", "2", "--wrap", "sleep 0.5"});
  c.wait_state(a, {job_state::resizing}, 10s);
  // After the timeout the job keeps its 4 processors and is left alone.
  ja = c.wait_state(a, {job_state::running}, 10s);
  CHECK(ja.nprocs == 4);
  auto jb = c.job(b);
  REQUIRE(jb);
  CHECK(jb->state == job_state::pending);
  // Until the next arrival or completion it is not asked again.
  std::this_thread::sleep_for(2s);
  auto count_resizes = [&] {
    int n = 0;
    for (const auto& e : history(c, a)) n += e["new_state"] == "RESIZING" ? 1 : 0;
    return n;
  };
  CHECK(count_resizes() == 1);
  CHECK(c.job(a)->state == job_state::running);
  // aqsd keeps answering and scheduling: the rigid job runs when the
  // adaptive one is done, and a job submitted meanwhile runs too.
  const std::int64_t d = c.submit({"-n", "1", "--wrap", "true"});
  CHECK(c.wait_state(a, {job_state::completed, job_state::failed}, 60s).state == job_state::completed);
  CHECK(c.wait_state(b, {job_state::completed, job_state::failed}, 30s).state == job_state::completed);
  CHECK(c.wait_state(d, {job_state::completed, job_state::failed}, 30s).state == job_state::completed);
  CHECK(history_says(c, a, "resize timed out"));
  CHECK(processes_mentioning(grid.string()).empty());
}

TEST_CASE("a map whose resize timed out before the job reached MPI_Migrate is not applied: aqsd and the job agree") {
  // Seen in ./scripts/demo hosts under load: a grow took longer than the
  // resize timeout; aqsd took the map back while the job applied it anyway,
  // so aqsd counted 8 processors for a job running 16 ranks. The shim now
  // claims a map (resize_begin) before applying it, and aqsd declines a map
  // it has taken back.
  test::test_database db;
  auto o = small(db, 1, 4);
  o.resize_timeout_s = 1;
  test::cluster c(o);
  c.wait_nodes_up(1);
  const fs::path work = c.workdir();
  const fs::path grid = work / "late.grid", out = work / "late.out";
  const fs::path script = work / "late.sh";
  // MPI_Migrate() every 30 iterations of 100 ms: 3 s apart, well after a
  // map sent in between has timed out (1 s).
  write_adaptive_jacobi(script, "--rows 64 --cols 48 --iters 90 --pace-ms 100 --migrate-every 30", grid);
  const std::int64_t a = c.submit({"-o", out.string(), script.string()});
  REQUIRE(c.wait_state(a, {job_state::running}).nprocs == 4);
  wait_for_iterations(out);
  const std::int64_t b = c.submit({"-n", "2", "--wrap", "sleep 0.5"});
  c.wait_state(a, {job_state::resizing}, 10s);
  CHECK(c.wait_state(a, {job_state::running}, 10s).nprocs == 4);  // timed out: aqsd keeps it on 4
  CHECK(c.wait_state(a, {job_state::completed, job_state::failed}, 90s).state == job_state::completed);
  CHECK(c.wait_state(b, {job_state::completed, job_state::failed}, 30s).state == job_state::completed);
  const std::string log = slurp(out);
  INFO(log);
  // The job never changed size: every line it printed says 4 ranks.
  CHECK(log.find(" ranks 2 ") == std::string::npos);
  CHECK(log.find("done rows 64 cols 48 iters 90 ranks 4") != std::string::npos);
  CHECK(log.find("aqsd declined a map") != std::string::npos);
  CHECK(history_says(c, a, "resize timed out"));
  CHECK_FALSE(history_says(c, a, "resize acknowledged"));
  CHECK(processes_mentioning(grid.string()).empty());
}

TEST_CASE("an app that crashes during a resize fails, releases every processor and leaves no process") {
  test::test_database db;
  test::cluster c(small(db, 1, 4));
  c.wait_nodes_up(1);
  const fs::path work = c.workdir();
  // Starts on 2 while a rigid job holds the other 2; grows when it ends, and
  // one of its ranks dies once the new ranks have joined.
  const std::int64_t hold = c.submit({"-n", "2", "--wrap", "sleep 2"});
  c.wait_state(hold, {job_state::running});
  const fs::path grid = work / "crash.grid";
  const fs::path script = work / "crash.sh";
  std::ofstream(script) << "#!/bin/bash\n#AQS --adaptive --min 2 --max 4\n" << k_mpi_env
                        << "export AQS_TEST_CRASH_IN_MIGRATE=1\n"
                        << "exec " MPIEXEC " --oversubscribe --bind-to none -np $AQS_NPROCS " JACOBI2D_BINARY
                        << jacobi_args(grid, 60) << "\n";
  const std::int64_t a = c.submit({"-o", (work / "crash.out").string(), script.string()});
  CHECK(c.wait_state(a, {job_state::running}).nprocs == 2);
  auto jf = c.wait_state(a, {job_state::completed, job_state::failed}, 120s);
  CHECK(jf.state == job_state::failed);
  // mpirun saw the rank die (and took the others down).
  CHECK(slurp(work / "crash.out").find("signal 9") != std::string::npos);
  bool resized = false;
  for (const auto& e : history(c, a)) resized = resized || e["new_state"] == "RESIZING";
  CHECK(resized);
  // Every processor is free again: a job needing all 4 runs.
  const std::int64_t all = c.submit({"-n", "4", "--wrap", "true"});
  CHECK(c.wait_state(all, {job_state::completed, job_state::failed}, 30s).state == job_state::completed);
  // No rank is left, neither the first ones nor those the expansion started.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!processes_mentioning(grid.string()).empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(100ms);
  }
  CHECK(processes_mentioning(grid.string()).empty());
}

TEST_CASE("aqsd killed with SIGKILL between a job's claim of a map and its acknowledgement: restarted, it waits for the job's word, and both agree") {
  // Before, a restarted aqsd put a RESIZING job back on its old map even when
  // its shim had already begun to apply the new one: aqsd counted 2
  // processors for a job running 4 ranks (and could give the other 2 away),
  // and the shim never heard from aqsd again.
  test::test_database db;
  test::cluster c(small(db, 1, 4));
  c.wait_nodes_up(1);
  const fs::path work = c.workdir();
  const fs::path ref = reference_grid(work);

  // Starts on 2 while a rigid job holds the other 2, grows to 4 when it ends;
  // its shim then holds still 6 s between the claim and the change.
  const std::int64_t hold = c.submit({"-n", "2", "--wrap", "sleep 2"});
  c.wait_state(hold, {job_state::running});
  const fs::path grid = work / "claim.grid", out = work / "claim.out";
  const fs::path script = work / "claim.sh";
  std::ofstream(script) << "#!/bin/bash\n#AQS --adaptive --min 2 --max 4\n" << k_mpi_env
                        << "export AQS_TEST_PAUSE_AFTER_CLAIM_MS=6000\n"
                        << "exec " MPIEXEC " --oversubscribe --bind-to none -np $AQS_NPROCS " JACOBI2D_BINARY
                        << jacobi_args(grid, 60) << "\n";
  const std::int64_t a = c.submit({"-o", out.string(), script.string()});
  REQUIRE(c.wait_state(a, {job_state::running}).nprocs == 2);
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (!history_says(c, a, "claimed by the job") && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(50ms);
  }
  REQUIRE(history_says(c, a, "claimed by the job"));
  c.kill_aqsd();
  c.start_aqsd();
  // The job reports its map to the new aqsd, which takes it: 4 processors.
  auto ja = c.wait_state(a, {job_state::running, job_state::completed, job_state::failed}, 60s);
  for (int i = 0; i < 300 && ja.state == job_state::running && ja.nprocs != 4; ++i) {
    std::this_thread::sleep_for(100ms);
    ja = *c.job(a);
  }
  CHECK(ja.state == job_state::running);
  CHECK(ja.nprocs == 4);
  CHECK(history_says(c, a, "resize acknowledged: map"));
  CHECK_FALSE(history_says(c, a, "resize abandoned"));
  // While it runs on all 4, nothing else gets one of them.
  const std::int64_t other = c.submit({"-n", "1", "--wrap", "true"});
  std::this_thread::sleep_for(500ms);
  if (c.job(a)->state == job_state::running) CHECK(c.job(other)->state == job_state::pending);
  const auto jf = c.wait_state(a, {job_state::completed, job_state::failed}, 120s);
  CHECK(jf.state == job_state::completed);
  CHECK(c.wait_state(other, {job_state::completed, job_state::failed}, 30s).state == job_state::completed);
  const std::string log = slurp(out);
  INFO(log);
  CHECK(log.find("done rows 64 cols 48 iters 240 ranks 4") != std::string::npos);
  CHECK(slurp(grid) == slurp(ref));
  CHECK(processes_mentioning(grid.string()).empty());
}
