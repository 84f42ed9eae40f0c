// The controller (aqsd's request handling) over the real job store on the
// test PostgreSQL, with in-memory connections playing node agents and
// clients: the scheduling pipeline without processes or sockets.
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "daemon/controller.hpp"
#include "fake_connection.hpp"
#include "store/pg_job_store.hpp"
#include "test_pg.hpp"

using namespace aqs;
using namespace std::chrono_literals;
using core::job_state;

namespace {

using fake_conn = test::fake_connection;

// aqsd without its network: a controller on a running io_context.
struct daemon_under_test {
  explicit daemon_under_test(const std::string& conninfo, std::chrono::milliseconds heartbeat_timeout = 10s)
      : store(options(conninfo)), ctl(io, store, controller_options(heartbeat_timeout), [] {}) {
    ctl.recover();
    ctl.start();
    for (int i = 0; i < 2; ++i) threads.emplace_back([this] { io.run(); });
  }
  ~daemon_under_test() {
    ctl.stop();
    work.reset();
    io.stop();
    for (auto& t : threads) t.join();
  }
  static store::pg_job_store_options options(const std::string& conninfo) {
    store::pg_job_store_options o;
    o.conninfo = conninfo;
    o.committers = 2;
    return o;
  }
  static daemon::controller_options controller_options(std::chrono::milliseconds heartbeat_timeout) {
    daemon::controller_options o;
    o.heartbeat_timeout = heartbeat_timeout;
    o.kill_grace = 1s;
    return o;
  }

  // A node agent that registered with `procs` processors (and `running` jobs).
  std::shared_ptr<fake_conn> agent(const std::string& name, std::int64_t procs, std::vector<std::int64_t> running = {},
                                   std::optional<protocol::ok>* reg_reply = nullptr) {
    auto c = std::make_shared<fake_conn>(protocol::peer_role::node, 0);
    ctl.on_open(c);
    protocol::register_node r;
    r.id = 1;
    r.name = name;
    r.procs = procs;
    r.cpus = {0, 1};
    r.running = std::move(running);
    // An agent names the cluster whose jobs it still runs: the one an
    // earlier registration's reply named (a real agent keeps it in its spool).
    r.cluster_id = cluster_id;
    ctl.on_message(c, r);
    auto rep = c->reply(1);
    REQUIRE(rep);
    REQUIRE(std::holds_alternative<protocol::ok>(*rep));
    const auto& ok = std::get<protocol::ok>(*rep);
    if (ok.result.contains("cluster_id")) cluster_id = ok.result["cluster_id"].get<std::string>();
    if (reg_reply) *reg_reply = ok;
    return c;
  }
  // The cluster id the agents were told at registration.
  std::string cluster_id;
  std::shared_ptr<fake_conn> client(uid_t uid) {
    auto c = std::make_shared<fake_conn>(protocol::peer_role::client, uid);
    ctl.on_open(c);
    return c;
  }
  std::int64_t submit(const std::shared_ptr<fake_conn>& c, std::int64_t procs, std::vector<std::int64_t> afterok = {}) {
    protocol::submit s;
    s.id = next_id++;
    s.job.name = "t";
    s.job.argv = {"true"};
    s.job.workdir = "/tmp";
    s.job.min_pe = s.job.max_pe = procs;
    s.job.afterok = std::move(afterok);
    ctl.on_message(c, s);
    auto rep = c->reply(s.id);
    REQUIRE(rep);
    REQUIRE_MESSAGE(std::holds_alternative<protocol::ok>(*rep), protocol::encode_body(*rep));
    return std::get<protocol::ok>(*rep).result["job_id"].get<std::int64_t>();
  }
  // The job's state in the store, polled until it is `want` (or 10 s).
  job_state wait_state(std::int64_t id, job_state want) {
    job_state now = job_state::pending;
    for (int i = 0; i < 500; ++i) {
      auto rec = store.get_job(id);
      REQUIRE(rec);
      now = rec->status.state;
      if (now == want) break;
      std::this_thread::sleep_for(20ms);
    }
    return now;
  }
  void exited(const std::shared_ptr<fake_conn>& agent_conn, std::int64_t job, job_state state, int code) {
    protocol::job_exited e;
    e.id = next_id++;
    e.job_id = job;
    e.state = state;
    e.exit_code = code;
    ctl.on_message(agent_conn, e);
    auto rep = agent_conn->reply(e.id);
    REQUIRE(rep);
    CHECK(std::holds_alternative<protocol::ok>(*rep));
  }

  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  store::pg_job_store store;
  daemon::controller ctl;
  std::vector<std::thread> threads;
  std::int64_t next_id = 100;
};

bool launch_of(const protocol::launch& l, std::int64_t job) { return l.job_id == job; }

}  // namespace

