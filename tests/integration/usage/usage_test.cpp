// usage: what a job used, measured by its agent at its end and shown by
// aqs-sacct (TotalCPU, UserCPU, SystemCPU, MaxRSS, CPUTime, AllocTRES) and
// fjobs --efficiency (issue 32), on a real aqsd, PostgreSQL and agents: a
// job that burns about 2 CPU-seconds and touches about 100 MB is measured
// within sensible bounds (with cgroups and without), and its seff figures
// agree with sacct's; an adaptive job's CPUTime is the integral of its maps
// read from its history (suspended time excluded); a job whose agent was
// killed with -9 has a record with empty measured fields, never garbage; a
// user sees another user's job without what was measured. Bounds are wide
// (the machine is shared): never timings.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include <nlohmann/json.hpp>

#include "client/client_connection.hpp"
#include "client/format.hpp"
#include "e2e.hpp"

namespace {

constexpr const char* k_ann = "aqs-usage-a";
constexpr const char* k_bob = "aqs-usage-b";

// About 2 CPU-seconds of user time in one process holding about 100 MiB
// (every page written), then a clean exit.
const char* k_burn =
    "python3 -c \"import time\n"
    "b = b'x' * (100 * 1024 * 1024)\n"
    "t = time.process_time()\n"
    "while time.process_time() - t < 2.0: pass\n"
    "print(len(b))\"";

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : line) {
    if (ch == sep) {
      out.push_back(cur);
      cur.clear();
    } else if (ch != '\n') {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

// sacct -j ID -P -n -o FIELDS as `as` (root when null): the fields of its one line.
std::vector<std::string> sacct(test::cluster& c, std::int64_t id, const std::string& fields,
                               const test::test_user* as = nullptr) {
  const auto r = c.cmd(AQS_SACCT_BINARY, {"-j", std::to_string(id), "-P", "-n", "-o", fields}, as);
  INFO(r.err);
  REQUIRE(r.status == 0);
  REQUIRE(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  return split(r.out, '|');
}

// Seconds in sacct's TotalCPU forms: MM:SS.mmm, 00:MM:SS, HH:MM:SS, D-HH:MM:SS.
double cpu_seconds(const std::string& t) {
  double days = 0;
  std::string rest = t;
  if (const auto dash = rest.find('-'); dash != std::string::npos) {
    days = std::stod(rest.substr(0, dash));
    rest = rest.substr(dash + 1);
  }
  const auto parts = split(rest, ':');
  REQUIRE((parts.size() == 2 || parts.size() == 3));
  double s = 0;
  for (const auto& p : parts) s = s * 60 + std::stod(p);
  return days * 86400 + s;
}

// sacct's MaxRSS ("102456K", "100M", "1.50G") in KiB.
double rss_kb(const std::string& v) {
  REQUIRE(!v.empty());
  const char unit = v.back();
  const double n = std::stod(v.substr(0, v.size() - 1));
  if (unit == 'K') return n;
  if (unit == 'M') return n * 1024;
  if (unit == 'G') return n * 1024 * 1024;
  FAIL("unexpected MaxRSS " << v);
  return 0;
}

nlohmann::json efficiency(test::cluster& c, std::int64_t id, const test::test_user* as = nullptr) {
  const auto r = c.cmd(test::bin().fjobs, {"--efficiency", std::to_string(id), "--json"}, as);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

// Waits until the job's measurement is stored (written off the job's end).
std::vector<std::string> wait_measured(test::cluster& c, std::int64_t id, const std::string& fields) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  std::vector<std::string> v;
  while (std::chrono::steady_clock::now() < deadline) {
    v = sacct(c, id, fields);
    if (!v.at(0).empty()) return v;
    std::this_thread::sleep_for(200ms);
  }
  return v;
}

void burn_is_measured(test::cluster& c, const test::test_user& ann) {
  const auto id = c.submit({"-n", "2", "--mem", "1G", "-o", "/dev/null", "--wrap", k_burn}, &ann, ann.home.string());
  const auto done = c.wait_state(id, {job_state::completed, job_state::failed}, 180s);
  REQUIRE(done.state == job_state::completed);
  const auto v = wait_measured(c, id, "TotalCPU,UserCPU,SystemCPU,MaxRSS,Elapsed,CPUTimeRAW,AllocTRES,State");
  INFO(v.at(0), " ", v.at(3));
  const double total = cpu_seconds(v.at(0));
  CHECK(total >= 1.8);   // it burned 2 s of its own CPU time...
  CHECK(total < 30.0);   // ...and not wildly more
  CHECK(cpu_seconds(v.at(1)) + cpu_seconds(v.at(2)) == doctest::Approx(total).epsilon(0.01));
  const double rss = rss_kb(v.at(3));
  CHECK(rss >= 100 * 1024);  // its 100 MiB were resident
  CHECK(rss < 400 * 1024);
  CHECK(v.at(6) == "billing=2,cpu=2,mem=1G,node=1");
  CHECK(v.at(7) == "COMPLETED");
  // seff's figures agree with sacct's.
  const auto e = efficiency(c, id, &ann);
  CHECK(e["cpu_utilized_s"].get<double>() == doctest::Approx(total).epsilon(0.01));
  const double core_walltime = e["core_walltime_s"].get<double>();
  CHECK(std::abs(core_walltime - std::stod(v.at(5))) <= 0.5);  // CPUTimeRAW is whole seconds
  CHECK(e["cpu_efficiency_pct"].get<double>() == doctest::Approx(100.0 * total / core_walltime).epsilon(0.01));
  CHECK(e["memory_utilized_kb"].get<double>() == doctest::Approx(rss).epsilon(0.01));
  CHECK(e["memory_efficiency_pct"].get<double>() == doctest::Approx(100.0 * rss / (1024.0 * 1024.0)).epsilon(0.01));
  MESSAGE("measured: TotalCPU ", v.at(0), " (user ", v.at(1), ", system ", v.at(2), "), MaxRSS ", v.at(3), ", Elapsed ",
          v.at(4), ", CPU efficiency ", e["cpu_efficiency_pct"].get<double>(), "%, memory efficiency ",
          e["memory_efficiency_pct"].get<double>(), "%");
  const auto text = c.cmd(test::bin().fjobs, {"--efficiency", std::to_string(id)}, &ann);
  CHECK(text.out.find("CPU Efficiency: ") != std::string::npos);
  CHECK(text.out.find("Memory Efficiency: ") != std::string::npos);
  CHECK(text.out.find("(not measured)") == std::string::npos);
}

}  // namespace

TEST_CASE("usage: a job burning 2 CPU-seconds and 100 MB is measured (cgroups), seff agrees, others see no measurement") {
  test::test_database db;
  test::cluster c(test::nodes_of(db, 1, 2));
  c.wait_nodes_up(1);
  const auto ann = c.user(k_ann);
  const auto bob = c.user(k_bob);
  burn_is_measured(c, ann);

  // The job of ann's: root and ann see what was measured; bob sees the job
  // (as sacct shows everyone's) without it.
  const auto id = c.submit({"-o", "/dev/null", "--wrap", k_burn}, &ann, ann.home.string());
  c.wait_state(id, {job_state::completed}, 180s);
  const auto mine = wait_measured(c, id, "TotalCPU,MaxRSS,JobID,CPUTimeRAW");
  REQUIRE(!mine.at(0).empty());
  CHECK(sacct(c, id, "TotalCPU,MaxRSS,JobID", &ann) == std::vector<std::string>{mine.at(0), mine.at(1), mine.at(2)});
  const auto theirs = sacct(c, id, "TotalCPU,MaxRSS,JobID,CPUTimeRAW", &bob);
  CHECK(theirs.at(0).empty());
  CHECK(theirs.at(1).empty());
  CHECK(theirs.at(2) == std::to_string(id));
  CHECK(theirs.at(3) == mine.at(3));  // what it held is no secret (fjobs shows it to anyone)
  const auto eb = efficiency(c, id, &bob);
  CHECK(eb["cpu_utilized_s"].is_null());
  CHECK(eb["measured_hidden"] == true);
  const auto tb = c.cmd(test::bin().fjobs, {"--efficiency", std::to_string(id)}, &bob);
  CHECK(tb.out.find("CPU Utilized: (only its owner and root see it)") != std::string::npos);
  // The raw listing as bob: no measured field at all.
  client::connection conn(c.socket());
  protocol::list_jobs l;
  l.id = conn.next_id();
  l.all = true;
  l.usage = true;
  l.job_ids = {id};
  const auto as_root = conn.call(l)["jobs"].at(0);
  CHECK(as_root.contains("user_cpu_us"));
  CHECK(as_root.contains("max_rss_kb"));

  // The per-job export: ann's rows with what was measured; bob has none of hers.
  const auto csv = c.cmd(AQS_FUSAGE_BINARY, {"--jobs", "--csv"}, &ann);
  INFO(csv.err);
  CHECK(csv.status == 0);
  CHECK(csv.out.rfind("job_id,user,account,state,start,end,elapsed_s,alloc_cpu_seconds,total_cpu_seconds,", 0) == 0);
  const auto row_at = csv.out.find("\n" + std::to_string(id) + "," + ann.name + ",");
  REQUIRE(row_at != std::string::npos);
  CHECK(csv.out.substr(row_at, csv.out.find('\n', row_at + 1) - row_at).find(",COMPLETED,") != std::string::npos);
  const auto js = nlohmann::json::parse(c.cmd(AQS_FUSAGE_BINARY, {"--jobs", "--json"}, &ann).out);
  bool found = false;
  for (const auto& row : js) {
    if (row["job_id"] != id) continue;
    found = true;
    CHECK(row["total_cpu_seconds"].get<double>() == doctest::Approx(cpu_seconds(mine.at(0))).epsilon(0.01));
    CHECK(row["max_rss_kb"].get<double>() == doctest::Approx(rss_kb(mine.at(1))).epsilon(0.01));
  }
  CHECK(found);
  const auto bobs = c.cmd(AQS_FUSAGE_BINARY, {"--jobs", "--csv"}, &bob);
  CHECK(bobs.status == 0);
  CHECK(bobs.out.find(ann.name) == std::string::npos);

  // Bad input: one line, non-zero.
  const auto none = c.cmd(test::bin().fjobs, {"--efficiency", "999999"}, &ann);
  CHECK(none.status == 1);
  CHECK(none.err == "fjobs: no job 999999\n");
  const auto bad = c.cmd(test::bin().fjobs, {"--efficiency", "x"}, &ann);
  CHECK(bad.status != 0);
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
  const auto both = c.cmd(test::bin().fjobs, {"--efficiency", std::to_string(id), "--all"}, &ann);
  CHECK(both.status != 0);
  CHECK(std::count(both.err.begin(), both.err.end(), '\n') == 1);
  // A running job: one clear line.
  const auto run = c.submit({"-o", "/dev/null", "--wrap", "sleep 300"}, &ann, ann.home.string());
  c.wait_state(run, {job_state::running});
  const auto r = c.cmd(test::bin().fjobs, {"--efficiency", std::to_string(run)}, &ann);
  CHECK(r.status == 0);
  CHECK(r.out == "Job " + std::to_string(run) + " is RUNNING: its efficiency is known once it has ended\n");
  c.cmd(test::bin().fkill, {std::to_string(run)});
}

TEST_CASE("usage: without cgroups the agent measures from the rusage of what the job's step reaped") {
  test::test_database db;
  test::cluster c(test::nodes_of(db, 1, 2, {"--cgroups", "off"}));
  c.wait_nodes_up(1);
  const auto ann = c.user(k_ann);
  burn_is_measured(c, ann);
}

namespace {

// An adaptive job (1..3 processors on 4) that runs, is suspended 3 s and
// resumed: the integral of its maps from its history (times and maps).
double adaptive_run(test::cluster& c, const test::test_user& u, std::int64_t& id) {
  id = c.submit({"--adaptive", "--min", "1", "--max", "3", "-o", "/dev/null", "--wrap", "sleep 8"}, &u,
                u.home.string());
  c.wait_state(id, {job_state::running});
  std::this_thread::sleep_for(2s);
  auto r = c.cmd(test::bin().fctl, {"suspend", std::to_string(id)}, &u);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  c.wait_state(id, {job_state::suspended});
  std::this_thread::sleep_for(3s);
  r = c.cmd(test::bin().fctl, {"resume", std::to_string(id)}, &u);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  c.wait_state(id, {job_state::completed}, 120s);
  client::connection conn(c.socket());
  const auto events = conn.call(protocol::job_history{conn.next_id(), id})["events"];
  double integral = 0, last = 0;
  std::size_t held = 0;
  for (const auto& ev : events) {
    const auto t = client::parse_iso_time(ev["time"].get<std::string>());
    REQUIRE(t);
    if (last > 0) integral += static_cast<double>(held) * (*t - last);
    last = *t;
    const std::string state = ev["new_state"].get<std::string>();
    const std::string procs = ev.value("new_procs", std::string());
    held = state == "RUNNING" || state == "RESIZING" ? static_cast<std::size_t>(std::count(procs.begin(), procs.end(), '1')) : 0;
  }
  INFO("history ", events.dump());
  REQUIRE(integral > 0);
  return integral;
}

// CPUTime as fjobs --efficiency and sacct show it: the integral within 1%
// (and half a second: the history's times are the database's, the
// charge's aqsd's clock); its suspended 3 s not charged.
void charged_as_integral(test::cluster& c, const test::test_user& u, std::int64_t id, double integral) {
  const auto e = efficiency(c, id, &u);
  const double charged = e["core_walltime_s"].get<double>();
  INFO("integral of the maps ", integral, " s, charged ", charged, " s");
  MESSAGE("adaptive job: integral of its maps ", integral, " s, charged (core-walltime) ", charged, " s");
  CHECK(std::abs(charged - integral) <= std::max(0.01 * integral, 0.5));
  const auto v = sacct(c, id, "ElapsedRaw,CPUTimeRAW,CPUTime", &u);
  CHECK(std::abs(std::stod(v.at(1)) - integral) <= std::max(0.01 * integral, 1.0));
  // Held 3 processors, but not while suspended (3 s): less than wall time x 3.
  CHECK(charged < std::stod(v.at(0)) * 3 - 6.0);
}

}  // namespace

TEST_CASE("usage: an adaptive job's CPUTime is the integral of its maps, its suspended time excluded") {
  test::test_database db;
  test::cluster c(test::nodes_of(db, 1, 4));
  c.wait_nodes_up(1);
  const auto ann = c.user(k_ann);
  const auto bob = c.user(k_bob);
  // Ann is in an account: her job's usage record (written at its end) holds the charge.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"-i", "add", "account", "lab"}, {"-i", "add", "user", ann.name, "Account=lab"}}) {
    const auto r = c.cmd(AQS_SACCTMGR_BINARY, args);
    REQUIRE_MESSAGE(r.status == 0, r.err);
  }
  std::int64_t id = 0;
  double integral = adaptive_run(c, ann, id);
  // The record is written off the job's end: wait for it.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline && sacct(c, id, "Account", &ann).at(0) != "lab") {
    std::this_thread::sleep_for(200ms);
  }
  REQUIRE(sacct(c, id, "Account", &ann).at(0) == "lab");
  charged_as_integral(c, ann, id, integral);
  // Bob is in no account: charged all the same, with no account (his usage
  // is recorded for the reports; no limit applies to him).
  integral = adaptive_run(c, bob, id);
  CHECK(sacct(c, id, "Account", &bob).at(0).empty());
  charged_as_integral(c, bob, id, integral);
}

