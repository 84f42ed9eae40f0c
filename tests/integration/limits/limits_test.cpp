// limits: no one user can starve the others through aqsd (issue 28): a huge
// job array is stored and held in time and memory linear in its size while
// another user's fjobs and fsub are answered; the per-user caps of aqs.conf
// are refused in one line naming the cap and its value; a resent array is
// not stored twice. Real aqsd, PostgreSQL and agents; two throwaway users.
// Never a tight timing: each wait is a generous bound that the unbounded
// daemon missed by minutes (docs/benchmarks.md has the latencies).
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <pwd.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <pqxx/pqxx>

#include "e2e.hpp"
#include "core/array_spec.hpp"
#include "protocol/replies.hpp"
#include "raw_peer.hpp"

namespace {

constexpr const char* k_ann = "aqs-aqsd-work-a";
constexpr const char* k_bob = "aqs-aqsd-work-b";

// Generous: the unbounded daemon left other users unanswered for minutes.
constexpr auto k_answer_bound = 20s;
// aqsd's resident memory with a 100,000-task array pending (documented in
// docs/security.md, "Limits: per user in aqsd"); it reached 1.7-3.0 GB.
constexpr long k_rss_bound_mb = 1024;

// A file removed at the end of its scope (also when a constructor throws).
struct temp_file {
  std::string path;
  ~temp_file() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

struct setup {
  temp_file conf_file;
  test::test_database db;
  std::unique_ptr<test::cluster> c;
  test::test_user ann, bob;
  explicit setup(std::vector<std::string> aqsd_args = {}, const std::string& conf = "") {
    auto o = test::nodes_of(db, 1, 2);
    o.aqsd_args = std::move(aqsd_args);
    if (!conf.empty()) {
      // The caps in aqs.conf, in a file of the test's own.
      char tmpl[] = "/tmp/aqs-limits-conf-XXXXXX";
      const int fd = ::mkstemp(tmpl);
      REQUIRE(fd >= 0);
      REQUIRE(::write(fd, conf.data(), conf.size()) == static_cast<ssize_t>(conf.size()));
      ::close(fd);
      ::chmod(tmpl, 0644);
      conf_file.path = tmpl;
      o.aqsd_args.push_back("--config");
      o.aqsd_args.push_back(conf_file.path);
    }
    c = std::make_unique<test::cluster>(o);
    ann = c->user(k_ann);
    bob = c->user(k_bob);
  }
  // A job of `u`'s that runs until killed: what the array waits for.
  std::int64_t sleeper(const test::test_user& u) {
    const auto id = c->submit({"-n", "1", "-o", "/dev/null", "--wrap", "sleep 600"}, &u, u.home.string());
    c->wait_state(id, {job_state::running});
    return id;
  }
  test::run_result fsub_as(const test::test_user& u, std::vector<std::string> args,
                           std::chrono::milliseconds limit = 60s) {
    std::vector<std::string> argv = {bin().fsub, "--socket", c->socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run(argv, {}, u.uid, u.gid, u.home.string(), limit);
  }
};

long rss_mb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6)) / 1024;
  }
  return -1;
}