TEST_CASE("a submitted job is launched on its node after RUNNING is committed, and completes when its agent reports") {
  test::test_database db;
  daemon_under_test d(db.conninfo());
  auto node = d.agent("n0", 4);
  auto user = d.client(1000);
  const auto id = d.submit(user, 2);
  auto l = node->take<protocol::launch>([&](const auto& x) { return launch_of(x, id); });
  REQUIRE(l);
  // The store says RUNNING before the launch goes out.
  CHECK(d.store.get_job(id)->status.state == job_state::running);
  CHECK(l->uid == 1000);
  CHECK(l->procs == "1100");
  CHECK(l->nprocs == 2);
  CHECK(l->nodelist == "n0:0-1");
  CHECK(l->job_token.has_value());
  node->send(protocol::ok{l->id, {}});  // not what the controller reads; harmless
  d.exited(node, id, job_state::completed, 0);
  CHECK(d.wait_state(id, job_state::completed) == job_state::completed);
  CHECK(d.store.get_job(id)->status.exit_code == 0);
}

TEST_CASE("jobs that do not fit wait, and start when processors are freed") {
  test::test_database db;
  daemon_under_test d(db.conninfo());
  auto node = d.agent("n0", 4);
  auto user = d.client(1000);
  const auto a = d.submit(user, 3);
  const auto b = d.submit(user, 3);
  REQUIRE(node->take<protocol::launch>([&](const auto& x) { return launch_of(x, a); }));
  CHECK_FALSE(node->take<protocol::launch>([&](const auto& x) { return launch_of(x, b); }, 300ms));
  CHECK(d.store.get_job(b)->status.state == job_state::pending);
  d.exited(node, a, job_state::failed, 3);
  REQUIRE(node->take<protocol::launch>([&](const auto& x) { return launch_of(x, b); }));
  CHECK(d.store.get_job(a)->status.exit_code == 3);
}

TEST_CASE("cancel ends a pending job at once, signals a running one, and refuses other users' jobs") {
  test::test_database db;
  daemon_under_test d(db.conninfo());
  auto node = d.agent("n0", 2);
  auto alice = d.client(1000);
  auto bob = d.client(1001);
  const auto running = d.submit(alice, 2);
  const auto pending = d.submit(alice, 2);
  REQUIRE(node->take<protocol::launch>([&](const auto& x) { return launch_of(x, running); }));

  protocol::cancel by_bob;
  by_bob.id = 1;
  by_bob.job_ids = {running};
  d.ctl.on_message(bob, by_bob);
  auto refused = bob->reply(1);
  REQUIRE(refused);
  REQUIRE(std::holds_alternative<protocol::error>(*refused));
  CHECK(std::get<protocol::error>(*refused).code == protocol::error_code::permission_denied);

  protocol::cancel c;
  c.id = 2;
  c.job_ids = {pending, running, 999};
  d.ctl.on_message(alice, c);
  auto rep = alice->reply(2);
  REQUIRE(rep);
  REQUIRE(std::holds_alternative<protocol::ok>(*rep));
  const auto& res = std::get<protocol::ok>(*rep).result;
  CHECK(res["cancelled"] == nlohmann::json::array({pending, running}));
  CHECK(res["failed"].size() == 1);
  CHECK(res["failed"][0]["code"] == "not_found");
  // The pending job is CANCELLED in the store by the time of the reply.
  CHECK(d.store.get_job(pending)->status.state == job_state::cancelled);
  auto k = node->take<protocol::kill>([&](const auto& x) { return x.job_id == running; });
  REQUIRE(k);
  CHECK(k->signal == 15);
  d.exited(node, running, job_state::cancelled, 143);
  CHECK(d.wait_state(running, job_state::cancelled) == job_state::cancelled);
}

