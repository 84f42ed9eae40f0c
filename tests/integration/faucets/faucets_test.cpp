// faucetsd end to end: three AQS clusters of different sizes, each a real
// aqsd (its own private PostgreSQL) with agents on namespace hosts, joined
// over TLS to one real faucetsd; users submit with the real fsub through the
// server. And what the server and the clusters refuse.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "e2e.hpp"
#include "faucets_client/faucets_api.hpp"
#include "core/job_state.hpp"
#include "protocol/auth.hpp"
#include "temp_dir.hpp"

using aqs::test::cluster;
using aqs::test::run;
using aqs::test::run_result;
using nlohmann::json;

namespace {

// One faucetsd with its certificate, cluster keys and tables, in a
// directory of its own; stopped (and its PostgreSQL with it) at the end.
class faucets_site {
public:
  faucets_site(const std::vector<std::string>& clusters, const std::string& users_table,
               const std::string& policy = "earliest-start", int cluster_timeout_s = 5)
      : dir_("aqs-faucets", 0755) {
    const fs::path d = dir_.path();
    const run_result cert = run({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                                 "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                                 "-keyout", (d / "server.key").string(), "-out", (d / "server.crt").string()});
    REQUIRE_MESSAGE(cert.status == 0, cert.err);
    ::chmod((d / "server.crt").c_str(), 0644);
    std::string table;
    for (const auto& name : clusters) {
      write_file(d / (name + ".key"), aqs::protocol::random_hex(32) + "\n", 0600);
      table += name + " " + name + ".key\n";
    }
    write_file(d / "clusters", table);
    write_file(d / "users", users_table);
    fs::create_directories(d / "state");
    ::chmod((d / "state").c_str(), 0755);
    policy_ = policy;
    timeout_s_ = cluster_timeout_s;
    start("127.0.0.1:0", "127.0.0.1:0");
    addr_ = slurp(d / "state" / "faucetsd.addr");
    url_ = slurp(d / "state" / "faucetsd.http");
    while (!addr_.empty() && addr_.back() == '\n') addr_.pop_back();
    while (!url_.empty() && url_.back() == '\n') url_.pop_back();
  }
  ~faucets_site() {
    if (pid_ > 0) aqs::test::stop_process(pid_, 20s);
  }

  // faucetsd dies at once (its private PostgreSQL is left running, as after
  // a crash), then starts again on the same addresses and state.
  void kill_and_restart() {
    REQUIRE(pid_ > 0);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    const fs::path st = dir_.path() / "state";
    fs::remove(st / "faucetsd.http");
    fs::remove(st / "faucetsd.addr");
    start(addr_, url_.substr(url_.find("://") + 3));
  }
  // Freezes faucetsd (SIGSTOP) or lets it go on (SIGCONT): a server that
  // is there for TCP but answers nothing, as when the network drops.
  void freeze(bool on) { ::kill(pid_, on ? SIGSTOP : SIGCONT); }
  // The postmaster of faucetsd's private PostgreSQL.
  pid_t postgres_pid() const {
    std::ifstream in(dir_.path() / "state" / "postgres" / "data" / "postmaster.pid");
    pid_t pid = -1;
    in >> pid;
    return pid;
  }

  // aqsd's flags to join as `name` (with the cluster's own user table).
  std::vector<std::string> join_args(const std::string& name, const std::string& cluster_users = "* *\n",
                                     double speed = 1.0, const std::string& key_of = "") const {
    const fs::path d = dir_.path();
    write_file(d / (name + ".users"), cluster_users);
    return {"--faucets-server", addr_, "--faucets-name", name, "--faucets-ca", (d / "server.crt").string(),
            "--faucets-key", (d / ((key_of.empty() ? name : key_of) + ".key")).string(), "--faucets-users",
            (d / (name + ".users")).string(), "--faucets-speed", std::to_string(speed)};
  }
  std::string token_for(const aqs::test::test_user* u, int lifespan_s = 3600) const {
    const run_result r = run({FTOKEN_BINARY, "--socket", (dir_.path() / "state" / "faucetsd.sock").string(),
                              "--lifespan", std::to_string(lifespan_s)},
                             {},
                             u ? std::optional<uid_t>(u->uid) : std::nullopt,
                             u ? std::optional<gid_t>(u->gid) : std::nullopt);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    std::string last = r.out.substr(0, r.out.find_last_not_of('\n') + 1);
    return last.substr(last.rfind('\n') + 1);
  }
  aqs::client::faucets::client client(const std::string& token) const {
    aqs::client::faucets::client_options o;
    o.url = aqs::client::faucets::parse_base_url(url_);
    o.ca_file = (dir_.path() / "server.crt").string();
    o.token = token;
    return aqs::client::faucets::client(o);
  }
  // Polls until `names` are UP at the server.
  void wait_up(const std::string& token, const std::set<std::string>& names, std::chrono::seconds limit = 60s) {
    auto c = client(token);
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      std::set<std::string> up;
      for (const auto& x : c.clusters()) {
        if (x["state"] == "UP" && x.contains("report") && x["report"]["nodes_up"].get<int>() > 0) {
          up.insert(x["name"].get<std::string>());
        }
      }
      if (std::includes(up.begin(), up.end(), names.begin(), names.end())) return;
      std::this_thread::sleep_for(200ms);
    }
    FAIL("clusters not up at the server; its log:\n" << log());
  }
  std::string log() const { return slurp(dir_.path() / "faucetsd.log"); }

private:
  void start(const std::string& listen, const std::string& http) {
    const fs::path d = dir_.path();
    const int fd = ::open((d / "faucetsd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    pid_ = aqs::test::spawn({FAUCETSD_BINARY, "--state-dir", (d / "state").string(), "--listen", listen, "--http",
                             http, "--cert", (d / "server.crt").string(), "--key", (d / "server.key").string(),
                             "--clusters", (d / "clusters").string(), "--users", (d / "users").string(), "--policy",
                             policy_, "--cluster-timeout", std::to_string(timeout_s_)},
                            {}, std::nullopt, std::nullopt, "", fd, fd);
    ::close(fd);
    for (int i = 0; i < 600 && !(fs::exists(d / "state" / "faucetsd.http") && fs::exists(d / "state" / "faucetsd.addr"));
         ++i) {
      REQUIRE_MESSAGE(aqs::test::alive(pid_), "faucetsd exited at start: " << log());
      std::this_thread::sleep_for(50ms);
    }
    REQUIRE_MESSAGE(fs::exists(d / "state" / "faucetsd.http"), "faucetsd did not come up: " << log());
  }

public:
  const std::string& url() const { return url_; }
  std::string ca() const { return (dir_.path() / "server.crt").string(); }

private:
  aqs::test::temp_dir dir_;
  pid_t pid_ = -1;
  std::string addr_, url_, policy_;
  int timeout_s_ = 5;
};

cluster::options cluster_opts(int nodes, int procs, std::vector<std::string> aqsd_args) {
  cluster::options o;
  o.nodes = nodes;
  o.procs_per_node = procs;
  o.netns = true;
  o.aqsd_args = std::move(aqsd_args);
  return o;
}

run_result fsub_via(const faucets_site& site, const std::string& token, const aqs::test::test_user& u,
                    std::vector<std::string> args) {
  std::vector<std::string> argv{aqs::test::bin().fsub, "--faucets", site.url(), "--faucets-ca", site.ca()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, {{"AQS_TOKEN", token}}, u.uid, u.gid, u.home.string());
}

// The core's final states (core/job_state), not a copy of them.
bool is_final(const std::string& state) {
  const auto s = aqs::core::parse_job_state(state);
  return s && aqs::core::is_final(*s);
}


}  // namespace

TEST_CASE("200 jobs through faucetsd to three clusters all complete exactly once, one cluster killed and back") {
  REQUIRE_MESSAGE(aqs::testbed::netns_hosts::available(), "needs root and ip netns");
  faucets_site site({"small", "medium", "large"}, "* * *\n", "earliest-start", 5);
  cluster small(cluster_opts(1, 4, site.join_args("small", "* *\n", 1.0)));
  cluster medium(cluster_opts(2, 4, site.join_args("medium", "* *\n", 1.5)));
  cluster large(cluster_opts(3, 4, site.join_args("large", "* *\n", 1.0)));
  small.wait_nodes_up(1);
  medium.wait_nodes_up(2);
  large.wait_nodes_up(3);
  const auto u = small.user("aqsfaucet");
  const std::string token = site.token_for(&u);
  site.wait_up(token, {"small", "medium", "large"});

  const fs::path ran = u.home / "ran.log";
  constexpr int k_jobs = 200;
  for (int i = 0; i < k_jobs; ++i) {
    if (i == 70) medium.kill_aqsd();  // the cluster's head dies with jobs queued and running there
    if (i == 130) medium.start_aqsd();  // back, after the server's timeout has moved its queued jobs
    const int procs = 1 + i % 4;
    const run_result r = fsub_via(site, token, u,
                                  {"-n", std::to_string(procs), "-t", "5", "-J", "job" + std::to_string(i), "--wrap",
                                   "echo $SLURM_JOB_NAME >> " + ran.string() + "; sleep 0.3"});
    REQUIRE_MESSAGE(r.status == 0, "fsub " << i << ": " << r.err);
    CHECK(r.out.rfind("Submitted job ", 0) == 0);
    if (i >= 70 && i < 130) std::this_thread::sleep_for(100ms);  // the outage lasts past the 5 s timeout
  }

  auto c = site.client(token);
  json jobs;
  const auto until = std::chrono::steady_clock::now() + 420s;
  for (;;) {
    jobs = c.list_jobs(true);
    int done = 0;
    for (const auto& j : jobs) {
      const std::string st = j["state"];
      if (st == "COMPLETED" || st == "FAILED" || st == "CANCELLED" || st == "TIMEOUT" || st == "NODE_FAIL") ++done;
    }
    if (done == k_jobs) break;
    if (std::chrono::steady_clock::now() > until) {
      FAIL("only " << done << " of " << k_jobs << " jobs ended; server log:\n" << site.log());
    }
    std::this_thread::sleep_for(500ms);
  }
  REQUIRE(jobs.size() == k_jobs);
  std::map<std::string, int> per_cluster;
  for (const auto& j : jobs) {
    CHECK_MESSAGE(j["state"] == "COMPLETED", j.dump());
    if (j["cluster"].is_string()) ++per_cluster[j["cluster"].get<std::string>()];
  }
  // Every job ran exactly once, wherever it ran.
  std::map<std::string, int> times;
  std::istringstream lines(slurp(ran));
  for (std::string line; std::getline(lines, line);) ++times[line];
  for (int i = 0; i < k_jobs; ++i) CHECK_MESSAGE(times["job" + std::to_string(i)] == 1, "job" << i << " ran " << times["job" + std::to_string(i)] << " times");
  CHECK(times.size() == static_cast<std::size_t>(k_jobs));
  // They went to more than one cluster, and the clusters agree.
  CHECK(per_cluster.size() >= 2);
  MESSAGE("jobs per cluster: small " << per_cluster["small"] << ", medium " << per_cluster["medium"] << ", large "
                                     << per_cluster["large"]);
  std::map<std::string, cluster*> by_name{{"small", &small}, {"medium", &medium}, {"large", &large}};
  for (const auto& j : jobs) {
    const auto local = by_name.at(j["cluster"].get<std::string>())->job(j["local_id"].get<std::int64_t>());
    REQUIRE(local.has_value());
    CHECK(local->state == aqs::core::job_state::completed);
  }
  // The history says where each went and why; jobs queued on the cluster
  // that went away were placed again (when any were queued there).
  int dispatched = 0, moved = 0;
  for (const auto& j : jobs) {
    for (const auto& e : c.history(j["id"].get<std::int64_t>())) {
      if (e["event"] == "dispatched") ++dispatched;
      if (e["event"] == "unplaced") ++moved;
    }
  }
  CHECK(dispatched >= k_jobs);
  MESSAGE(moved << " jobs queued on 'medium' when it went away were placed elsewhere");
}

namespace {

// Polls the server until `pred` holds for job `id`; fails with its history.
json wait_job(aqs::client::faucets::client& c, std::int64_t id, const std::function<bool(const json&)>& pred,
              std::chrono::seconds limit = 60s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  json j;
  while (std::chrono::steady_clock::now() < until) {
    j = c.job(id);
    if (pred(j)) return j;
    std::this_thread::sleep_for(200ms);
  }
  FAIL("job " << id << " never got there: " << j.dump() << "\nhistory: " << c.history(id).dump());
  return j;
}

bool has_event(const json& history, const std::string& event) {
  return std::any_of(history.begin(), history.end(), [&](const json& e) { return e["event"] == event; });
}

std::int64_t submitted_id(const run_result& r) {
  REQUIRE_MESSAGE(r.status == 0, r.err);
  return std::stoll(r.out.substr(std::string("Submitted job ").size()));
}

// One cluster of 2 processors joined to a server, a job of the server that
// holds all of it, and a second one queued behind it there.
struct blocked_queue {
  explicit blocked_queue(int cluster_timeout_s)
      : site({"one"}, "* one *\n", "earliest-start", cluster_timeout_s),
        one(cluster_opts(1, 2, site.join_args("one"))),
        u(one.user("aqsfaucet")),
        token(site.token_for(&u)),
        c(site.client(token)),
        ran(u.home / "ran.log") {
    one.wait_nodes_up(1);
    site.wait_up(token, {"one"});
    const std::int64_t b = submitted_id(fsub_via(site, token, u, {"-M", "one", "-n", "2", "--wrap", "sleep 300"}));
    blocker = wait_job(c, b, [](const json& j) { return j["state"] == "RUNNING"; });
    queued = submitted_id(
        fsub_via(site, token, u, {"-M", "one", "-n", "2", "-J", "queued", "--wrap", "echo ran >> " + ran.string()}));
    copy = wait_job(c, queued, [](const json& j) { return j["local_id"].is_number_integer(); })["local_id"];
  }
  faucets_site site;
  cluster one;
  aqs::test::test_user u;
  std::string token;
  aqs::client::faucets::client c;
  fs::path ran;          // the queued job appends a line when it runs
  json blocker;          // the server's job holding the cluster
  std::int64_t queued = 0, copy = 0;  // the queued job, and its id on the cluster
};

}  // namespace

TEST_CASE("a queued job whose cluster went away past the timeout keeps its one copy there when it comes back") {
  REQUIRE_MESSAGE(aqs::testbed::netns_hosts::available(), "needs root and ip netns");
  blocked_queue q(2);
  // Its head dies; past the timeout the server takes the queued job back
  // (it may only run on "one", so it waits for it).
  q.one.kill_aqsd();
  wait_job(q.c, q.queued, [&](const json&) { return has_event(q.c.history(q.queued), "unplaced"); }, 30s);
  q.one.start_aqsd();
  q.one.wait_nodes_up(1);
  // Back: the copy there is the job's again (not cancelled, not a second one).
  const json back = wait_job(q.c, q.queued, [](const json& j) { return j["local_id"].is_number_integer(); });
  CHECK(back["local_id"].get<std::int64_t>() == q.copy);
  q.c.cancel(q.blocker["id"].get<std::int64_t>());
  const json done = wait_job(q.c, q.queued, [](const json& j) { return is_final(j["state"].get<std::string>()); });
  CHECK_MESSAGE(done["state"] == "COMPLETED", done.dump() << "\n" << q.c.history(q.queued).dump());
  CHECK(slurp(q.ran) == "ran\n");
  int named = 0;
  for (const auto& j : q.one.jobs(true)) named += j.name == "queued" ? 1 : 0;
  CHECK(named == 1);
  CHECK(q.site.log().find("adopted its copy one:" + std::to_string(q.copy)) != std::string::npos);
}

TEST_CASE("a cluster that cannot hear the server starts none of the server's jobs until it can") {
  REQUIRE_MESSAGE(aqs::testbed::netns_hosts::available(), "needs root and ip netns");
  blocked_queue q(120);  // a long timeout: the server keeps the job placed there all along
  // The server stops answering; the cluster's admin ends the blocker, so the
  // queued job could start, but the server would not know it did.
  q.site.freeze(true);
  const run_result k = q.one.cmd(aqs::test::bin().fkill, {std::to_string(q.blocker["local_id"].get<std::int64_t>())});
  CHECK_MESSAGE(k.status == 0, k.err);
  std::this_thread::sleep_for(9s);  // past the uplink's start timeout (5 s)
  const auto local = q.one.job(q.copy);
  REQUIRE(local.has_value());
  CHECK(local->state == aqs::core::job_state::pending);
  CHECK_FALSE(fs::exists(q.ran));
  CHECK(slurp(q.one.dir() / "aqsd.log").find("did not confirm the start") != std::string::npos);

  // The server is back: the job starts once, with the server's word.
  q.site.freeze(false);
  const json done = wait_job(q.c, q.queued, [](const json& j) { return is_final(j["state"].get<std::string>()); }, 120s);
  CHECK_MESSAGE(done["state"] == "COMPLETED", done.dump() << "\n" << q.c.history(q.queued).dump());
  CHECK(done["local_id"].get<std::int64_t>() == q.copy);
  CHECK(slurp(q.ran) == "ran\n");
  CHECK(has_event(q.c.history(q.queued), "starting"));
}

TEST_CASE("forged or missing credentials, and users the tables do not allow, are refused and logged") {
  REQUIRE_MESSAGE(aqs::testbed::netns_hosts::available(), "needs root and ip netns");
  // alice may use cluster "one" as herself; bob may not use it at all.
  const std::string table = "aqsalice one *\naqsbob two aqsbob\n";
  faucets_site site({"one", "two"}, table, "fastest-queue", 5);
  // "one" is honest; a cluster claiming to be "two" holds one's key instead.
  cluster one(cluster_opts(1, 2, site.join_args("one", "aqsalice aqsalice\n")));
  cluster two(cluster_opts(1, 2, site.join_args("two", "* *\n", 1.0, "one")));
  one.wait_nodes_up(1);
  const auto alice = one.user("aqsalice");
  const auto bob = one.user("aqsbob");
  const std::string ta = site.token_for(&alice);
  site.wait_up(ta, {"one"});

  SUBCASE("a cluster that cannot prove its key is refused, and logged") {
    std::this_thread::sleep_for(2s);
    auto c = site.client(ta);
    for (const auto& x : c.clusters()) {
      if (x["name"] == "two") CHECK(x["state"] != "UP");
    }
    CHECK(site.log().find("cluster 'two' did not prove its key") != std::string::npos);
  }
  SUBCASE("a local user cannot give a job a Faucets submit token (and so pose as the server's job)") {
    // As if the server had placed it: it would wait for the server, be
    // reported to it, and could be adopted as another user's job.
    const auto r = aqs::test::submit_with_token(one, alice, "faucets:one:1.1");
    CHECK_MESSAGE(r.job_id == -1, "accepted as job " << r.job_id);
    CHECK_MESSAGE(r.error.find("kept for jobs a Faucets server forwards") != std::string::npos, r.error);
    CHECK(one.jobs(true).empty());
  }
  SUBCASE("no token, a forged token, an expired one: 401 and nothing changes") {
    auto status_of = [](auto&& call) {
      try {
        call();
      } catch (const aqs::client::faucets::error& e) {
        return e.http_status();
      }
      return 200;
    };
    auto none = site.client("");
    CHECK(status_of([&] { none.list_jobs(true); }) == 401);
    const std::string expired = site.token_for(&alice, 1);
    std::this_thread::sleep_for(2500ms);
    CHECK(status_of([&] { site.client(expired).list_jobs(true); }) == 401);
    std::string forged = ta;
    forged[forged.size() - 3] = forged[forged.size() - 3] == 'a' ? 'b' : 'a';
    auto f = site.client(forged);
    CHECK(status_of([&] { f.submit("auto", json{{"name", "x"}}); }) == 401);
    const run_result r = fsub_via(site, forged, alice, {"--wrap", "true"});
    CHECK(r.status == 1);
    CHECK(r.err.find("refused the token") != std::string::npos);
    CHECK(site.client(ta).list_jobs(true).empty());
  }
  SUBCASE("a user the server's table does not allow on a cluster is refused at submission") {
    const std::string tb = site.token_for(&bob);
    const run_result r = fsub_via(site, tb, bob, {"-M", "one", "--wrap", "true"});
    CHECK(r.status == 1);
    CHECK(r.err.find("may not run jobs on cluster 'one'") != std::string::npos);
  }
  SUBCASE("another user's job is not theirs to see or cancel") {
    const run_result r = fsub_via(site, ta, alice, {"--wrap", "sleep 30"});
    REQUIRE(r.status == 0);
    const std::int64_t id = std::stoll(r.out.substr(std::string("Submitted job ").size()));
    auto cb = site.client(site.token_for(&bob));
    CHECK_THROWS_WITH_AS(cb.cancel(id), doctest::Contains("no job"), aqs::client::faucets::error);
    CHECK(cb.list_jobs(true).empty());
    auto ca = site.client(ta);
    CHECK(ca.job(id)["state"] != "CANCELLED");
    ca.cancel(id);
  }
  SUBCASE("a cluster refuses what its own table does not allow, and logs it") {
    // The server lets alice run on "one" as "aqsbob"; one's table does not.
    faucets_site site2({"one"}, "aqsalice one aqsbob\n", "random", 5);
    cluster one2(cluster_opts(1, 2, site2.join_args("one", "aqsalice aqsalice\n")));
    one2.wait_nodes_up(1);
    const std::string t2 = site2.token_for(&alice);
    site2.wait_up(t2, {"one"});
    const run_result r = fsub_via(site2, t2, alice, {"--wrap", "true"});
    REQUIRE(r.status == 0);
    const std::int64_t id = std::stoll(r.out.substr(std::string("Submitted job ").size()));
    auto c = site2.client(t2);
    const auto until = std::chrono::steady_clock::now() + 30s;
    json h;
    bool refused = false;
    while (!refused && std::chrono::steady_clock::now() < until) {
      h = c.history(id);
      for (const auto& e : h) refused = refused || e["event"] == "refused";
      std::this_thread::sleep_for(200ms);
    }
    CHECK_MESSAGE(refused, h.dump());
    CHECK(one2.jobs(true).empty());
    CHECK(slurp(one2.dir() / "aqsd.log").find("does not let Faucets user 'aqsalice' run as 'aqsbob'") != std::string::npos);
  }
}
