// Advance reservations through a real aqsd (issue 32): made with
// aqs-scontrol as root only; a bad or overlapping one is one line that
// changes nothing; a rigid job that would run into it waits; at its start a
// real adaptive MPI job on its node is shrunk off it (not killed) and the
// reservation's job starts there; it survives kill -9 of aqsd. Waits are
// generous bounds, never timings (how close to its start it begins is
// measured in bench/reservations).
#include <doctest/doctest.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <thread>

#include "aqs_cluster.hpp"
#include "node_procs.hpp"
#include "client/client_connection.hpp"
#include "test_pg.hpp"

namespace fs = std::filesystem;
using namespace aqs;
using namespace std::chrono_literals;
using core::job_state;
using test::bin;

namespace {

constexpr const char* k_user = "aqs-resv-uma";

std::size_t ones(const std::string& map) { return static_cast<std::size_t>(std::count(map.begin(), map.end(), '1')); }

// "2026-11-28T19:26:47.123Z" as Unix seconds.
double unix_seconds(const std::string& iso) {
  std::tm tm{};
  double frac = 0;
  int sec = 0;
  REQUIRE(std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &sec) == 6);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_sec = sec;
  if (const auto dot = iso.find('.'); dot != std::string::npos) frac = std::atof(("0" + iso.substr(dot, 4)).c_str());
  return static_cast<double>(::timegm(&tm)) + frac;
}

nlohmann::json reservations(const test::cluster& c) {
  client::connection conn(c.socket());
  return conn.call(protocol::reservations{conn.next_id(), "show", {}, {}})["reservations"];
}

}  // namespace