TEST_CASE("usage: a job whose agent was killed with -9 keeps a sane record: measured fields empty") {
  test::test_database db;
  auto o = test::nodes_of(db, 1, 2);
  o.heartbeat_timeout_s = 3;
  test::cluster c(o);
  c.wait_nodes_up(1);
  const auto ann = c.user(k_ann);
  const auto id = c.submit({"-o", "/dev/null", "--wrap", "sleep 300"}, &ann, ann.home.string());
  c.wait_state(id, {job_state::running});
  std::this_thread::sleep_for(1s);
  c.kill_agent(0, 9);
  const auto ended = c.wait_state(id, {job_state::node_fail, job_state::failed, job_state::pending}, 120s);
  CAPTURE(core::to_string(ended.state));
  // The agent comes back: the fenced job's end it finds in its spool is for
  // an instance aqsd no longer counts on, and is not taken as its measurement.
  c.start_agent(0);
  c.wait_nodes_up(1);
  std::this_thread::sleep_for(2s);
  if (ended.state == job_state::pending) c.cmd(test::bin().fkill, {std::to_string(id)});
  const auto v = sacct(c, id, "JobID,State,TotalCPU,UserCPU,SystemCPU,MaxRSS,CPUTimeRAW,Elapsed");
  CHECK(v.at(0) == std::to_string(id));
  CHECK(v.at(2).empty());
  CHECK(v.at(3).empty());
  CHECK(v.at(4).empty());
  CHECK(v.at(5).empty());
  CHECK(std::stoll(v.at(6)) >= 0);
  const auto e = efficiency(c, id, &ann);
  if (e["ended"] == true) {
    CHECK(e["cpu_utilized_s"].is_null());
    CHECK(e["memory_utilized_kb"].is_null());
    CHECK(e["measured_hidden"] == false);
  }
}