TEST_CASE("afterok holds a job until its dependency completed, and cancels it when the dependency failed") {
  test::test_database db;
  daemon_under_test d(db.conninfo());
  auto node = d.agent("n0", 4);
  auto user = d.client(1000);
  const auto a = d.submit(user, 1);
  const auto b = d.submit(user, 1, {a});
  const auto c = d.submit(user, 1);
  const auto e = d.submit(user, 1, {c});
  REQUIRE(node->take<protocol::launch>([&](const auto& x) { return launch_of(x, a); }));
  REQUIRE(node->take<protocol::launch>([&](const auto& x) { return launch_of(x, c); }));
  CHECK_FALSE(node->take<protocol::launch>([&](const auto& x) { return launch_of(x, b); }, 300ms));
  d.exited(node, a, job_state::completed, 0);
  REQUIRE(node->take<protocol::launch>([&](const auto& x) { return launch_of(x, b); }));
  d.exited(node, c, job_state::failed, 1);
  CHECK(d.wait_state(e, job_state::cancelled) == job_state::cancelled);
  CHECK_FALSE(node->take<protocol::launch>([&](const auto& x) { return launch_of(x, e); }, 200ms));
  // A dependency on a job that does not exist is refused at submission.
  protocol::submit s;
  s.id = 7;
  s.job.name = "x";
  s.job.argv = {"true"};
  s.job.workdir = "/tmp";
  s.job.afterok = {123456};
  d.ctl.on_message(user, s);
  auto rep = user->reply(7);
  REQUIRE(rep);
  REQUIRE(std::holds_alternative<protocol::error>(*rep));
  CHECK(std::get<protocol::error>(*rep).code == protocol::error_code::not_found);
}

TEST_CASE("a silent node goes DOWN: its job ends NODE_FAIL, a requeue job runs elsewhere, and the agent kills leftovers when it returns") {
  test::test_database db;
  daemon_under_test d(db.conninfo(), 600ms);
  auto n0 = d.agent("n0", 2);
  auto user = d.client(1000);
  const auto plain = d.submit(user, 2);
  REQUIRE(n0->take<protocol::launch>([&](const auto& x) { return launch_of(x, plain); }));
  // n1 keeps beating, n0 falls silent.
  auto n1 = d.agent("n1", 2);
  std::atomic<bool> beating{true};
  std::thread beat([&] {
    std::int64_t i = 5000;
    while (beating) {
      d.ctl.on_message(n1, protocol::heartbeat{i++, {}});
      std::this_thread::sleep_for(100ms);
    }
  });
  CHECK(d.wait_state(plain, job_state::node_fail) == job_state::node_fail);
  const auto after = d.submit(user, 2);
  REQUIRE(n1->take<protocol::launch>([&](const auto& x) { return launch_of(x, after); }));
  // n0 comes back still running the job: it must kill it.
  std::optional<protocol::ok> reg;
  auto back = d.agent("n0", 2, {plain}, &reg);
  REQUIRE(reg);
  CHECK(reg->result["kill"] == nlohmann::json::array({plain}));
  CHECK(reg->result["first_proc"] == 0);
  beating = false;
  beat.join();
}

