// Which thread the controller's handlers run on, from its routing table: a
// handler declared runs_on::session runs on the connection's own strand,
// concurrently with the scheduling strand (aqsd runs its io_context on
// several threads, server.cpp gives each connection a strand of its own),
// so it must not touch what only the scheduling strand may (routing.hpp:
// "it answers without the scheduling state, or posts what needs it").
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>

#include "daemon/controller.hpp"
#include "fake_connection.hpp"
#include "manual_clock.hpp"
#include "store/memory_job_store.hpp"

using namespace aqs;
using namespace std::chrono_literals;

// `control` (fctl hold/release/suspend/resume/requeue/update and a job's own
// range request) reads and changes the job table, applies core events and
// queues into the pipeline's batch: it must run on the scheduling strand.
// (It was routed runs_on::session: a data race with the strand, which
// ThreadSanitizer showed; these tests failed then.)
TEST_CASE("control, which changes the scheduling state, is routed to the scheduling strand") {
  CHECK(daemon::controller::routes().of(protocol::control{}).where == daemon::runs_on::strand);
}

// The same seen from outside: with the io_context not running (the
// scheduling strand idle), a control request must not be answered from the
// job table yet.
TEST_CASE("a control request is not worked on before the scheduling strand runs it") {
  boost::asio::io_context io;
  store::memory_job_store store;
  test::manual_clock clock;
  daemon::controller ctl(io, store, daemon::controller_options{}, [] {}, clock);
  auto c = std::make_shared<test::fake_connection>(protocol::peer_role::client, 1000);
  ctl.on_open(c);
  protocol::control m;
  m.id = 7;
  m.action = "hold";
  m.job_ids = {42};
  ctl.on_message(c, m);
  CHECK(c->count() == 0);  // nothing read from the strand's table on this thread
  io.poll();
  auto reply = c->reply(7, 0ms);
  REQUIRE(reply);
  CHECK(std::get<protocol::error>(*reply).code == protocol::error_code::not_found);
  ctl.stop();
}
