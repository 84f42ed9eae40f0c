// The resize part alone (resize_manager) with the real nodes part and the
// core, a recording pipeline and a fake jobs' side, in virtual time: a map
// sent to the job's shim after the commit; acknowledged (the job runs on the
// new map), refused or timed out (it keeps the old one); claimed (stored,
// then the longer claim timeout, then killed); an expand abandoned after its
// claim, and growth stopped after three; an --adaptive job without a shim
// made rigid. Only the job's own shim, for the current map, is heard.
#include <doctest/doctest.h>

#include "daemon/resize_manager.hpp"
#include "node_rig.hpp"

using namespace aqs;
using namespace std::chrono_literals;
using core::job_state;

namespace {

constexpr std::int64_t k_job = 5;

struct fake_resize_jobs final : daemon::resize_jobs {
  std::set<std::int64_t> live{k_job};
  std::vector<std::pair<std::int64_t, std::string>> killed;
  bool is_live(std::int64_t job) const override { return live.contains(job); }
  void kill_uncertain(std::int64_t job, std::string reason) override { killed.emplace_back(job, std::move(reason)); }
};

struct rig : test::node_rig {
  fake_resize_jobs jobs;
  daemon::metrics stats;
  daemon::resize_manager resize{core, clock, io.get_executor(), out, jobs, nodes, stats,
                                daemon::resize_timeouts{1000ms, 5000ms}};
  std::shared_ptr<test::fake_connection> n1, n2, shim;

  rig() {
    n1 = agent("n1", 2);
    n2 = agent("n2", 2);
    // An adaptive job [1, 4] running on n1.
    running(k_job, procs({0, 1}), 1, 4, true);
    shim = std::make_shared<test::fake_connection>(protocol::peer_role::job);
    shim->speak_for(k_job, false);
  }
  void pass(std::chrono::milliseconds d) {
    for (auto step = 100ms; d > 0ms; d -= step) {
      clock.advance(std::min(step, d));
      io.poll();
      io.restart();
    }
  }
  // The core decided to resize the job to `to`; the part begins it.
  std::optional<protocol::new_map> resize_to(const core::processor_set& to) {
    core.restore_resize(k_job, to);
    resize.begin(k_job, to);
    return shim->take<protocol::new_map>([](const protocol::new_map&) { return true; }, 0ms);
  }
  std::optional<protocol::message> ack(const std::shared_ptr<test::fake_connection>& c, std::int64_t rid,
                                       std::int64_t epoch, std::string procs) {
    protocol::resize_ack m;
    m.id = rid;
    m.job_id = k_job;
    m.epoch = epoch;
    m.procs = std::move(procs);
    resize.handle_resize_ack(c, m);
    return c->reply(rid, 0ms);
  }
  std::optional<protocol::message> claim(std::int64_t rid, std::int64_t epoch) {
    resize.handle_resize_begin(shim, protocol::resize_begin{rid, k_job, epoch});
    return shim->reply(rid, 0ms);
  }
  std::optional<protocol::message> refuse(std::int64_t rid, std::int64_t epoch) {
    resize.handle_resize_refused(shim, protocol::resize_refused{rid, k_job, epoch, "spawn failed"});
    return shim->reply(rid, 0ms);
  }
  const core::job& job() const { return core.get(k_job); }
  const test::recording_pipeline::moved& last() const {
    REQUIRE_FALSE(out.transitions.empty());
    return out.transitions.back();
  }
};

using test::code_of;
using test::is_ok;

}  // namespace

TEST_CASE("resize_manager: the map goes to the shim after the commit; its ack moves the job onto it") {
  rig r;
  r.resize.attach_shim(k_job, r.shim, 0);
  auto map = r.resize_to(r.procs({0, 1, 2, 3}));
  REQUIRE(map);
  CHECK(map->epoch == 1);
  CHECK(map->procs == "1111");
  CHECK(map->proc_hosts.size() == 4);
  REQUIRE(r.out.transitions.size() == 1);
  CHECK(r.out.transitions[0].to == job_state::resizing);
  CHECK(r.stats.read().resizes_started == 1);
  CHECK(r.resize.epoch(k_job) == 1);

  CHECK(is_ok(r.ack(r.shim, 10, 1, "1111")));
  CHECK(r.job().state == job_state::running);
  CHECK(r.job().procs.to_string() == "1111");
  CHECK(r.last().to == job_state::running);
  CHECK(r.last().reason.starts_with("resize acknowledged: map 1"));
  CHECK(r.stats.read().resizes.at("acked") == 1);
  // Its timeout was disarmed: nothing more happens.
  const auto n = r.out.transitions.size();
  r.pass(3000ms);
  CHECK(r.out.transitions.size() == n);
  CHECK(r.stats.read().resizes.at("timeout") == 0);
}

