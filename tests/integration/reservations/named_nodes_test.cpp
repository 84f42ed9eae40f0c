// Jobs on named nodes through a real aqsd (-w/--nodelist, -x/--exclude):
// placed there only, refused in one line when their nodes can never hold
// them, and still bound to them after kill -9 of aqsd.
#include <doctest/doctest.h>

#include <thread>

#include "aqs_cluster.hpp"
#include "node_procs.hpp"
#include "test_pg.hpp"

using namespace aqs;
using namespace std::chrono_literals;
using core::job_state;
using test::bin;


TEST_CASE("-w and -x place a job on its named nodes only; impossible lists are refused; the binding survives kill -9") {
  test::test_database db;
  test::cluster::options o;
  o.db = db.conninfo();
  o.nodes = 2;
  o.procs_per_node = 2;
  test::cluster c(o);
  c.wait_nodes_up(2);
  const auto node1 = test::node_procs(c, "node1");
  REQUIRE(node1.size() == 2);
  const auto on_node1 = [&](const std::string& map) { return test::count_on(map, node1); };

  const std::int64_t on1 = c.submit({"-w", "node1", "-n", "2", "-o", "/dev/null", "--wrap", "sleep 600"});
  auto j = c.wait_state(on1, {job_state::running});
  CHECK(on_node1(j.procs) == 2);
  const std::int64_t not1 = c.submit({"-x", "node1", "-n", "1", "-o", "/dev/null", "--wrap", "sleep 600"});
  j = c.wait_state(not1, {job_state::running});
  CHECK(on_node1(j.procs) == 0);

  auto r = c.cmd(bin().fsub, {"-w", "node9", "--wrap", "true"});
  CHECK(r.status != 0);
  CHECK(r.err.find("Invalid node name specified: node9") != std::string::npos);
  r = c.cmd(bin().fsub, {"-w", "node1", "-n", "4", "--wrap", "true"});
  CHECK(r.status != 0);
  CHECK(r.err.find("the nodes it may use have 2") != std::string::npos);
  r = c.cmd(bin().fsub, {"-x", "node[0-1]", "--wrap", "true"});
  CHECK(r.status != 0);
  r = c.cmd(bin().fsub, {"-w", "node[1-", "--wrap", "true"});
  CHECK(r.status != 0);
  CHECK(r.err.find("not a host list") != std::string::npos);

  // Waits for node1 although node0 has a free processor, across a restart.
  const std::int64_t waits = c.submit({"-w", "node1", "-n", "1", "-o", "/dev/null", "--wrap", "sleep 600"});
  std::this_thread::sleep_for(2s);
  CHECK(c.job(waits)->state == job_state::pending);
  c.kill_aqsd();
  c.start_aqsd();
  c.wait_nodes_up(2);
  std::this_thread::sleep_for(2s);
  CHECK(c.job(waits)->state == job_state::pending);
  c.cmd(bin().fkill, {std::to_string(on1)});
  j = c.wait_state(waits, {job_state::running}, 60s);
  CHECK(on_node1(j.procs) == 1);
  c.cmd(bin().fkill, {std::to_string(not1), std::to_string(waits)});
  c.wait_idle();
}
