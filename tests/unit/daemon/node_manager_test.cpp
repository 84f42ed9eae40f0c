// The nodes part alone, in virtual time: registration, heartbeats, fencing
// (DOWN after the heartbeat timeout), agents leaving, messages kept for an
// agent that is away. An in-memory store, a fake pipeline and fake jobs'
// side; no sockets, no PostgreSQL, no real time.
#include <doctest/doctest.h>

#include "node_rig.hpp"

using namespace aqs;
using namespace std::chrono_literals;

namespace {

struct fake_jobs final : daemon::node_jobs {
  std::vector<std::int64_t> to_kill;
  std::vector<std::pair<std::size_t, std::vector<std::int64_t>>> reports;
  bool want_queued = true;
  std::size_t span_refreshes = 0, address_refreshes = 0;
  std::string id = "0123456789abcdef0123456789abcdef";

  std::vector<std::int64_t> adopt_running(std::size_t, const std::vector<std::int64_t>&) override { return to_kill; }
  bool still_wanted(std::size_t, const protocol::message&) override { return want_queued; }
  void jobs_reported(std::size_t index, const std::vector<std::int64_t>& running) override {
    reports.emplace_back(index, running);
  }
  void refresh_spans() override { ++span_refreshes; }
  void refresh_agent_addresses() override { ++address_refreshes; }
  const std::string& cluster_id() const override { return id; }
};

bool any_kill(const protocol::kill&) { return true; }

struct rig {
  boost::asio::io_context io;
  test::manual_clock clock;
  core::scheduler core{core::cluster{}, core::make_strategy("fcfs")};
  test::recording_pipeline out;
  fake_jobs jobs;
  daemon::node_manager nodes{core, clock, io.get_executor(), out, jobs, 1000ms};

  // Lets virtual time pass and runs the timers that fell due.
  void pass(std::chrono::milliseconds d) {
    for (auto step = 100ms; d > 0ms; d -= step) {
      clock.advance(std::min(step, d));
      io.poll();
      io.restart();
    }
  }
  std::shared_ptr<test::fake_connection> agent(const std::string& name, std::int64_t procs, std::int64_t rid = 1) {
    auto c = std::make_shared<test::fake_connection>(protocol::peer_role::node);
    protocol::register_node m;
    m.id = rid;
    m.name = name;
    m.procs = procs;
    nodes.handle_register(c, m);
    return c;
  }
  core::node_state state(std::size_t index) const { return core.machine().at(index).state; }
};

}  // namespace

TEST_CASE("a registering agent is numbered after the last node and told the cluster's id") {
  rig r;
  auto a = r.agent("n1", 4, 1);
  auto b = r.agent("n2", 2, 2);
  const auto ok_a = a->reply(1, 0ms);
  const auto ok_b = b->reply(2, 0ms);
  REQUIRE(ok_a);
  REQUIRE(ok_b);
  const auto reply_b = protocol::read_reply<protocol::register_reply>(std::get<protocol::ok>(*ok_b));
  CHECK(reply_b.first_proc == 4);
  CHECK(reply_b.cluster_id == "0123456789abcdef0123456789abcdef");
  CHECK(r.nodes.size() == 2);
  CHECK(r.core.machine().size() == 6);
  CHECK(r.nodes.of_conn(*b)->name == "n2");
  CHECK(r.jobs.span_refreshes >= 2);
  // Another agent may not take a name whose agent is connected.
  auto thief = r.agent("n1", 4, 3);
  const auto refused = thief->reply(3, 0ms);
  REQUIRE(refused);
  CHECK(std::get<protocol::error>(*refused).code == protocol::error_code::invalid_state);
  // Nor may the node come back with another size.
  auto resized = r.agent("n2", 8, 4);
  const auto renumber = resized->reply(4, 0ms);
  REQUIRE(renumber);
  CHECK(std::get<protocol::error>(*renumber).code == protocol::error_code::bad_request);
  CHECK(r.core.machine().size() == 6);
}

TEST_CASE("a node silent for the heartbeat timeout goes DOWN in virtual time; heartbeats keep it UP") {
  rig r;
  auto a = r.agent("n1", 4, 1);
  auto b = r.agent("n2", 4, 2);
  r.nodes.start();
  for (int i = 0; i < 3; ++i) {
    r.pass(600ms);
    r.nodes.handle_heartbeat(a, protocol::heartbeat{10 + i, {7}, std::nullopt});
    REQUIRE(a->reply(10 + i, 0ms));
  }
  // n2 said nothing for 1.8 s: DOWN, its DOWN stored, its connection closed.
  CHECK(r.state(0) == core::node_state::up);
  CHECK(r.state(1) == core::node_state::down);
  CHECK(b->closed());
  CHECK_FALSE(a->closed());
  CHECK(r.out.store_ops == 1);
  CHECK(r.out.decisions >= 1);
  CHECK(r.jobs.reports.back() == std::pair<std::size_t, std::vector<std::int64_t>>{0, {7}});
  // Stopped: the checks end.
  r.out.is_stopped = true;
  r.pass(2000ms);
  CHECK(r.state(0) == core::node_state::up);
  CHECK(r.clock.pending_timers() == 0);
}

TEST_CASE("an agent that leaves takes its node DOWN at once, after its ok") {
  rig r;
  auto a = r.agent("n1", 4, 1);
  r.nodes.handle_node_leaving(a, protocol::node_leaving{5});
  CHECK(a->reply(5, 0ms));
  CHECK(a->closed());
  CHECK(r.state(0) == core::node_state::down);
  // A heartbeat from a connection that is no agent is told to register.
  auto stranger = std::make_shared<test::fake_connection>(protocol::peer_role::node);
  r.nodes.handle_heartbeat(stranger, protocol::heartbeat{6, {}, std::nullopt});
  const auto err = stranger->reply(6, 0ms);
  REQUIRE(err);
  CHECK(std::get<protocol::error>(*err).code == protocol::error_code::invalid_state);
}

TEST_CASE("messages for an agent that is away wait for it, and only those still wanted are delivered") {
  rig r;
  auto a = r.agent("n1", 4, 1);
  REQUIRE(a->reply(1, 0ms));
  r.nodes.disconnected(*a);
  CHECK(r.nodes.at(0).conn == nullptr);
  r.nodes.send(0, protocol::kill{40, 3, 15, 0});
  CHECK(a->count() == 0);
  auto back = r.agent("n1", 4, 2);
  CHECK(back->reply(2, 0ms));
  CHECK(back->take<protocol::kill>(any_kill, 0ms));
  CHECK(r.state(0) == core::node_state::up);
  r.nodes.disconnected(*back);
  r.nodes.send(0, protocol::kill{41, 3, 15, 0});
  r.jobs.want_queued = false;
  auto again = r.agent("n1", 4, 3);
  CHECK(again->reply(3, 0ms));
  CHECK_FALSE(again->take<protocol::kill>(any_kill, 0ms));
}
