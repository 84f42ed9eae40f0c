// aqsd's one routing table against the protocol: every message a role may
// send is routed for exactly that role, nothing else is, and the rules
// beyond the role are declared where the table says.
#include <doctest/doctest.h>

#include <utility>

#include "daemon/controller.hpp"
#include "daemon_base/permissions.hpp"

using namespace aqs;
using daemon::controller;

namespace {

template <std::size_t... I>
std::vector<protocol::message> every_message(std::index_sequence<I...>) {
  return {protocol::message(std::in_place_index<I>)...};
}

std::vector<protocol::message> every_message() {
  return every_message(std::make_index_sequence<std::variant_size_v<protocol::message>>{});
}

}  // namespace

TEST_CASE("each message aqsd takes is routed for exactly the roles the protocol lets send it") {
  const auto& routes = controller::routes();
  std::size_t routed = 0;
  for (const protocol::message& m : every_message()) {
    const auto& r = routes.of(m);
    CAPTURE(protocol::type_of(m));
    if (std::holds_alternative<protocol::hello>(m)) {
      CHECK_FALSE(r.accepted());  // the handshake's, never a handler's
      continue;
    }
    for (auto role : {protocol::peer_role::client, protocol::peer_role::node, protocol::peer_role::job}) {
      CAPTURE(protocol::to_string(role));
      CHECK(r.allows(role) == protocol::may_send(role, m));
    }
    const bool anyone = protocol::may_send(protocol::peer_role::client, m) ||
                        protocol::may_send(protocol::peer_role::node, m) ||
                        protocol::may_send(protocol::peer_role::job, m);
    CHECK(r.accepted() == anyone);
    if (r.accepted()) {
      ++routed;
      CHECK(r.type == protocol::type_of(m));
    }
  }
  CHECK(routed == 26);  // accounts (issue 32) is the 24th, reservations the 25th, publish (issue 35) the 26th
}

TEST_CASE("shutting aqsd down and tokens carry their rule in the table") {
  const auto& routes = controller::routes();
  const auto& shutdown = routes.of(protocol::shutdown{});
  CHECK((shutdown.gate == &daemon::is_admin));
  CHECK(shutdown.where == daemon::runs_on::session);
  CHECK((routes.of(protocol::issue_token{}).gate == &daemon::may_get_token));
  CHECK((routes.of(protocol::revoke_token{}).gate == &daemon::may_get_token));
  // Everything that touches the scheduling state runs on the strand.
  CHECK(routes.of(protocol::heartbeat{}).where == daemon::runs_on::strand);
  CHECK(routes.of(protocol::resize_ack{}).where == daemon::runs_on::strand);
  CHECK((routes.of(protocol::submit{}).gate == nullptr));
  // A job's published values never reach the strand: a flooding job must
  // not slow the scheduling (job_telemetry has its own lock).
  CHECK(routes.of(protocol::publish{}).where == daemon::runs_on::session);
}

TEST_CASE("a message type declared twice is refused") {
  daemon::routing_table<int> t;
  auto nothing = [](int&, const std::shared_ptr<daemon::connection>&, const protocol::cancel&) {};
  t.add<protocol::cancel>({protocol::peer_role::client}, daemon::runs_on::strand, nothing);
  CHECK_THROWS_AS(t.add<protocol::cancel>({protocol::peer_role::client}, daemon::runs_on::strand, nothing),
                  std::logic_error);
}