TEST_CASE("resize_manager: only the job's own shim, for the current map and with the map sent, is heard") {
  rig r;
  r.resize.attach_shim(k_job, r.shim, 0);
  REQUIRE(r.resize_to(r.procs({0, 1, 2, 3})));
  auto other = std::make_shared<test::fake_connection>(protocol::peer_role::job);
  other->speak_for(99, false);
  CHECK(code_of(r.ack(other, 1, 1, "1111")) == protocol::error_code::unauthorized);
  CHECK(code_of(r.ack(r.shim, 2, 7, "1111")) == protocol::error_code::invalid_state);
  CHECK(code_of(r.ack(r.shim, 3, 1, "1110")) == protocol::error_code::bad_request);
  CHECK(r.job().state == job_state::resizing);
  r.resize.handle_resize_begin(other, protocol::resize_begin{4, k_job, 1});
  CHECK(code_of(other->reply(4, 0ms)) == protocol::error_code::unauthorized);
  // The job that is not live any more: no map is current.
  r.jobs.live.clear();
  CHECK(code_of(r.ack(r.shim, 5, 1, "1111")) == protocol::error_code::invalid_state);
}

TEST_CASE("resize_manager: a map not applied in time is withdrawn: the job keeps its processors") {
  rig r;
  r.resize.attach_shim(k_job, r.shim, 0);
  REQUIRE(r.resize_to(r.procs({0, 1, 2, 3})));
  r.pass(900ms);
  CHECK(r.job().state == job_state::resizing);
  r.pass(200ms);
  CHECK(r.job().state == job_state::running);
  CHECK(r.job().procs.to_string() == "1100");
  CHECK(r.last().to == job_state::running);
  CHECK(r.last().reason == "resize timed out: keeps its processors");
  CHECK(r.stats.read().resizes.at("timeout") == 1);
  CHECK(r.out.decisions >= 1);
  // A late ack is for a map that is no longer current.
  CHECK(code_of(r.ack(r.shim, 1, 1, "1111")) == protocol::error_code::invalid_state);
  // The next map is numbered after it.
  auto again = r.resize_to(r.procs({0, 1, 2}));
  REQUIRE(again);
  CHECK(again->epoch == 2);
}

TEST_CASE("resize_manager: a claimed map is stored, waits for the longer claim timeout, then the job is killed") {
  rig r;
  r.resize.attach_shim(k_job, r.shim, 0);
  REQUIRE(r.resize_to(r.procs({0, 1, 2, 3})));
  CHECK(is_ok(r.claim(1, 1)));
  REQUIRE(r.out.updates.size() == 1);
  CHECK(r.out.updates[0].control == store::claim_control(1));
  // Asked again: granted again, nothing stored twice.
  CHECK(is_ok(r.claim(2, 1)));
  CHECK(r.out.updates.size() == 1);
  // Past the resize timeout: still RESIZING (its ranks may be on either map).
  r.pass(2000ms);
  CHECK(r.job().state == job_state::resizing);
  CHECK(r.jobs.killed.empty());
  r.pass(3100ms);
  REQUIRE(r.jobs.killed.size() == 1);
  CHECK(r.jobs.killed[0].first == k_job);
  CHECK(r.jobs.killed[0].second.find("claimed but not acknowledged") != std::string::npos);
  CHECK(r.stats.read().resizes.at("killed") == 1);
}