// Issue 30: --mem is per node, and an adaptive job's nodes are those of its
// maps over time: its memory is charged for the node-seconds it held.
TEST_CASE("usage: an adaptive job's --mem is charged per node it held, over the time it held it") {
  test::test_database db;
  test::cluster c(test::nodes_of(db, 3, 2, {"--memory", "1G"}));
  c.wait_nodes_up(3);
  const auto ann = c.user(k_ann);
  // At most one rank a node: its 3 ranks are on 3 nodes, so it holds
  // 3 x 100 MB while it runs (its minimum of nodes is 1).
  const std::int64_t id = c.submit({"--adaptive", "--min", "3", "--max", "3", "--ntasks-per-node=1", "--mem=100M",
                                    "-o", "/dev/null", "--wrap", "sleep 4"},
                                   &ann, ann.home.string());
  const auto running = c.wait_state(id, {job_state::running});
  CHECK(running.nprocs == 3);
  c.wait_state(id, {job_state::completed}, 120s);
  // The record is written off the job's end: wait for it.
  double cpu = 0, mem = 0;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  std::string out;
  while (std::chrono::steady_clock::now() < deadline && cpu == 0) {
    const auto r = c.cmd(AQS_FUSAGE_BINARY, {"--csv"}, &ann);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    out = r.out;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      if (!line.starts_with(ann.name + ",")) continue;
      std::vector<std::string> f;
      std::istringstream cols(line);
      for (std::string v; std::getline(cols, v, ',');) f.push_back(v);
      REQUIRE(f.size() >= 6);
      cpu = std::stod(f.at(3));
      mem = std::stod(f.at(5));
    }
    if (cpu == 0) std::this_thread::sleep_for(200ms);
  }
  INFO(out);
  REQUIRE(cpu > 0);
  // One processor a node: node-seconds are its CPU-seconds.
  CHECK(mem == doctest::Approx(100.0 * cpu).epsilon(0.02));
}
