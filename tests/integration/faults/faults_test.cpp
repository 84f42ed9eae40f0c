// faults_test: aqsd under load survives its own shutdown and the loss of its
// database: real aqsd, real PostgreSQL (private or external), real clients.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pqxx/pqxx>

#include "e2e.hpp"
#include "client/client_connection.hpp"
#include "store/pg_server.hpp"
#include "temp_dir.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One submission attempt as a client saw it.
struct attempt {
  clock_type::time_point start, end;
  bool ok = false;
  std::string error;  // when not ok
};

// Clients submitting as fast as aqsd answers, each retrying a failed
// submission with its submit token (what a careful fsub does), until told to
// stop or aqsd is gone.
class submit_load {
public:
  submit_load(std::string socket, std::string workdir, int clients)
      : socket_(std::move(socket)), workdir_(std::move(workdir)) {
    for (int i = 0; i < clients; ++i) threads_.emplace_back([this] { run(); });
  }
  ~submit_load() { stop(); }

  void stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  long acknowledged() const { return acked_count_; }
  // Waits until `n` submissions were acknowledged in all (false after `limit`).
  bool wait_acknowledged(long n, std::chrono::seconds limit) const {
    const auto until = clock_type::now() + limit;
    while (acked_count_ < n) {
      if (clock_type::now() > until) return false;
      std::this_thread::sleep_for(10ms);
    }
    return true;
  }
  std::map<std::string, std::int64_t> acked() const {
    std::lock_guard lk(mu_);
    return acked_;
  }
  std::vector<attempt> attempts() const {
    std::lock_guard lk(mu_);
    return attempts_;
  }

private:
  void run() {
    std::unique_ptr<client::connection> conn;
    std::string token;
    while (!stop_) {
      if (token.empty()) token = client::random_token();
      if (!conn) {
        try {
          // A generous limit: the test measures how long aqsd takes to
          // answer; this only keeps a hung aqsd from hanging the test.
          conn = std::make_unique<client::connection>(socket_, 60s);
        } catch (const client::client_error&) {
          std::this_thread::sleep_for(50ms);
          continue;
        }
      }
      protocol::submit s;
      s.id = conn->next_id();
      s.job.name = "load";
      s.job.script = "#!/bin/sh\ntrue\n";
      s.job.workdir = workdir_;
      s.job.stdout_pattern = "/dev/null";
      s.job.submit_token = token;
      attempt a;
      a.start = clock_type::now();
      std::int64_t id = 0;
      try {
        id = conn->call(s).at("job_id").get<std::int64_t>();
        a.ok = true;
      } catch (const client::client_error& e) {
        a.error = e.what();
        if (!e.code()) conn.reset();  // the connection is gone: a new one
      }
      a.end = clock_type::now();
      std::lock_guard lk(mu_);
      attempts_.push_back(a);
      if (a.ok) {
        acked_.emplace(token, id);
        ++acked_count_;
        token.clear();
      }
    }
  }

  std::string socket_, workdir_;
  std::atomic<bool> stop_{false};
  std::atomic<long> acked_count_{0};
  mutable std::mutex mu_;
  std::map<std::string, std::int64_t> acked_;
  std::vector<attempt> attempts_;
  std::vector<std::thread> threads_;
};

std::string file_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string private_conninfo(const test::cluster& c) {
  return "host=" + (c.dir() / "state" / "postgres").string() + " port=5432 user=postgres dbname=aqs";
}