TEST_CASE("resize_manager: a claimed map acknowledged in time is no kill") {
  rig r;
  r.resize.attach_shim(k_job, r.shim, 0);
  REQUIRE(r.resize_to(r.procs({0, 1, 2, 3})));
  CHECK(is_ok(r.claim(1, 1)));
  r.pass(2000ms);
  CHECK(is_ok(r.ack(r.shim, 2, 1, "1111")));
  r.pass(6000ms);
  CHECK(r.jobs.killed.empty());
  CHECK(r.job().procs.count() == 4);
}

TEST_CASE("resize_manager: a refused map is withdrawn; an expand abandoned after its claim three times stops growth") {
  rig r;
  r.resize.attach_shim(k_job, r.shim, 0);
  // Refused before any claim: "refused".
  auto map = r.resize_to(r.procs({0, 1, 2, 3}));
  REQUIRE(map);
  CHECK(is_ok(r.refuse(1, map->epoch)));
  CHECK(r.job().state == job_state::running);
  CHECK(r.job().procs.to_string() == "1100");
  CHECK(r.stats.read().resizes.at("refused") == 1);
  CHECK(r.out.updates.empty());
  // Claimed, then given up: "abandoned"; the third in a row lowers the maximum.
  for (int i = 0; i < 3; ++i) {
    map = r.resize_to(r.procs({0, 1, 2, 3}));
    REQUIRE(map);
    CHECK(is_ok(r.claim(10 + i, map->epoch)));
    CHECK(is_ok(r.refuse(20 + i, map->epoch)));
    CHECK(r.job().procs.to_string() == "1100");
  }
  CHECK(r.stats.read().resizes.at("abandoned") == 3);
  const auto& limited = r.out.updates.back();
  CHECK(limited.max_pe == 2);
  CHECK(limited.reason.starts_with("growth stopped after 3 abandoned expands"));
  CHECK(r.job().req.max_pe == 2);
}

TEST_CASE("resize_manager: an --adaptive job whose shim never came is made rigid, and adaptive again when it comes") {
  rig r;
  r.pass(std::chrono::duration_cast<std::chrono::milliseconds>(daemon::k_no_shim_grace) + 1000ms);
  r.core.restore_resize(k_job, r.procs({0, 1, 2, 3}));
  r.resize.begin(k_job, r.procs({0, 1, 2, 3}));
  CHECK(r.out.transitions.empty());  // nothing stored RESIZING
  CHECK(r.job().state == job_state::running);
  CHECK(r.job().procs.to_string() == "1100");
  REQUIRE(r.out.updates.size() == 1);
  CHECK(r.out.updates[0].min_pe == 2);
  CHECK(r.out.updates[0].max_pe == 2);
  CHECK(r.out.updates[0].reason.find("no runtime shim connected") != std::string::npos);
  // The shim comes after all: its range is back.
  r.resize.attach_shim(k_job, r.shim, 0);
  REQUIRE(r.out.updates.size() == 2);
  CHECK(r.out.updates[1].min_pe == 1);
  CHECK(r.out.updates[1].max_pe == 4);
  CHECK(r.job().req.max_pe == 4);
}

TEST_CASE("resize_manager: a shim back after aqsd's restart, having seen map 7, is sent maps numbered above it") {
  rig r;
  // aqsd restarted: the job's maps went up to 5 before, its shim says it saw 7.
  r.resize.raise_epoch(k_job, 5);
  r.resize.attach_shim(k_job, r.shim, 7);
  CHECK(r.resize.epoch(k_job) == 7);
  auto map = r.resize_to(r.procs({0, 1, 2}));
  REQUIRE(map);
  CHECK(map->epoch == 8);
  CHECK(is_ok(r.ack(r.shim, 1, 8, "1110")));
  CHECK(r.job().procs.count() == 3);
  // A map under way when the shim comes back is sent to it again.
  auto again = r.resize_to(r.procs({0, 1}));
  REQUIRE(again);
  auto shim2 = std::make_shared<test::fake_connection>(protocol::peer_role::job);
  shim2->speak_for(k_job, false);
  r.resize.detach_shim(k_job, *r.shim);
  r.resize.attach_shim(k_job, shim2, again->epoch);
  auto resent = shim2->take<protocol::new_map>([](const protocol::new_map&) { return true; }, 0ms);
  REQUIRE(resent);
  CHECK(resent->procs == "1100");
}