// Lines of text (a trailing newline does not make one more).
std::size_t lines(const std::string& s) {
  std::size_t n = 0;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

// fsub running in the background as a user, its output in files.
struct background_fsub {
  pid_t pid = -1;
  fs::path out, err;
  background_fsub(setup& s, const test::test_user& u, std::vector<std::string> args) {
    out = s.c->dir() / ("bg-" + std::to_string(::getpid()) + ".out");
    err = s.c->dir() / ("bg-" + std::to_string(::getpid()) + ".err");
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> argv = {bin().fsub, "--socket", s.c->socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    pid = test::spawn(argv, {}, u.uid, u.gid, u.home.string(), o, e);
    ::close(o);
    ::close(e);
  }
  std::optional<int> status;  // once it ended
  // Its exit status once it ended within `limit`, else nullopt.
  std::optional<int> wait(std::chrono::seconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (running() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(100ms);
    return status;
  }
  bool running() {
    if (pid < 0) return false;
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      pid = -1;
      status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return false;
    }
    return true;
  }
  ~background_fsub() {
    if (pid > 0) test::stop_process(pid, 1s);
  }
};

// The database rows of array `first`: its record and the tasks split off it.
std::size_t rows_of(setup& s, std::int64_t first) {
  pqxx::connection db(s.db.conninfo());
  pqxx::work tx(db);
  return tx.exec1("SELECT count(*) FROM jobs WHERE id = " + std::to_string(first) +
                  " OR (geometry->>'array_job_id')::bigint = " + std::to_string(first))[0]
      .as<std::size_t>();
}

// The tasks of array `first`, from the database: those split off, and the
// pending indices its compact record still holds (issue 28).
std::size_t tasks_of(setup& s, std::int64_t first) {
  pqxx::connection db(s.db.conninfo());
  pqxx::work tx(db);
  std::size_t n = 0;
  for (const auto& row : tx.exec("SELECT geometry->>'array' AS rest FROM jobs WHERE id = " + std::to_string(first) +
                                 " OR (geometry->>'array_job_id')::bigint = " + std::to_string(first))) {
    n += row["rest"].is_null() ? 1 : core::parse_array_spec(row["rest"].as<std::string>()).tasks.size();
  }
  return n;
}

// The tasks of array `first` by index, each with its state (split ones only).
std::map<std::int64_t, std::string> task_states(setup& s, std::int64_t first) {
  pqxx::connection db(s.db.conninfo());
  pqxx::work tx(db);
  std::map<std::int64_t, std::string> out;
  for (const auto& row : tx.exec("SELECT (geometry->>'array_task_id')::bigint AS task, state FROM jobs WHERE "
                                 "geometry ? 'array_task_id' AND (id = " + std::to_string(first) +
                                 " OR (geometry->>'array_job_id')::bigint = " + std::to_string(first) + ")")) {
    const auto [it, fresh] = out.emplace(row["task"].as<std::int64_t>(), row["state"].as<std::string>());
    CHECK_MESSAGE(fresh, "task " << it->first << " of array " << first << " has two jobs");
  }
  return out;
}

// Lines of a file (each a task's mark).
std::vector<std::string> file_lines(const fs::path& p) {
  std::vector<std::string> out;
  std::ifstream in(p);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("a hundred-thousand-task array behind a running job is accepted while another user's fjobs and fsub are answered") {
  setup s;
  const auto dep = s.sleeper(s.ann);
  const long rss_before = rss_mb(s.c->aqsd_pid());
  background_fsub big(s, s.ann, {"--array", "0-99999", "--dependency", "afterok:" + std::to_string(dep), "-o",
                                 "/dev/null", "--wrap", "true"});
  // While it is being stored, bob is served: each of his commands answers
  // within the generous bound (the unbounded daemon left him without an
  // answer for minutes).
  // Until the array is answered (every task stored and arrived), or a
  // generous 10 minutes.
  int rounds = 0;
  const auto give_up = std::chrono::steady_clock::now() + 600s;
  do {
    const auto t0 = std::chrono::steady_clock::now();
    const auto jobs = test::run({bin().fjobs, "--socket", s.c->socket(), "--json", "-u", s.bob.name}, {}, s.bob.uid,
                                s.bob.gid, s.bob.home.string(), k_answer_bound);
    CHECK_MESSAGE(jobs.status == 0, "bob's fjobs during the array: " << jobs.err);
    const auto sub = s.fsub_as(s.bob, {"--parsable", "-o", "/dev/null", "--wrap", "true"}, k_answer_bound);
    CHECK_MESSAGE(sub.status == 0, "bob's fsub during the array: " << sub.err);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (took > 1 || jobs.status != 0 || sub.status != 0) MESSAGE("round " << rounds << ": bob's fjobs + fsub took " << took << " s");
    if (jobs.status != 0 || sub.status != 0) break;
    ++rounds;
    std::this_thread::sleep_for(200ms);
  } while (big.running() && std::chrono::steady_clock::now() < give_up);
  MESSAGE(rounds << " rounds of bob's fjobs and fsub while the array was submitted");
  // The array itself is accepted in one send (no resend), in bounded time.
  const auto st = big.wait(600s);
  REQUIRE_MESSAGE(st.has_value(), "the 100,000-task array was not answered within 10 minutes");
  const std::string out = test::slurp(big.out), err = test::slurp(big.err);
  REQUIRE_MESSAGE(*st == 0, err);
  CHECK_MESSAGE(err.find("again") == std::string::npos, "fsub sent the array again: " << err);
  const auto at = out.find("Submitted job ");
  REQUIRE(at != std::string::npos);
  const std::int64_t first = std::stoll(out.substr(at + 14));
  // One row and one entry while its tasks wait for the dependency (it was
  // one row per task, 2.3 KB each in aqsd).
  CHECK(tasks_of(s, first) == 100'000);
  CHECK_MESSAGE(rows_of(s, first) == 1, "the held array takes " << rows_of(s, first) << " job rows");
  const long rss = rss_mb(s.c->aqsd_pid());
  MESSAGE("aqsd VmRSS: " << rss_before << " MB before, " << rss << " MB with the array pending");
  CHECK(rss > 0);
  CHECK(rss < k_rss_bound_mb);
  // Still serving.
  CHECK(s.fsub_as(s.bob, {"--parsable", "-o", "/dev/null", "--wrap", "true"}, k_answer_bound).status == 0);
}

TEST_CASE("a million-task array is refused in one line under the default caps and the cluster serves on") {
  setup s;
  const auto r = s.fsub_as(s.ann, {"--array", "0-999999", "-o", "/dev/null", "--wrap", "true"}, 60s);
  CHECK(r.status != 0);
  CHECK(r.status != 137);  // refused, not killed at the bound
  CHECK_MESSAGE(lines(r.err) == 1, r.err);
  CHECK_MESSAGE(r.err.find("MaxArraySize") != std::string::npos, r.err);
  CHECK_MESSAGE(r.err.find("100000") != std::string::npos, r.err);
  CHECK(s.fsub_as(s.bob, {"--parsable", "-o", "/dev/null", "--wrap", "true"}, k_answer_bound).status == 0);
  CHECK(s.c->cmd(bin().fjobs, {"--json"}, &s.bob).status == 0);
  CHECK(rss_mb(s.c->aqsd_pid()) < k_rss_bound_mb);
}

TEST_CASE("the per-user caps of aqs.conf are refused in one line naming the cap and its value") {
  setup s({}, "# per-user caps (docs/security.md)\n"
              "MaxJobsPerUser=4 MaxArraySize=3\n"
              "MaxScriptBytes=100000\n"
              "MaxScriptBytesPerUser=200000\n");
  auto refused = [](const test::run_result& r, const std::string& cap, const std::string& value) {
    CHECK(r.status != 0);
    CHECK_MESSAGE(lines(r.err) == 1, r.err);
    CHECK_MESSAGE(r.err.find(cap) != std::string::npos, r.err);
    CHECK_MESSAGE(r.err.find(value) != std::string::npos, r.err);
  };
  SUBCASE("array size") {
    refused(s.fsub_as(s.ann, {"--array", "0-3", "-o", "/dev/null", "--wrap", "true"}), "MaxArraySize", "3");
    CHECK(s.fsub_as(s.ann, {"--array", "0-2", "-o", "/dev/null", "--wrap", "true"}).status == 0);
  }
  SUBCASE("script bytes per job") {
    const std::string big = "#!/bin/sh\n# " + std::string(100'001, 'x') + "\ntrue\n";
    const fs::path script = s.ann.home / "big.sh";
    { std::ofstream(script) << big; }
    ::chown(script.c_str(), s.ann.uid, s.ann.gid);
    refused(s.fsub_as(s.ann, {"-o", "/dev/null", script.string()}), "MaxScriptBytes", "100000");
  }
  SUBCASE("live jobs and script bytes per user; the other user is unaffected") {
    const auto dep = s.sleeper(s.ann);  // live job 1 of ann's 4
    const std::string after = "afterok:" + std::to_string(dep);
    // 80 kB each, the test's environment (under 10 kB) with each.
    const std::string mid = "#!/bin/sh\n# " + std::string(80'000, 'y') + "\ntrue\n";
    const fs::path script = s.ann.home / "mid.sh";
    { std::ofstream(script) << mid; }
    ::chown(script.c_str(), s.ann.uid, s.ann.gid);
    CHECK(s.fsub_as(s.ann, {"-d", after, "-o", "/dev/null", script.string()}).status == 0);
    CHECK(s.fsub_as(s.ann, {"-d", after, "-o", "/dev/null", script.string()}).status == 0);
    // 3 scripts of 80 kB and the sleeper's: more than 200000 bytes.
    refused(s.fsub_as(s.ann, {"-d", after, "-o", "/dev/null", script.string()}), "MaxScriptBytesPerUser", "200000");
    CHECK(s.fsub_as(s.ann, {"-d", after, "-o", "/dev/null", "--wrap", "true"}).status == 0);  // live job 4
    refused(s.fsub_as(s.ann, {"-d", after, "-o", "/dev/null", "--wrap", "true"}), "MaxJobsPerUser", "4");
    // An array counts each of its tasks.
    refused(s.fsub_as(s.ann, {"--array", "0-1", "-o", "/dev/null", "--wrap", "true"}), "MaxJobsPerUser", "4");
    CHECK(s.fsub_as(s.bob, {"-o", "/dev/null", "--wrap", "true"}).status == 0);
    // Ended jobs give their place back.
    CHECK(s.c->cmd(bin().fkill, {std::to_string(dep)}, &s.ann).status == 0);
    s.c->wait_state(dep, {job_state::cancelled});
    bool back = false;
    for (int i = 0; i < 100 && !back; ++i) {
      back = s.fsub_as(s.ann, {"-o", "/dev/null", "--wrap", "true"}).status == 0;
      if (!back) std::this_thread::sleep_for(100ms);
    }
    CHECK(back);
  }
}

TEST_CASE("the caps are flags too, and a flag overrides aqs.conf") {
  setup s({"--max-array-size", "2"}, "MaxArraySize=10\n");
  const auto r = s.fsub_as(s.ann, {"--array", "0-2", "-o", "/dev/null", "--wrap", "true"});
  CHECK(r.status != 0);
  CHECK_MESSAGE(r.err.find("MaxArraySize 2") != std::string::npos, r.err);
}

TEST_CASE("an array sent again with its token while aqsd stores it is stored once and answered with the same id") {
  setup s;
  const auto dep = s.sleeper(s.ann);
  auto fds = test::connect_unix_as(s.c->socket(), s.ann.uid, s.ann.gid, 2);
  test::raw_peer one(fds.at(0)), two(fds.at(1));
  REQUIRE(test::is_ok(one.hello()));
  REQUIRE(test::is_ok(two.hello()));
  protocol::submit sub;
  sub.job.name = "resent";
  sub.job.argv = {"true"};
  sub.job.workdir = s.ann.home.string();
  sub.job.stdout_pattern = "/dev/null";
  sub.job.afterok = {dep};
  sub.job.submit_token = "limits-resent-array";
  protocol::job_geometry g;
  g.array = "0-19999";
  sub.job.geometry = g;
  sub.id = 7;
  one.send(sub);
  sub.id = 8;
  two.send(sub);  // the same token, while the first is being stored
  const auto a = one.reply_to(7, 600s), b = two.reply_to(8, 600s);
  REQUIRE_MESSAGE(test::is_ok(a), test::describe(a));
  REQUIRE_MESSAGE(test::is_ok(b), test::describe(b));
  const auto ida = protocol::read_reply<protocol::submit_reply>(std::get<protocol::ok>(*a)).job_id;
  const auto idb = protocol::read_reply<protocol::submit_reply>(std::get<protocol::ok>(*b)).job_id;
  CHECK(ida == idb);
  CHECK(tasks_of(s, ida) == 20'000);
}

namespace {

// A job of `u`'s that completes once the file `go` in its home exists: a
// dependency the test releases when it wants.
std::int64_t gate(setup& s, const test::test_user& u) {
  const auto id = s.c->submit({"-n", "1", "-o", "/dev/null", "--wrap", "while [ ! -e go ]; do sleep 0.2; done"}, &u,
                              u.home.string());
  s.c->wait_state(id, {job_state::running});
  return id;
}

std::int64_t submitted_id(const test::run_result& r) {
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const auto at = r.out.find_last_of(' ');
  return std::stoll(r.out.substr(at == std::string::npos ? 0 : at + 1));
}

}  // namespace

TEST_CASE("an array's tasks are split off as they become eligible, and kill -9 of aqsd loses or repeats none") {
  setup s;
  const fs::path marks = s.ann.home / "marks";
  fs::remove(marks);
  fs::remove(s.ann.home / "go");
  const auto dep = gate(s, s.ann);
  const auto first = submitted_id(s.fsub_as(
      s.ann, {"--parsable", "--array", "0-29%2", "--dependency", "afterok:" + std::to_string(dep), "-o", "/dev/null",
              "--wrap", "echo $SLURM_ARRAY_TASK_ID >> marks; sleep 0.3"}));
  // Held behind its dependency: one row, one listing line.
  CHECK(rows_of(s, first) == 1);
  CHECK(tasks_of(s, first) == 30);
  std::size_t listed = 0;
  for (const auto& j : s.c->jobs()) {
    if (j.array_job_id == first || j.id == first) ++listed;
  }
  CHECK(listed == 1);
  // Released: tasks are split off as their throttle lets them run.
  std::ofstream(s.ann.home / "go").put('\n');
  const auto until = std::chrono::steady_clock::now() + 120s;
  while (file_lines(marks).size() < 6 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(100ms);
  REQUIRE(file_lines(marks).size() >= 6);
  CHECK(rows_of(s, first) < 30);  // split as they were reached, not all at once
  s.c->kill_aqsd();
  s.c->start_aqsd();
  s.c->wait_idle(std::chrono::seconds(300));
  // Every task ran once, each a job of its own, all COMPLETED.
  const auto states = task_states(s, first);
  CHECK(states.size() == 30);
  for (const auto& [task, state] : states) CHECK_MESSAGE(state == "COMPLETED", "task " << task << ": " << state);
  auto lines = file_lines(marks);
  std::sort(lines.begin(), lines.end());
  CHECK(lines.size() == 30);
  CHECK(std::adjacent_find(lines.begin(), lines.end()) == lines.end());
}

TEST_CASE("fkill of an array's id cancels its tasks not yet split off with the rest, and its cap is given back") {
  setup s({}, "MaxJobsPerUser=6\n");
  const auto dep = gate(s, s.ann);
  const auto first = submitted_id(s.fsub_as(
      s.ann, {"--parsable", "--array", "0-3", "--dependency", "afterok:" + std::to_string(dep), "-o", "/dev/null",
              "--wrap", "true"}));
  // The held array holds four of ann's six places: one more array of four is refused.
  const auto over = s.fsub_as(s.ann, {"--array", "0-3", "-o", "/dev/null", "--wrap", "true"});
  CHECK(over.status != 0);
  CHECK_MESSAGE(over.err.find("MaxJobsPerUser") != std::string::npos, over.err);
  // One task of the held array leaves its record (no job of its own yet):
  // its place is given back at once.
  const auto one = s.c->cmd(bin().fkill, {std::to_string(first) + "_2"}, &s.ann);
  CHECK_MESSAGE(one.status == 0, one.err);
  CHECK(tasks_of(s, first) == 3);
  CHECK(rows_of(s, first) == 1);
  // Another user may not.
  CHECK(s.c->cmd(bin().fkill, {std::to_string(first) + "_1"}, &s.bob).status != 0);
  CHECK(tasks_of(s, first) == 3);
  CHECK(s.c->cmd(bin().fkill, {std::to_string(first) + "_2"}, &s.ann).status != 0);  // gone already
  CHECK(s.fsub_as(s.ann, {"--array", "0-1", "-o", "/dev/null", "--wrap", "true"}).status == 0);
  // A task still in the record: fjobs --history ARRAY_TASK shows the record's
  // history and says so; scancel ARRAY_TASK takes it out as fkill does.
  const auto h = s.c->cmd(bin().fjobs, {"--history", std::to_string(first) + "_1"}, &s.ann);
  CHECK_MESSAGE(h.status == 0, h.err);
  CHECK_MESSAGE(h.err.find("task " + std::to_string(first) + "_1 has no job of its own yet") != std::string::npos, h.err);
  CHECK_MESSAGE(h.out.find("PENDING") != std::string::npos, h.out);
  CHECK(s.c->cmd(bin().fjobs, {"--history", std::to_string(first + 100) + "_1"}, &s.ann).status != 0);
  const auto sc = test::run({AQS_SCANCEL_BINARY, std::to_string(first) + "_3"}, {{"AQS_SOCKET", s.c->socket()}},
                            s.ann.uid, s.ann.gid, s.ann.home.string());
  CHECK_MESSAGE(sc.status == 0, sc.out << sc.err);
  CHECK(tasks_of(s, first) == 2);
  const auto k = s.c->cmd(bin().fkill, {std::to_string(first)}, &s.ann);
  CHECK_MESSAGE(k.status == 0, k.err);
  s.c->wait_state(first, {job_state::cancelled});
  CHECK(rows_of(s, first) == 1);
  // Released with nothing left of it: the dependency's end splits nothing.
  std::ofstream(s.ann.home / "go").put('\n');
  s.c->wait_state(dep, {job_state::completed});
  CHECK(rows_of(s, first) == 1);
  CHECK(s.fsub_as(s.ann, {"--array", "0-2", "-o", "/dev/null", "--wrap", "true"}).status == 0);
}

TEST_CASE("fkill of an array's id cancels its running task and the record its other tasks moved to") {
  setup s;
  const auto first = submitted_id(
      s.fsub_as(s.ann, {"--parsable", "--array", "0-9%1", "-o", "/dev/null", "--wrap", "sleep 300"}));
  // Task 0 (the array's own job) runs; the other nine wait in one record.
  s.c->wait_state(first, {job_state::running});
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (rows_of(s, first) < 2 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(100ms);
  CHECK(rows_of(s, first) == 2);
  CHECK(tasks_of(s, first) == 10);
  const auto k = s.c->cmd(bin().fkill, {std::to_string(first)}, &s.ann);
  CHECK_MESSAGE(k.status == 0, k.err);
  s.c->wait_idle(std::chrono::seconds(60));
  CHECK(rows_of(s, first) == 2);
  pqxx::connection db(s.db.conninfo());
  pqxx::work tx(db);
  CHECK(tx.exec1("SELECT count(*) FROM jobs WHERE state <> 'CANCELLED' AND (id = " + std::to_string(first) +
                 " OR (geometry->>'array_job_id')::bigint = " + std::to_string(first) + ")")[0]
            .as<int>() == 0);
}