pid_t postmaster_pid(const test::cluster& c) {
  std::ifstream in(c.dir() / "state" / "postgres" / "data" / "postmaster.pid");
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

// Whether pid is still a process table entry at all (a zombie counts).
bool exists_at_all(pid_t pid) { return pid > 0 && fs::exists("/proc/" + std::to_string(pid)); }

// Every acknowledged submission is in the database under the id the client
// was given; returns how many were missing or different.
std::size_t missing_from_store(const std::string& conninfo, const std::map<std::string, std::int64_t>& acked) {
  pqxx::connection db(conninfo);
  pqxx::work tx(db);
  std::map<std::string, std::int64_t> stored;
  for (const auto& row : tx.exec("SELECT submit_token, id FROM jobs")) {
    stored.emplace(row[0].as<std::string>(), row[1].as<std::int64_t>());
  }
  std::size_t missing = 0;
  for (const auto& [token, id] : acked) {
    auto it = stored.find("u0:" + token);  // aqsd keeps tokens per uid (the clients run as root)
    if (it == stored.end() || it->second != id) ++missing;
  }
  return missing;
}

}  // namespace

TEST_CASE("aqsd exits cleanly on SIGTERM right after thousands of submissions, leaving no PostgreSQL behind") {
  test::cluster c(test::nodes_of(2, 4));
  const std::string pg_needle = (c.dir() / "state" / "postgres").string();
  REQUIRE_FALSE(test::processes_mentioning(pg_needle).empty());
  {
    submit_load load(c.socket(), c.workdir().string(), 8);
    REQUIRE(load.wait_acknowledged(3000, 240s));
    // Submissions still pour in while aqsd stops: the store's committers and
    // the controller's pools are all busy.
    const int status = c.terminate_aqsd(60s);
    load.stop();
    const std::string log = file_text(c.dir() / "aqsd.log");
    INFO("aqsd log tail: " << log.substr(log.size() > 3000 ? log.size() - 3000 : 0));
    CHECK(status == 0);
    CHECK(log.find("stopped") != std::string::npos);
    CHECK(log.find("AddressSanitizer") == std::string::npos);
    MESSAGE(load.acknowledged() << " submissions acknowledged before the stop");
  }
  std::vector<pid_t> left;
  for (int i = 0; i < 100; ++i) {
    left = test::processes_mentioning(pg_needle);
    if (left.empty()) break;
    std::this_thread::sleep_for(50ms);
  }
  CHECK(left.empty());
}

TEST_CASE("kill -9 of the private PostgreSQL under load: clients get an answer, aqsd restarts it and loses no acknowledged job") {
  test::cluster c(test::nodes_of(1, 4));
  submit_load load(c.socket(), c.workdir().string(), 6);
  REQUIRE(load.wait_acknowledged(500, 120s));
  const pid_t postmaster = postmaster_pid(c);
  REQUIRE(postmaster > 0);
  const auto killed_at = clock_type::now();
  REQUIRE(::kill(postmaster, SIGKILL) == 0);
  const long before = load.acknowledged();
  // aqsd carries on: submissions are acknowledged again once PostgreSQL is back.
  REQUIRE(load.wait_acknowledged(before + 500, 120s));
  load.stop();

  const std::vector<attempt> all = load.attempts();
  double longest = 0, first_error = -1, recovered = -1;
  std::size_t errors = 0;
  for (const attempt& a : all) {
    if (a.end < killed_at) continue;
    longest = std::max(longest, seconds_between(a.start, a.end));
    if (!a.ok) {
      ++errors;
      if (first_error < 0) first_error = seconds_between(killed_at, a.end);
    } else if (a.start > killed_at && (recovered < 0 || seconds_between(killed_at, a.end) < recovered)) {
      recovered = seconds_between(killed_at, a.end);
    }
  }
  MESSAGE("after kill -9 of the postmaster: " << errors << " error replies, first after " << first_error
                                              << " s; longest call " << longest << " s; first acknowledgement "
                                              << recovered << " s after the kill");
  // No client hangs the way it did (30-60 s): each got an answer quickly.
  CHECK(longest < 10.0);
  // The dead postmaster is reaped, not left a zombie of aqsd, and started
  // again. The supervisor looks every 100 ms; the load may be done before
  // that (the dead postmaster's backends go on serving the connections they
  // had), so wait for it rather than race it.
  CHECK(eventually([&] { return !exists_at_all(postmaster); }, 60s));
  CHECK(eventually([&] { return file_text(c.dir() / "aqsd.log").find("running again") != std::string::npos; }, 60s));
  const std::string log = file_text(c.dir() / "aqsd.log");
  INFO("aqsd log tail: " << log.substr(log.size() > 3000 ? log.size() - 3000 : 0));
  CHECK(log.find("fatal") == std::string::npos);
  {
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("PostgreSQL") != std::string::npos || line.find("job store") != std::string::npos) {
        MESSAGE(line);
      }
    }
  }
  // Nothing acknowledged was lost.
  CHECK(missing_from_store(private_conninfo(c), load.acked()) == 0);
  const int status = c.terminate_aqsd(30s);
  if (status != 0) {
    const std::string end = file_text(c.dir() / "aqsd.log");
    MESSAGE("aqsd exited " << status << "; its log ends: " << end.substr(end.size() > 6000 ? end.size() - 6000 : 0));
  }
  CHECK(status == 0);
}

