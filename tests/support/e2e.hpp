// e2e: what an end-to-end test file starts from, written once: the cluster
// harness, the throwaway database, reading files, a poll helper, the options
// of the cluster shapes the tests use, and the names they use unqualified.
// Test code only: it brings names into the global namespace on purpose.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "aqs_cluster.hpp"
#include "file_text.hpp"
#include "test_pg.hpp"

namespace aqs::test {

// Polls `pred` every 50 ms until it holds or `limit` has passed; whether it
// held (asked once more at the end, so a slow machine gets a last look).
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

// Whether namespace hosts (testbed::netns_hosts) can be made here: they need
// root and `ip netns`. When not, the test says it is skipped.
inline bool netns_available() {
  if (testbed::netns_hosts::available()) return true;
  MESSAGE("skipped: needs root and ip netns");
  return false;
}

// A cluster of `nodes` virtual nodes of `procs` processors each, on aqsd's
// private PostgreSQL (initdb at its first start: a few seconds).
inline cluster::options nodes_of(int nodes, int procs) {
  cluster::options o;
  o.nodes = nodes;
  o.procs_per_node = procs;
  return o;
}

// The same on the test database, with `agent_args` for every agent.
inline cluster::options nodes_of(const test_database& db, int nodes, int procs,
                                 std::vector<std::string> agent_args = {}) {
  cluster::options o = nodes_of(nodes, procs);
  o.db = db.conninfo();
  o.agent_args = std::move(agent_args);
  return o;
}

}  // namespace aqs::test

namespace fs = std::filesystem;
using namespace aqs;
using namespace std::chrono_literals;
using aqs::core::job_state;
using aqs::test::bin;
using aqs::test::eventually;
using aqs::test::slurp;
using aqs::test::write_file;
