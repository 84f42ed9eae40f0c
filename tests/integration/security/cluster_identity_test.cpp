// cluster_identity: issue 28 item 7. Two clusters (two aqsd with databases of
// their own) whose agents share a name and a spool on one host, and a cluster
// re-created on a fresh database over an old spool: neither adopts, reports
// or kills the other's job. Real aqsd, real aqs-node, jobs of an unprivileged
// throwaway user; a raw node peer for the protocol's side.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <pwd.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <pqxx/connection>
#include <pqxx/transaction>

#include "e2e.hpp"
#include "run_users.hpp"
#include "protocol/framing.hpp"
#include "raw_peer.hpp"

using test::describe;
using test::is_ok;
using test::raw_peer;

namespace {

constexpr const char* k_user = "aqs-cluster-id-a";

// Made for this run, removed at its end (run_users.hpp).
using test::users;

// A cluster of no agent of the harness's own: the test starts them.
std::unique_ptr<test::cluster> bare_cluster(const test::test_database& db) {
  return std::make_unique<test::cluster>(test::nodes_of(db, 0, 4));
}

// An agent "shared" of cluster c on `spool`, logging to c's directory.
struct agent_process {
  pid_t pid = -1;
  fs::path log;
  agent_process(const test::cluster& c, const fs::path& spool, const std::string& tag,
                std::vector<std::string> more = {}) {
    log = c.dir() / ("agent-" + tag + ".log");
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    std::vector<std::string> argv{bin().aqs_node, "--name", "shared", "--procs", "2", "--spool", spool.string(),
                                  "--socket", c.socket(), "--heartbeat", "0.5"};
    argv.insert(argv.end(), more.begin(), more.end());
    pid = test::spawn(argv, {}, std::nullopt, std::nullopt, "", fd, fd);
    ::close(fd);
  }
  ~agent_process() {
    if (pid > 0) test::stop_process(pid, 10s);
  }
  // Its exit status if it exited within `limit`, else nullopt.
  std::optional<int> exited_within(std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(50ms);
    }
    return std::nullopt;
  }
  void kill9() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
};

// A job of the user that records its shell's pid and then runs until killed.
std::int64_t long_job(test::cluster& c, const test::test_user& u, const fs::path& pid_file) {
  const auto id = c.submit({"-n", "1", "-o", (u.home / "long-%j.out").string(), "--wrap",
                            "echo $$ > " + pid_file.string() + "; exec sleep 600"},
                           &u, u.home.string());
  c.wait_state(id, {job_state::running});
  pid_t pid = -1;
  for (int i = 0; i < 200 && pid <= 0; ++i) {
    try {
      pid = static_cast<pid_t>(std::stol(slurp(pid_file)));
    } catch (const std::exception&) {
      std::this_thread::sleep_for(50ms);
    }
  }
  REQUIRE_MESSAGE(pid > 0, "the job never wrote its pid");
  return id;
}

pid_t pid_in(const fs::path& f) { return static_cast<pid_t>(std::stol(slurp(f))); }

}  // namespace

TEST_CASE("a spool that another cluster's agent holds is refused at start, and its job lives on") {
  users().ensure(k_user);
  test::test_database db_a, db_b;
  auto a = bare_cluster(db_a);
  auto b = bare_cluster(db_b);
  const auto user = a->user(k_user);
  const auto user_b = b->user(k_user);
  // The default spool is /var/spool/aqs/node-NAME whatever the cluster: both
  // agents of the name "shared" land on the same directory.
  const fs::path spool = a->dir() / "spool-shared";
  agent_process agent_a(*a, spool, "a");
  a->wait_nodes_up(1);
  const fs::path pid_file = user.home / "job-a.pid";
  const auto job = long_job(*a, user, pid_file);
  const pid_t job_pid = pid_in(pid_file);

  agent_process agent_b(*b, spool, "b");
  const auto status = agent_b.exited_within(20s);
  REQUIRE_MESSAGE(status.has_value(), "cluster B's agent took the spool cluster A's agent holds: " << slurp(agent_b.log)
                                                                                                   << slurp(b->dir() / "aqsd.log"));
  CHECK(*status != 0);
  const std::string said = slurp(agent_b.log);
  CHECK_MESSAGE(said.find("is held by another aqs-node") != std::string::npos, said);
  CHECK_MESSAGE(said.find("--spool of its own") != std::string::npos, said);
  // One line: the refusal and nothing else.
  CHECK(std::count(said.begin(), said.end(), '\n') == 1);

  std::this_thread::sleep_for(2s);
  CHECK(test::alive(job_pid));
  const auto still = a->job(job);
  REQUIRE(still);
  CHECK(still->state == job_state::running);
  CHECK(b->jobs().empty());
  (void)user_b;
}