TEST_CASE("with --db, aqsd reconnects when its database returns and stops at once while it is down") {
  test::temp_dir tmp;
  // PostgreSQL runs as `postgres` when we are root: it must reach its directory.
  fs::permissions(tmp.path(), fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  store::pg_server_options pg_options;
  pg_options.dir = tmp.path() / "pg";
  pg_options.durable = false;
  store::pg_server pg(pg_options);
  pg.start();
  test::cluster::options o;
  o.nodes = 0;
  o.db = pg.ensure_database("aqs");
  test::cluster c(o);
  std::map<std::string, std::int64_t> acked;
  // strict: aqsd stays up, so a failure must be its "store unavailable" reply.
  auto submit_one = [&](const std::string& token, bool strict = true) -> std::pair<bool, double> {
    client::connection conn(c.socket(), 60s);
    protocol::submit s;
    s.id = conn.next_id();
    s.job.name = "one";
    s.job.script = "#!/bin/sh\ntrue\n";
    s.job.workdir = c.workdir().string();
    s.job.submit_token = token;
    const auto t0 = clock_type::now();
    try {
      acked[token] = conn.call(s).at("job_id").get<std::int64_t>();
      return {true, seconds_between(t0, clock_type::now())};
    } catch (const client::client_error& e) {
      MESSAGE("while the database is down: " << std::string(e.what()));
      if (strict) {
        CHECK(e.code() == protocol::error_code::internal);
        CHECK(std::string(e.what()).find("store unavailable, retrying") != std::string::npos);
      }
      return {false, seconds_between(t0, clock_type::now())};
    }
  };
  REQUIRE(submit_one(client::random_token()).first);

  pg.crash();
  const std::string token = client::random_token();
  const auto [ok_down, error_after] = submit_one(token);
  CHECK_FALSE(ok_down);
  MESSAGE("submission with the database down answered after " << error_after << " s");
  CHECK(error_after < 10.0);

  const auto restarted = clock_type::now();
  pg.start();
  bool ok_again = false;
  for (int i = 0; i < 50 && !ok_again; ++i) ok_again = submit_one(token).first;
  CHECK(ok_again);
  MESSAGE("the same submission acknowledged " << seconds_between(restarted, clock_type::now())
                                              << " s after the database came back");

  pg.crash();
  // A submission in flight while aqsd is asked to stop.
  std::thread in_flight([&] {
    try {
      submit_one(client::random_token(), false);
    } catch (const std::exception&) {
      // aqsd may be gone before it connects
    }
  });
  std::this_thread::sleep_for(200ms);
  const auto asked = clock_type::now();
  const int status = c.terminate_aqsd(30s);
  const double stop_s = seconds_between(asked, clock_type::now());
  in_flight.join();
  MESSAGE("aqsd stopped " << stop_s << " s after SIGTERM with its database down (status " << status << ")");
  CHECK(status == 0);
  CHECK(stop_s < 10.0);
  pg.start();
  CHECK(missing_from_store(pg.connection_string("aqs"), acked) == 0);
}

namespace {

// Fencing of an agent that lives but is not heard: a `--requeue` job on one
// of two nodes, whose agent then hangs or is cut off. Timeouts short enough
// for a test, long enough for a loaded machine (the step's SIGTERM comes
// 3.5 s after the agent's last acknowledged heartbeat, its SIGKILL 5.5 s).
constexpr int k_down_s = 6;

test::cluster::options fencing_options(bool netns) {
  auto o = test::nodes_of(2, 2);
  o.netns = netns;
  o.heartbeat_timeout_s = k_down_s;
  o.agent_heartbeat_s = 0.5;
  o.agent_args = {"--node-down-timeout", std::to_string(k_down_s)};
  return o;
}

// Live processes of the test's job (`sleep <marker>`, tagged as a job's).
std::size_t instances(const std::string& marker) { return test::job_processes_mentioning(marker).size(); }

// `lose(node)` makes the agent of the job's node unheard; `recover(node)`
// undoes it at the end. Checks that the job's processes are gone within the
// node-down timeout plus 5 s, that no two instances ever run at once, and
// that the requeued job then runs on the other node.
void check_fenced(test::cluster& c, const std::string& marker, const std::function<void(int)>& lose,
                  const std::function<void(int)>& recover) {
  const std::int64_t id = c.submit({"-n", "2", "--requeue", "-J", "fenced", "--wrap", "sleep " + marker});
  const auto j = c.wait_state(id, {core::job_state::running});
  for (int i = 0; i < 200 && instances(marker) == 0; ++i) std::this_thread::sleep_for(50ms);
  REQUIRE(instances(marker) == 1);
  const int lost = j.nodes.find("node0") != std::string::npos ? 0 : 1;
  const std::string lost_name = "node" + std::to_string(lost);
  const auto t0 = clock_type::now();
  lose(lost);
  std::size_t most = 0;
  std::optional<double> gone_after;
  bool rerun = false;
  std::string seen;
  while (clock_type::now() - t0 < std::chrono::seconds(k_down_s + 30)) {
    const std::size_t n = instances(marker);
    most = std::max(most, n);
    const auto now_j = c.job(id);
    const bool elsewhere = now_j && now_j->state == core::job_state::running && !now_j->nodes.empty() &&
                           now_j->nodes.find(lost_name) == std::string::npos;
    if (now_j) seen = std::string(core::to_string(now_j->state)) + " on " + now_j->nodes;
    if (!gone_after && n == 0) gone_after = seconds_between(t0, clock_type::now());
    if (elsewhere && n == 1) {
      rerun = true;
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  recover(lost);
  INFO("job " << id << " last seen " << seen);
  REQUIRE_MESSAGE(gone_after, "the job's processes on the lost node were never all gone");
  MESSAGE("the job's processes on the lost node were gone " << *gone_after << " s after its agent was lost");
  CHECK(*gone_after <= k_down_s + 5.0);
  CHECK(most <= 1);  // never twice at once
  CHECK(rerun);      // requeued, now running on the other node
  // Its history: the node failure requeued it.
  const auto hist = c.cmd(test::bin().fjobs, {"--history", std::to_string(id), "--json"});
  CHECK(hist.out.find("NODE_FAIL") != std::string::npos);
  CHECK(c.cmd(test::bin().fkill, {std::to_string(id)}).status == 0);
  c.wait_idle(60s);
  for (int i = 0; i < 200 && instances(marker) > 0; ++i) std::this_thread::sleep_for(50ms);
  CHECK(instances(marker) == 0);
}

}  // namespace

TEST_CASE("a hung (SIGSTOPped) agent's job is fenced: gone within the node-down timeout plus 5 s, requeued, never twice") {
  test::cluster c(fencing_options(false));
  c.wait_nodes_up(2);
  check_fenced(c, "86411", [&](int i) { c.kill_agent(i, SIGSTOP); }, [&](int i) { c.kill_agent(i, SIGCONT); });
}

TEST_CASE("an agent cut off by the network has its job fenced: gone within the node-down timeout plus 5 s, requeued, never twice") {
  if (!test::netns_available()) return;
  test::cluster c(fencing_options(true));
  c.wait_nodes_up(2);
  check_fenced(c, "86412", [&](int i) { c.hosts()->cut(i); }, [&](int i) { c.hosts()->restore(i); });
}

namespace {

// Submits `true` with `token` as `u`: the job id aqsd answered, or -1.
std::int64_t submit_as(const test::cluster& c, const test::test_user& u, const std::string& token) {
  return test::submit_with_token(c, u, token).job_id;
}

}  // namespace

TEST_CASE("a submit token is the submitting user's own: another user's same token makes a job of theirs") {
  test::cluster c(test::nodes_of(1, 2));
  const auto a = c.user("aqs-test-toka");
  const auto b = c.user("aqs-test-tokb");
  const std::string token = "the-same-token-" + std::to_string(::getpid());
  const std::int64_t ja = submit_as(c, a, token);
  REQUIRE(ja > 0);
  // The same token from another user: a new job, theirs; never a's.
  const std::int64_t jb = submit_as(c, b, token);
  REQUIRE(jb > 0);
  CHECK(jb != ja);
  // Each user's retry still finds their own job.
  CHECK(submit_as(c, a, token) == ja);
  CHECK(submit_as(c, b, token) == jb);
  const auto ia = c.job(ja), ib = c.job(jb);
  REQUIRE(ia);
  REQUIRE(ib);
  CHECK(ia->user == "aqs-test-toka");
  CHECK(ib->user == "aqs-test-tokb");
  c.wait_idle(60s);
}

// Issue 30: a node agent fences its jobs when aqsd answers none of its
// heartbeats, and aqsd had logged nothing about why. Stopped with SIGSTOP
// (as a starved process is, for the kernel), aqsd says so once it runs
// again: its loop watch's own thread woke late.
TEST_CASE("aqsd that was stopped says in its log that it was not scheduled, for how long") {
  auto o = test::nodes_of(1, 2);
  o.aqsd_args = {"--stall-warning", "0.5"};
  test::cluster c(o);
  c.wait_nodes_up(1);
  const std::filesystem::path log = c.dir() / "aqsd.log";
  ::kill(c.aqsd_pid(), SIGSTOP);
  std::this_thread::sleep_for(2s);  // at least this long, whatever the load: past the threshold
  ::kill(c.aqsd_pid(), SIGCONT);
  std::string text;
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
    if (text.find("this process was not scheduled for") != std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  CHECK_MESSAGE(text.find("aqsd: warning: this process was not scheduled for") != std::string::npos, text);
  // And it still serves.
  CHECK(c.cmd(test::bin().fnodes, {"--json"}).status == 0);
}

// Issue 30: aqsd starved of the CPU by 96 oversubscribed ranks in another
// session (its threads waited up to 30 s for a CPU while runnable). --nice
// sets its nice, and its session's autogroup's (the tests' harness starts
// aqsd in a session of its own, as a detached aqsd is).
TEST_CASE("aqsd --nice sets its nice and its own session's scheduling autogroup's; a nice out of range is refused") {
  auto o = test::nodes_of(1, 2);
  o.aqsd_args = {"--nice", "-7"};
  test::cluster c(o);
  c.wait_nodes_up(1);
  const std::string proc = "/proc/" + std::to_string(c.aqsd_pid());
  std::ifstream stat(proc + "/stat");
  std::string line;
  std::getline(stat, line);
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
  REQUIRE(f.size() > 16);
  CHECK(f[16] == "-7");  // field 19 of stat: nice
  if (std::ifstream ag(proc + "/autogroup"); ag) {
    std::string group;
    std::getline(ag, group);
    CHECK_MESSAGE(group.find("nice -7") != std::string::npos, group);
  }
  const auto bad = test::run({test::bin().aqsd, "--state-dir", (c.dir() / "other").string(), "--nice", "25"});
  CHECK(bad.status == 2);
  CHECK_MESSAGE(bad.err.find("--nice") != std::string::npos, bad.err);
}
