// The controller's parts, each alone: permissions, the access view, the node
// registry's placement, the job table, the dependency gate, the step table,
// the watch list and the resize tracker (in virtual time). No sockets, no
// database, no real time.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>

#include "daemon/access_view.hpp"
#include "daemon/dependency_gate.hpp"
#include "daemon/job_table.hpp"
#include "daemon/node_registry.hpp"
#include "daemon_base/permissions.hpp"
#include "daemon/resize_tracker.hpp"
#include "daemon/step_table.hpp"
#include "daemon/watch_list.hpp"
#include "fake_connection.hpp"
#include "manual_clock.hpp"
#include "protocol/errors.hpp"

using namespace aqs;
using namespace std::chrono_literals;
using core::job_state;
using daemon::peer_info;
using daemon::transport;

namespace {

peer_info unix_peer(uid_t uid) {
  peer_info p;
  p.uid = uid;
  return p;
}

peer_info no_uid_peer() {
  peer_info p;
  p.uid.reset();
  return p;
}

peer_info tcp_peer(std::string address) {
  peer_info p;
  p.via = transport::tcp;
  p.address = std::move(address);
  return p;
}

core::processor_set procs(std::size_t size, std::initializer_list<std::size_t> on) {
  core::processor_set s(size);
  for (auto p : on) s.set(p);
  return s;
}

}  // namespace

TEST_CASE("only a job's owner and administrators may act on it") {
  CHECK(daemon::may_act_on_job(unix_peer(1000), 1000));
  CHECK_FALSE(daemon::may_act_on_job(unix_peer(1001), 1000));
  CHECK(daemon::may_act_on_job(unix_peer(0), 1000));
  CHECK(daemon::may_act_on_job(tcp_peer("10.0.0.2"), 1000));  // it proved the cluster key
  CHECK_FALSE(daemon::may_act_on_job(no_uid_peer(), 1000));
}

TEST_CASE("submissions come only over the Unix socket from a known uid") {
  CHECK(daemon::may_submit(unix_peer(1000)));
  CHECK_FALSE(daemon::may_submit(tcp_peer("10.0.0.2")));
  CHECK_FALSE(daemon::may_submit(no_uid_peer()));
}

TEST_CASE("a role=job peer speaks only for a live job of its own user, from one of the job's hosts") {
  daemon::access_view v;
  v.set_owner(7, 1000);
  v.set_job_addresses(7, {"10.0.0.2"});
  auto speaks_for = [](peer_info p, std::int64_t job) {
    p.role = protocol::peer_role::job;
    p.job_id = job;
    return p;
  };
  CHECK_NOTHROW(v.check_job_peer(speaks_for(unix_peer(1000), 7)));
  CHECK_NOTHROW(v.check_job_peer(speaks_for(unix_peer(0), 7)));
  CHECK_THROWS_AS(v.check_job_peer(speaks_for(unix_peer(1001), 7)), protocol::protocol_error);
  CHECK_THROWS_AS(v.check_job_peer(speaks_for(unix_peer(1000), 8)), protocol::protocol_error);
  CHECK_NOTHROW(v.check_job_peer(speaks_for(tcp_peer("10.0.0.2"), 7)));
  CHECK_THROWS_AS(v.check_job_peer(speaks_for(tcp_peer("10.0.0.3"), 7)), protocol::protocol_error);
  SUBCASE("an adaptive job may be reached from any connected agent's host, and no other") {
    v.set_job_addresses(7, {daemon::access_view::k_any_agent});
    v.set_agent_addresses({"10.0.0.3"});
    CHECK_NOTHROW(v.check_job_peer(speaks_for(tcp_peer("10.0.0.3"), 7)));
    CHECK_THROWS_AS(v.check_job_peer(speaks_for(tcp_peer("10.0.0.4"), 7)), protocol::protocol_error);
  }
  SUBCASE("a requeued job's old instance loses its token and hosts, but the job stays owned") {
    v.set_token(7, "secret");
    v.forget_instance(7);
    CHECK_FALSE(v.token(7));
    CHECK(v.owner(7) == 1000);
    CHECK_THROWS_AS(v.check_job_peer(speaks_for(tcp_peer("10.0.0.2"), 7)), protocol::protocol_error);
    v.forget_job(7);
    CHECK_FALSE(v.owner(7));
  }
}

