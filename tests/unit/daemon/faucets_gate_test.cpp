// The Faucets gate alone, on a real write pipeline's strand (in-memory
// store, no uplink, no sockets): jobs a Faucets server placed here wait
// behind the closed gate, leave the queue while the server is away, run
// again when the server lists or releases them; other jobs never wait.
#include <doctest/doctest.h>

#include "core/strategy.hpp"
#include "daemon/faucets_gate.hpp"
#include "strand_rig.hpp"

using namespace aqs;
using core::job_state;

namespace {

struct rig : test::strand_rig {
  core::scheduler core{core::cluster{}, core::make_strategy("fcfs")};
  daemon::job_table jobs;
  daemon::access_view view;
  std::vector<std::int64_t> admitted;
  daemon::faucets_gate gate;

  explicit rig(bool open) : gate(open, core, jobs, view, pipe, [this](std::int64_t id) { admitted.push_back(id); }) {}

  // A live job, in the core too unless `in_core` is false.
  void job(std::int64_t id, bool faucets, bool in_core = true, std::string control = "") {
    daemon::job_entry e;
    e.faucets = faucets;
    e.submit_token = faucets ? "faucets:c1:" + std::to_string(id) + ".1" : "";
    e.control = std::move(control);
    e.req.id = static_cast<core::job_id>(id);
    REQUIRE(jobs.add(id, e));
    if (in_core) core.apply(core::event::arrival(e.req));
  }
  bool held(std::int64_t id) const { return core.get(static_cast<core::job_id>(id)).held; }
  std::string reason(std::int64_t id) const {
    const auto r = view.reasons();
    const auto it = r.held.find(id);
    return it == r.held.end() ? "" : it->second;
  }
};

}  // namespace

TEST_CASE("faucets_gate: without an uplink the gate is open and admits every job") {
  rig r(true);
  r.job(1, true, false);
  bool admits = false;
  r.on_strand([&] { admits = r.gate.admits(1); });
  CHECK(admits);
  CHECK(r.reason(1).empty());
  CHECK_FALSE(r.gate.checks_starts());
}

TEST_CASE("faucets_gate: after a restart a server's job waits until the server lists it; then it is admitted") {
  rig r(false);
  r.job(1, true, false);
  r.job(2, true, false);
  bool admits = true;
  r.on_strand([&] { admits = r.gate.admits(1); });
  CHECK_FALSE(admits);
  CHECK(r.reason(1) == "FaucetsSync");
  r.on_strand([&] { r.gate.admits(2); });

  std::optional<std::vector<daemon::faucets_copy>> rest;
  r.gate.follow({1}, [&](std::vector<daemon::faucets_copy> others) { rest = std::move(others); });
  r.io.poll();
  CHECK(r.admitted == std::vector<std::int64_t>{1});
  CHECK(r.reason(1).empty());
  // Job 2 is not the server's placement: reported, still waiting.
  REQUIRE(rest);
  REQUIRE(rest->size() == 1);
  CHECK((*rest)[0].job_id == 2);
  CHECK((*rest)[0].waiting);
  CHECK((*rest)[0].submit_token == "faucets:c1:2.1");
  CHECK(r.reason(2) == "FaucetsSync");
  // The gate is open now: a new job of the server's is admitted at once.
  r.job(3, true, false);
  r.on_strand([&] { admits = r.gate.admits(3); });
  CHECK(admits);
  // The server releases job 2.
  r.gate.release(2);
  r.io.poll();
  CHECK(r.admitted == std::vector<std::int64_t>{1, 2});
  CHECK(r.reason(2).empty());
  // Releasing again is nothing.
  r.gate.release(2);
  r.io.poll();
  CHECK(r.admitted.size() == 2);
}

TEST_CASE("faucets_gate: closing holds only the server's pending jobs that nobody else holds") {
  rig r(true);
  r.job(1, true);                   // the server's, pending: held
  r.job(2, false);                  // a local job: never
  r.job(3, true, true, "held-user");  // held by its user already: left alone
  r.gate.close();
  r.io.poll();
  CHECK(r.held(1));
  CHECK(r.reason(1) == "FaucetsSync");
  CHECK_FALSE(r.held(2));
  CHECK(r.reason(2).empty());
  CHECK_FALSE(r.held(3));
  CHECK(r.reason(3).empty());
  // New jobs of the server's wait now.
  r.job(4, true, false);
  bool admits = true;
  r.on_strand([&] { admits = r.gate.admits(4); });
  CHECK_FALSE(admits);

  // The server is back and lists job 1 and 4: released in the core, 4 admitted,
  // and the core decides again.
  const auto before = r.decisions;
  std::vector<daemon::faucets_copy> rest;
  r.gate.follow({1, 4}, [&](std::vector<daemon::faucets_copy> others) { rest = std::move(others); });
  r.io.poll();
  CHECK_FALSE(r.held(1));
  CHECK(r.reason(1).empty());
  CHECK(r.admitted == std::vector<std::int64_t>{4});
  CHECK(r.decisions == before + 1);
  // Job 3 is the server's but not listed: reported, not waiting behind the gate.
  REQUIRE(rest.size() == 1);
  CHECK(rest[0].job_id == 3);
  CHECK_FALSE(rest[0].waiting);
  CHECK(rest[0].state == job_state::pending);
}

TEST_CASE("faucets_gate: a job whose start the server refused goes back behind the gate until released") {
  rig r(true);
  r.job(5, true);
  r.on_strand([&] { r.gate.hold_back(5); });
  CHECK(r.held(5));
  CHECK(r.reason(5) == "FaucetsSync");
  r.gate.release(5);
  r.io.poll();
  CHECK_FALSE(r.held(5));
  CHECK(r.reason(5).empty());
  CHECK(r.admitted.empty());  // the core held it: released there, not admitted again
}

TEST_CASE("faucets_gate: the start check set is the one asked") {
  rig r(true);
  std::vector<std::pair<std::int64_t, std::string>> asked;
  r.gate.on_start([&](std::int64_t id, const std::string& token, std::function<void(bool)> done) {
    asked.emplace_back(id, token);
    done(true);
  });
  CHECK(r.gate.checks_starts());
  bool ok = false;
  r.gate.check_start(7, "faucets:c1:7.1", [&](bool yes) { ok = yes; });
  CHECK(ok);
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].first == 7);
}