TEST_CASE("a cluster re-created on a fresh database over an old spool neither adopts nor kills the old cluster's job") {
  users().ensure(k_user);
  test::test_database db_old, db_new;
  auto old_cluster = bare_cluster(db_old);
  const auto user = old_cluster->user(k_user);
  const fs::path spool = old_cluster->dir() / "spool-shared";
  const fs::path pid_file = user.home / "job-old.pid";
  std::int64_t old_job = 0;
  {
    // The old cluster's agent runs a job and dies with SIGKILL; its job runs
    // on under its step (fenced only after a long node-down timeout here, so
    // that whatever ends it in this test is the new cluster).
    agent_process agent_old(*old_cluster, spool, "old", {"--node-down-timeout", "600"});
    old_cluster->wait_nodes_up(1);
    old_job = long_job(*old_cluster, user, pid_file);
    agent_old.kill9();
  }
  old_cluster->stop_aqsd();
  const pid_t old_pid = pid_in(pid_file);
  REQUIRE(test::alive(old_pid));

  // The cluster made again: a new aqsd on a new database, its agent of the
  // same name on the same spool. Its first job has the old job's number.
  auto fresh = bare_cluster(db_new);
  const auto user_new = fresh->user(k_user);
  agent_process agent_new(*fresh, spool, "new");
  fresh->wait_nodes_up(1);
  std::this_thread::sleep_for(2s);  // a few heartbeats
  CHECK_MESSAGE(test::alive(old_pid), "the new cluster killed the old cluster's job: " << slurp(agent_new.log)
                                                                                     << slurp(fresh->dir() / "aqsd.log"));
  const fs::path out = user_new.home / "new.out";
  const auto job = fresh->submit({"-n", "1", "-o", out.string(), "--wrap", "echo new-cluster-job"}, &user_new,
                                 user_new.home.string());
  CHECK(job == old_job);  // the same number: what a match by number alone confused
  const auto done = fresh->wait_state(job, {job_state::completed, job_state::failed, job_state::cancelled});
  CHECK_MESSAGE(done.state == job_state::completed, slurp(agent_new.log) << slurp(fresh->dir() / "aqsd.log"));
  CHECK(slurp(out) == "new-cluster-job\n");  // written once
  CHECK(test::alive(old_pid));
  const std::string agent_said = slurp(agent_new.log);
  CHECK_MESSAGE(agent_said.find("set aside, not adopted and not killed") != std::string::npos, agent_said);
  CHECK(agent_said.find("adopted 1") == std::string::npos);
  const std::string aqsd_said = slurp(fresh->dir() / "aqsd.log");
  CHECK_MESSAGE(aqsd_said.find("killing") == std::string::npos, aqsd_said);
  ::kill(old_pid, SIGKILL);
}

TEST_CASE("aqsd names its cluster at registration and sets aside a running list of another cluster") {
  test::test_database db;
  auto c = bare_cluster(db);
  raw_peer node = raw_peer(test::connect_unix_as(c->socket(), 0, 0).at(0));
  REQUIRE(is_ok(node.hello(protocol::peer_role::node)));
  protocol::register_node reg;
  reg.id = 2;
  reg.name = "rawnode";
  reg.procs = 1;
  reg.cpus = {0};
  reg.running = {4242};
  // The id of some other cluster: its job 4242 is none of this cluster's
  // business, neither to adopt nor to kill.
  nlohmann::json j = protocol::to_json(protocol::message(reg));
  j["cluster_id"] = "0123456789abcdef0123456789abcdef";
  node.send_bytes(protocol::encode_frame(j.dump()));
  const auto reply = node.reply_to(2);
  REQUIRE_MESSAGE(is_ok(reply), describe(reply));
  const auto& result = std::get<protocol::ok>(*reply).result;
  REQUIRE_MESSAGE(result.contains("cluster_id"), result.dump());
  const std::string own = result["cluster_id"].get<std::string>();
  CHECK(own.size() == 32);
  CHECK(own != "0123456789abcdef0123456789abcdef");
  CHECK_MESSAGE(result["kill"].empty(), result.dump());
  CHECK(slurp(c->dir() / "aqsd.log").find("set aside 1 running job(s) of cluster 0123456789abcdef0123456789abcdef") !=
        std::string::npos);

  // Under its own id, the same list is this cluster's: job 4242 is not one
  // it runs there, so the agent must kill it.
  raw_peer again = raw_peer(test::connect_unix_as(c->socket(), 0, 0).at(0));
  REQUIRE(is_ok(again.hello(protocol::peer_role::node)));
  j["id"] = 3;
  j["name"] = "rawnode2";
  j["cluster_id"] = own;
  again.send_bytes(protocol::encode_frame(j.dump()));
  const auto reply2 = again.reply_to(3);
  REQUIRE_MESSAGE(is_ok(reply2), describe(reply2));
  CHECK(std::get<protocol::ok>(*reply2).result["kill"] == nlohmann::json::array({4242}));
}

TEST_CASE("a database made by the migrations has a cluster id that cannot be changed") {
  test::test_database db;
  pqxx::connection conn(db.conninfo());
  pqxx::work tx(conn);
  const auto id = tx.exec1("SELECT cluster_id FROM cluster_identity")[0].as<std::string>();
  CHECK(id.size() == 32);
  CHECK_THROWS(tx.exec0("UPDATE cluster_identity SET cluster_id = '0123456789abcdef0123456789abcdef'"));
}