TEST_CASE("the node registry places a map on hosts and cpus, and finds spare hosts") {
  daemon::node_registry r;
  core::cluster machine;
  for (std::size_t i = 0; i < 3; ++i) {
    daemon::node_entry n;
    n.name = "n" + std::to_string(i);
    n.index = machine.add_node(n.name, 4);
    n.first_proc = i * 4;
    n.nprocs = 4;
    n.cpus = {10, 11};  // 4 processors over 2 cpus
    n.host = i < 2 ? "hostA" : "hostB";
    r.add(std::move(n));
  }
  std::vector<std::string> hosts;
  std::vector<std::int64_t> cpus;
  r.fill_placement(procs(12, {1, 2, 9}), hosts, cpus);
  CHECK(hosts == std::vector<std::string>{"hostA", "hostA", "hostB"});
  CHECK(cpus == std::vector<std::int64_t>{11, 10, 11});
  CHECK(daemon::node_registry::local_cpus(r.at(0), procs(12, {0, 1, 2, 3})) == std::vector<std::int64_t>{10, 11});
  CHECK(daemon::node_registry::local_cpus(r.at(1), procs(12, {0, 1})).empty());

  // Spare hosts: only connected, UP nodes on hosts the map does not use.
  CHECK(r.spare_hosts(procs(12, {0}), machine).empty());  // nobody connected
  r.at(2).conn = std::make_shared<test::fake_connection>(protocol::peer_role::node, 0);
  CHECK(r.spare_hosts(procs(12, {0}), machine) == std::vector<std::string>{"hostB"});
  CHECK(r.spare_hosts(procs(12, {8}), machine).empty());
  machine.set_state(2, core::node_state::down);
  CHECK(r.spare_hosts(procs(12, {0}), machine).empty());

  CHECK(r.of_conn(*r.at(2).conn) == &r.at(2));
  CHECK(r.find("n1") == &r.at(1));
  CHECK(r.find("n9") == nullptr);
  daemon::node_entry late;
  late.name = "late";
  late.index = 7;
  CHECK_THROWS(r.add(std::move(late)));
}

TEST_CASE("the job table keeps the newest ended jobs' final states, bounded") {
  daemon::job_table t(2);
  for (std::int64_t id = 1; id <= 3; ++id) {
    daemon::job_entry e;
    e.uid = static_cast<std::int32_t>(1000 + id);
    e.user = id == 2 ? "bob" : "ann";
    CHECK(t.add(id, std::move(e)));
  }
  CHECK_FALSE(t.add(1, {}));  // a retried submission adds nothing
  CHECK(t.of_user("ann") == std::vector<std::int64_t>{1, 3});
  t.finish(1, job_state::completed, 0, std::nullopt);
  t.finish(2, job_state::failed, 3, std::nullopt);
  REQUIRE(t.finished(2) != nullptr);
  CHECK(t.finished(2)->uid == 1002);
  CHECK(t.finished(2)->exit_code == 3);
  CHECK_FALSE(t.is_live(2));
  t.finish(3, job_state::cancelled, std::nullopt, 15);
  CHECK(t.finished(1) == nullptr);  // the oldest went
  CHECK_FALSE(t.is_known(1));
  CHECK(t.finished(3)->signal == 15);
  CHECK(t.live_count() == 0);
}

TEST_CASE("afterok: ready when every dependency completed, never once one failed, else waiting") {
  std::map<std::int64_t, job_state> states{{1, job_state::completed}, {2, job_state::running}, {3, job_state::failed}};
  auto state_of = [&](std::int64_t id) -> std::optional<job_state> {
    auto it = states.find(id);
    if (it == states.end()) return std::nullopt;
    return it->second;
  };
  using kind = daemon::dependency_gate::verdict::kind;
  CHECK(daemon::dependency_gate::evaluate({1}, state_of).what == kind::ready);
  const auto w = daemon::dependency_gate::evaluate({1, 2, 9}, state_of);
  CHECK(w.what == kind::waiting);
  CHECK(w.waiting == std::vector<std::int64_t>{2, 9});
  const auto n = daemon::dependency_gate::evaluate({2, 3}, state_of);
  CHECK(n.what == kind::never);
  CHECK(n.failed_dep == 3);
  CHECK(n.failed_state == job_state::failed);

  daemon::dependency_gate g;
  g.hold(10, {2});
  g.hold(11, {2, 4});
  CHECK(g.is_held(10));
  g.release(11);  // cancelled meanwhile
  CHECK(g.ended(2) == std::vector<std::int64_t>{10});
  CHECK(g.ended(2).empty());
}