TEST_CASE("a restarted controller recovers pending and running jobs from the store") {
  test::test_database db;
  std::int64_t running = 0, pending = 0;
  {
    daemon_under_test d(db.conninfo());
    auto node = d.agent("n0", 2);
    auto user = d.client(1000);
    running = d.submit(user, 2);
    pending = d.submit(user, 2);
    REQUIRE(node->take<protocol::launch>([&](const auto& x) { return launch_of(x, running); }));
  }
  daemon_under_test d(db.conninfo());
  // The agent comes back with the job still running: nothing to kill, and
  // nothing new starts on its processors.
  std::optional<protocol::ok> reg;
  auto node = d.agent("n0", 2, {running}, &reg);
  REQUIRE(reg);
  CHECK(reg->result["kill"].empty());
  CHECK_FALSE(node->take<protocol::launch>([&](const auto& x) { return launch_of(x, pending); }, 300ms));
  d.exited(node, running, job_state::completed, 0);
  REQUIRE(node->take<protocol::launch>([&](const auto& x) { return launch_of(x, pending); }));
  CHECK(d.store.get_job(running)->status.state == job_state::completed);
}

TEST_CASE("a node registering again with another processor count is refused") {
  test::test_database db;
  daemon_under_test d(db.conninfo());
  d.agent("n0", 4);
  auto c = std::make_shared<fake_conn>(protocol::peer_role::node, 0);
  protocol::register_node r;
  r.id = 3;
  r.name = "n0";
  r.procs = 8;
  r.cpus = {0};
  d.ctl.on_message(c, r);
  auto rep = c->reply(3);
  REQUIRE(rep);
  REQUIRE(std::holds_alternative<protocol::error>(*rep));
  CHECK(std::get<protocol::error>(*rep).message.find("renumbering") != std::string::npos);
}

TEST_CASE("an interactive job streams its output to its watcher, and is cancelled when the watcher goes away") {
  test::test_database db;
  daemon_under_test d(db.conninfo());
  auto node = d.agent("n0", 2);
  auto frun = d.client(1000);
  protocol::submit s;
  s.id = 1;
  s.job.name = "i";
  s.job.argv = {"cat"};
  s.job.workdir = "/tmp";
  s.job.interactive = true;
  d.ctl.on_message(frun, s);
  auto rep = frun->reply(1);
  REQUIRE(rep);
  const auto id = std::get<protocol::ok>(*rep).result["job_id"].get<std::int64_t>();
  auto l = node->take<protocol::launch>([&](const auto& x) { return launch_of(x, id); });
  REQUIRE(l);
  CHECK(l->job.interactive);
  // Output before anyone watches is kept and replayed.
  d.ctl.on_message(node, protocol::output{std::nullopt, id, "stdout", std::string("early\xff", 6)});
  d.ctl.on_message(frun, protocol::watch_job{2, id});
  REQUIRE(frun->reply(2));
  auto first = frun->take<protocol::job_event>();
  REQUIRE(first);
  CHECK(first->state == job_state::running);
  auto early = frun->take<protocol::output>();
  REQUIRE(early);
  CHECK(early->id == 2);
  CHECK(early->data == std::string("early\xff", 6));
  d.ctl.on_message(node, protocol::output{std::nullopt, id, "stderr", "late"});
  auto late = frun->take<protocol::output>();
  REQUIRE(late);
  CHECK(late->stream == "stderr");
  d.ctl.on_close(frun);
  auto k = node->take<protocol::kill>([&](const auto& x) { return x.job_id == id; });
  REQUIRE(k);
}