TEST_CASE("a reservation on a full cluster: rigid jobs that would overlap wait, the adaptive job is shrunk off it at its start") {
  test::test_database db;
  test::cluster::options o;
  o.db = db.conninfo();
  o.nodes = 2;
  o.procs_per_node = 4;
  test::cluster c(o);
  c.wait_nodes_up(2);
  const auto uma = c.user(k_user);
  const fs::path work = c.workdir();

  // A rigid job on 2 processors, then jacobi2d (1-6) on the other 6: full.
  const std::int64_t rigid = c.submit({"-n", "2", "-t", "10:00", "-o", "/dev/null", "--wrap", "sleep 600"});
  const auto jr = c.wait_state(rigid, {job_state::running});
  // Nodes register in any order: `busy` is the rigid job's node, `spare`
  // the other, which the reservation takes.
  const bool on0 = test::count_on(jr.procs, test::node_procs(c, "node0")) == 2;
  const std::string busy = on0 ? "node0" : "node1", spare = on0 ? "node1" : "node0";
  const auto spare_procs = test::node_procs(c, spare);
  REQUIRE(spare_procs.size() == 4);
  const auto on_spare = [&](const std::string& map) { return test::count_on(map, spare_procs); };
  const fs::path script = work / "jacobi.sh";
  std::ofstream(script) << "#!/bin/bash\n#AQS --adaptive --min 1 --max 6\n"
                        << "export OMPI_MCA_btl_vader_single_copy_mechanism=none\n"
                        << "exec " MPIEXEC " --oversubscribe --bind-to none -np $AQS_NPROCS " JACOBI2D_BINARY
                        << " --rows 64 --cols 48 --iters 100000 --pace-ms 40 --out " << (work / "j.grid").string() << "\n";
  const std::int64_t adaptive = c.submit({"-o", (work / "j.out").string(), script.string()});
  auto ja = c.wait_state(adaptive, {job_state::running});
  for (auto until = std::chrono::steady_clock::now() + 60s; ja.nprocs < 6 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(200ms);
    ja = *c.job(adaptive);
  }
  REQUIRE(ja.nprocs == 6);
  REQUIRE(on_spare(ja.procs) == 4);

  // Not root: refused in one line.
  auto r = c.cmd(AQS_SCONTROL_BINARY,
                 {"create", "reservation", "ReservationName=maint", "StartTime=now+30", "Duration=10", "Users=root",
                  "Nodes=" + spare, "Flags=MAINT"},
                 &uma);
  CHECK(r.status != 0);
  CHECK(r.err.find("only root may create reservations") != std::string::npos);
  CHECK(reservations(c).empty());
  // Bad input: one line, nothing made.
  r = c.cmd(AQS_SCONTROL_BINARY, {"create", "reservation", "ReservationName=maint", "StartTime=now+30", "Duration=abc",
                                  "Users=root", "Nodes=" + spare});
  CHECK(r.status != 0);
  CHECK(r.err.find("Duration=abc") != std::string::npos);
  r = c.cmd(AQS_SCONTROL_BINARY, {"create", "reservation", "ReservationName=maint", "StartTime=now+30", "Duration=10",
                                  "Users=root", "Nodes=node9"});
  CHECK(r.status != 0);
  CHECK(r.err.find("unknown node node9") != std::string::npos);
  // The rigid job's node holds it past the start.
  r = c.cmd(AQS_SCONTROL_BINARY, {"create", "reservation", "ReservationName=maint", "StartTime=now+30", "Duration=10",
                                  "Users=root", "Nodes=" + busy});
  CHECK(r.status != 0);
  CHECK(r.err.find("job " + std::to_string(rigid) + " runs on its nodes past its start") != std::string::npos);
  CHECK(reservations(c).empty());

  // Root makes it, on the spare node, which the adaptive job holds.
  r = c.cmd(AQS_SCONTROL_BINARY, {"create", "reservation", "ReservationName=maint", "StartTime=now+30", "Duration=10",
                                  "Users=root", "Nodes=" + spare, "Flags=MAINT"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out == "Reservation created: maint\n");
  auto list = reservations(c);
  REQUIRE(list.size() == 1);
  const std::int64_t start_s = list[0]["start_s"].get<std::int64_t>();
  CHECK(list[0]["nodes"] == spare);
  CHECK(list[0]["state"] == "INACTIVE");
  // Another on the same node at an overlapping time: refused, nothing changes.
  r = c.cmd(AQS_SCONTROL_BINARY, {"create", "reservation", "ReservationName=other", "StartTime=now+60", "Duration=10",
                                  "Users=root", "Nodes=" + spare});
  CHECK(r.status != 0);
  CHECK(r.err.find("overlap another reservation") != std::string::npos);
  CHECK(reservations(c).size() == 1);

  // Jobs naming it: uma is not among its users; root's job waits for it.
  auto sub = c.cmd(bin().fsub, {"--reservation", "maint", "-n", "1", "--wrap", "true"}, &uma, uma.home.string());
  CHECK(sub.status != 0);
  CHECK(sub.err.find("Access denied to requested reservation") != std::string::npos);
  sub = c.cmd(bin().fsub, {"--reservation", "nosuch", "-n", "1", "--wrap", "true"});
  CHECK(sub.status != 0);
  CHECK(sub.err.find("Requested reservation is invalid") != std::string::npos);
  const std::int64_t inside = c.submit({"--reservation", "maint", "-n", "4", "-t", "5:00", "-o", "/dev/null", "--wrap", "sleep 600"});
  // A rigid job of 3 would start now by shrinking the adaptive job onto
  // the spare node's processors, and run past the start: it waits.
  const std::int64_t overlap = c.submit({"-n", "3", "-t", "10:00", "-o", "/dev/null", "--wrap", "sleep 600"});
  std::this_thread::sleep_for(3s);
  CHECK(c.job(inside)->reason.value_or("") == "Reservation");
  CHECK(c.job(overlap)->state == job_state::pending);

  // kill -9 of aqsd before the start: the reservation and the jobs are kept.
  c.kill_aqsd();
  c.start_aqsd();
  c.wait_nodes_up(2);
  list = reservations(c);
  REQUIRE(list.size() == 1);
  CHECK(list[0]["start_s"] == start_s);
  CHECK(c.job(inside)->state == job_state::pending);

  // At its start the adaptive job is shrunk off that node (not killed) and the
  // reservation's job starts there.
  const auto in = c.wait_state(inside, {job_state::running}, 120s);
  CHECK(on_spare(in.procs) == 4);
  CHECK(ones(in.procs) == 4);
  ja = *c.job(adaptive);
  CHECK((ja.state == job_state::running || ja.state == job_state::resizing));
  CHECK(on_spare(ja.procs) == 0);
  CHECK(ja.nprocs == 2);
  CHECK(c.job(overlap)->state == job_state::pending);
  CHECK(c.job(rigid)->state == job_state::running);
  // It started no earlier than the reservation.
  REQUIRE(in.start_time);
  CHECK(unix_seconds(*in.start_time) >= static_cast<double>(start_s));

  // Listings: sinfo -T and scontrol show reservation say ACTIVE.
  r = c.cmd(AQS_SINFO_BINARY, {"-T"});
  CHECK(r.status == 0);
  CHECK(r.out.find("maint") != std::string::npos);
  CHECK(r.out.find("ACTIVE") != std::string::npos);
  r = c.cmd(AQS_SCONTROL_BINARY, {"show", "reservation", "maint"}, &uma);
  CHECK(r.status == 0);
  CHECK(r.out.find("ReservationName=maint") != std::string::npos);
  CHECK(r.out.find("Nodes=" + spare + " NodeCnt=1 CoreCnt=4") != std::string::npos);
  CHECK(r.out.find("Flags=MAINT") != std::string::npos);
  CHECK(r.out.find("State=ACTIVE") != std::string::npos);
  r = c.cmd(bin().fctl, {"reserve", "list"}, &uma);
  CHECK(r.status == 0);
  CHECK(r.out.find("maint") != std::string::npos);

  // Deleted (root only): the spare node is everyone's again.
  r = c.cmd(bin().fctl, {"reserve", "delete", "maint"}, &uma);
  CHECK(r.status != 0);
  r = c.cmd(AQS_SCONTROL_BINARY, {"delete", "reservation", "maint"});
  CHECK(r.status == 0);
  CHECK(reservations(c).empty());
  c.cmd(bin().fkill, {std::to_string(inside)});
  c.wait_state(overlap, {job_state::running}, 120s);
  c.cmd(bin().fkill, {std::to_string(rigid), std::to_string(adaptive), std::to_string(overlap)});
  c.wait_idle();
}