TEST_CASE("the step table ends a launcher's steps and, with its job, every node the job touched") {
  daemon::step_table t;
  auto launcher = std::make_shared<test::fake_connection>(protocol::peer_role::job);
  auto other = std::make_shared<test::fake_connection>(protocol::peer_role::job);
  t.add(5, 1, {launcher, 100, 1000, false});
  t.add(5, 2, {other, 101, 1001, false});
  t.add(6, 1, {launcher, 102, 1002, false});
  CHECK(t.by_launch(2, 1001) == daemon::step_table::key{5, 2});
  CHECK_FALSE(t.by_launch(1, 1001));
  t.started({5, 2});
  CHECK(t.take_of(*launcher) == std::vector<daemon::step_table::key>{{5, 1}, {6, 1}});
  CHECK(t.runs(5, 2));
  const auto end = t.take_job(5);
  CHECK(end.nodes == std::set<std::size_t>{2});
  REQUIRE(end.open.size() == 1);
  CHECK(end.open[0].first == 2);
  CHECK_FALSE(t.runs(5, 2));
  CHECK(t.nodes_of(5) == nullptr);
}

TEST_CASE("the watch list keeps output until a watcher comes, bounded, and says who was the last watcher") {
  daemon::watch_list w;
  protocol::output o;
  o.job_id = 3;
  o.data = std::string(600'000, 'x');
  w.output(o);
  w.output(o);  // over 1 MiB: the first goes
  CHECK(w.early_bytes(3) == 600'000);
  auto c = std::make_shared<test::fake_connection>();
  w.add(3, c, 42);
  const auto got = c->take<protocol::output>();
  REQUIRE(got);
  CHECK(got->id == 42);
  CHECK(w.early_bytes(3) == 0);
  w.notify(3, job_state::running, std::nullopt, std::nullopt, nullptr);
  CHECK(c->take<protocol::job_event>([](const protocol::job_event& e) { return e.state == job_state::running; }));
  CHECK(w.drop(*c) == std::vector<std::int64_t>{3});
  CHECK(w.watchers_of(3) == 0);
  SUBCASE("a final state drops the job's watchers") {
    w.add(3, c, 43);
    w.notify(3, job_state::completed, 0, std::nullopt, nullptr);
    CHECK(w.watchers_of(3) == 0);
  }
}

TEST_CASE("a resize times out in virtual time unless it is disarmed first") {
  boost::asio::io_context io;
  test::manual_clock clock;
  daemon::resize_tracker r(clock, io.get_executor());
  std::vector<std::pair<std::int64_t, std::int64_t>> expired;
  auto on_expiry = [&](std::int64_t job, std::int64_t epoch) { expired.emplace_back(job, epoch); };
  const std::int64_t e1 = r.next_epoch(4);
  CHECK(e1 == 1);
  r.arm(4, e1, 30s, on_expiry);
  r.arm(5, r.next_epoch(5), 30s, on_expiry);
  r.disarm(5);
  clock.advance(29s);
  io.run();
  io.restart();
  CHECK(expired.empty());
  clock.advance(1s);
  io.run();
  io.restart();
  CHECK(expired == std::vector<std::pair<std::int64_t, std::int64_t>>{{4, 1}});
  CHECK(r.next_epoch(4) == 2);
  auto shim = std::make_shared<test::fake_connection>(protocol::peer_role::job);
  r.attach_shim(4, shim);
  CHECK(r.shim(4) == shim);
  r.detach_shim(4, test::fake_connection{});  // another connection: no change
  CHECK(r.shim(4) == shim);
  r.detach_shim(4, *shim);
  CHECK(r.shim(4) == nullptr);
  r.forget(4);
  CHECK(r.epoch(4) == 0);
}