TEST_CASE("an adaptive job learns the hosts it may grow onto, and its launcher may start mpirun's daemon there") {
  test::test_database db;
  daemon_under_test d(db.conninfo());
  auto n1 = d.agent("n1", 2);
  auto n2 = d.agent("n2", 2);
  auto n3 = d.agent("n3", 2);
  auto alice = d.client(1000);
  protocol::submit s;
  s.id = d.next_id++;
  s.job.name = "adaptive";
  s.job.argv = {"true"};
  s.job.workdir = "/tmp";
  s.job.adaptive = true;
  s.job.min_pe = s.job.max_pe = 2;
  d.ctl.on_message(alice, s);
  auto rep = alice->reply(s.id);
  REQUIRE(rep);
  REQUIRE(std::holds_alternative<protocol::ok>(*rep));
  const auto a = std::get<protocol::ok>(*rep).result["job_id"].get<std::int64_t>();
  // It fits on the first node; the other UP hosts are spare.
  const auto la = n1->take<protocol::launch>([&](const protocol::launch& l) { return launch_of(l, a); });
  REQUIRE(la);
  CHECK(la->proc_hosts == std::vector<std::string>{"n1", "n1"});
  CHECK(la->spare_hosts == std::vector<std::string>{"n2", "n3"});
  d.ctl.on_message(n1, protocol::ok{la->id, {}});
  CHECK(d.wait_state(a, job_state::running) == job_state::running);

  // Its aqs-rsh starts a process on a spare host: on that host's node, on
  // all its cpus.
  auto rsh = std::make_shared<fake_conn>(protocol::peer_role::job, 1000);
  rsh->speak_for(a, true);
  d.ctl.on_open(rsh);
  d.ctl.on_message(rsh, protocol::remote_exec{7, a, "n3", "orted", {}});
  const auto step = n3->take<protocol::launch>([&](const protocol::launch& l) { return launch_of(l, a); });
  REQUIRE(step);
  CHECK(step->local_cpus == std::vector<std::int64_t>{0, 1});
  d.ctl.on_message(n3, protocol::ok{step->id, {}});
  auto started = rsh->reply(7);
  REQUIRE(started);
  REQUIRE(std::holds_alternative<protocol::ok>(*started));
  CHECK(std::get<protocol::ok>(*started).result["node"] == "n3");

  // A rigid job may start processes only where it has processors.
  const auto r = d.submit(alice, 2);
  const auto lr = n2->take<protocol::launch>([&](const protocol::launch& l) { return launch_of(l, r); });
  REQUIRE(lr);
  CHECK(lr->spare_hosts.empty());
  d.ctl.on_message(n2, protocol::ok{lr->id, {}});
  CHECK(d.wait_state(r, job_state::running) == job_state::running);
  auto rigid_rsh = std::make_shared<fake_conn>(protocol::peer_role::job, 1000);
  rigid_rsh->speak_for(r, true);
  d.ctl.on_open(rigid_rsh);
  d.ctl.on_message(rigid_rsh, protocol::remote_exec{8, r, "n3", "orted", {}});
  auto refused = rigid_rsh->reply(8);
  REQUIRE(refused);
  REQUIRE(std::holds_alternative<protocol::error>(*refused));
  CHECK(std::get<protocol::error>(*refused).code == protocol::error_code::not_found);
}

TEST_CASE("a node whose agent says it is leaving goes DOWN at once and its job ends NODE_FAIL") {
  test::test_database db;
  daemon_under_test d(db.conninfo(), 600s);  // never by silence in this test
  auto n0 = d.agent("n0", 2);
  auto user = d.client(1000);
  const auto job = d.submit(user, 2);
  REQUIRE(n0->take<protocol::launch>([&](const auto& x) { return launch_of(x, job); }));
  d.ctl.on_message(n0, protocol::node_leaving{77});
  auto rep = n0->reply(77);
  REQUIRE(rep);
  CHECK(std::holds_alternative<protocol::ok>(*rep));
  CHECK(d.wait_state(job, job_state::node_fail) == job_state::node_fail);
  bool down = false;
  for (int i = 0; i < 500 && !down; ++i) {
    for (const auto& n : d.store.list_nodes()) down = down || (n.name == "n0" && n.state == store::node_state::down);
    if (!down) std::this_thread::sleep_for(20ms);
  }
  CHECK(down);
  CHECK(n0->closed());
}
