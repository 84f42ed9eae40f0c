// job_telemetry alone: bounded series and points, the per-job rate, ended
// jobs let go oldest first, and the publish handler's rule that a
// connection publishes for its own job only.
#include <doctest/doctest.h>

#include <map>

#include "daemon/job_telemetry.hpp"
#include "fake_connection.hpp"
#include "manual_clock.hpp"

using namespace aqs;
using namespace std::chrono_literals;

namespace {

struct rig {
  test::manual_clock clock;
  std::map<std::int64_t, std::int32_t> live{{7, 1000}, {8, 1001}};
  daemon::job_telemetry t;
  explicit rig(daemon::telemetry_limits l = {})
      : t(clock,
          [this](std::int64_t j) -> std::optional<std::int32_t> {
            auto it = live.find(j);
            if (it == live.end()) return std::nullopt;
            return it->second;
          },
          l) {}
};

std::vector<protocol::published_value> values(const std::string& name, int n, double first = 0) {
  std::vector<protocol::published_value> v;
  for (int i = 0; i < n; ++i) v.push_back({name, first + i, std::nullopt});
  return v;
}

}  // namespace

TEST_CASE("a series keeps its newest points up to the limit and counts every one it took") {
  daemon::telemetry_limits l;
  l.max_points = 5;
  l.burst = 100;
  rig r(l);
  const auto o = r.t.publish(7, values("residual", 12));
  CHECK(o.accepted == 12);
  CHECK(o.dropped == 0);
  const auto v = r.t.read(7);
  REQUIRE(v);
  CHECK(v->owner_uid == 1000);
  REQUIRE(v->series.size() == 1);
  CHECK(v->series[0].name == "residual");
  CHECK(v->series[0].total == 12);
  REQUIRE(v->series[0].points.size() == 5);
  CHECK(v->series[0].points.front().value == 7);
  CHECK(v->series[0].points.back().value == 11);
  const auto last = r.t.latest(7);
  REQUIRE(last);
  REQUIRE(last->series[0].points.size() == 1);
  CHECK(last->series[0].points[0].value == 11);
  CHECK_FALSE(r.t.read(8));  // published nothing
}

TEST_CASE("a job publishing faster than its rate has the excess dropped and counted, and gets tokens back with time") {
  daemon::telemetry_limits l;
  l.rate = 10;
  l.burst = 20;
  rig r(l);
  auto o = r.t.publish(7, values("x", 50));
  CHECK(o.accepted == 20);
  CHECK(o.dropped == 30);
  o = r.t.publish(7, values("x", 5));
  CHECK(o.accepted == 0);
  CHECK(o.dropped == 5);
  r.clock.advance(1000ms);  // ten more
  o = r.t.publish(7, values("x", 50));
  CHECK(o.accepted == 10);
  CHECK(o.dropped == 40);
  // Another job has its own bucket.
  CHECK(r.t.publish(8, values("x", 5)).accepted == 5);
  const auto v = r.t.read(7);
  REQUIRE(v);
  CHECK(v->accepted == 30);
  CHECK(v->dropped == 75);
}

TEST_CASE("names past the series limit are dropped; known names go on") {
  daemon::telemetry_limits l;
  l.max_series = 2;
  rig r(l);
  CHECK(r.t.publish(7, values("a", 1)).accepted == 1);
  CHECK(r.t.publish(7, values("b", 1)).accepted == 1);
  const auto o = r.t.publish(7, values("c", 3));
  CHECK(o.accepted == 0);
  CHECK(o.dropped == 3);
  CHECK(r.t.publish(7, values("a", 2)).accepted == 2);
  CHECK(r.t.read(7)->series.size() == 2);
}

TEST_CASE("a job that is not live takes no values; ended jobs' values are kept for the newest few only") {
  daemon::telemetry_limits l;
  l.max_ended_jobs = 1;
  rig r(l);
  CHECK_THROWS_AS(r.t.publish(9, values("x", 1)), protocol::protocol_error);
  r.t.publish(7, values("x", 1));
  r.t.publish(8, values("x", 1));
  r.t.ended(7);
  CHECK(r.t.read(7));  // still shown
  CHECK_THROWS_AS(r.t.publish(7, values("x", 1)), protocol::protocol_error);
  r.t.ended(8);  // the newest ended job pushes the oldest out
  CHECK_FALSE(r.t.read(7));
  CHECK(r.t.read(8));
  CHECK(r.t.read(8)->ended);
}

TEST_CASE("a time the job measured is kept, one in the future is taken as now, and read filters by time") {
  rig r;
  const double now = r.clock.wall_seconds();
  r.t.publish(7, {{"x", 1, static_cast<std::int64_t>((now - 10) * 1e6)},
                  {"x", 2, static_cast<std::int64_t>((now + 3600) * 1e6)},
                  {"x", 3, std::nullopt}});
  const auto v = r.t.read(7);
  REQUIRE(v);
  const auto& p = v->series[0].points;
  REQUIRE(p.size() == 3);
  CHECK(p[0].time == doctest::Approx(now - 10));
  CHECK(p[1].time == doctest::Approx(now));
  CHECK(p[2].time == doctest::Approx(now));
  CHECK(r.t.read(7, now - 1)->series[0].points.size() == 2);
}

TEST_CASE("sinks see the points kept, not the dropped ones") {
  daemon::telemetry_limits l;
  l.burst = 3;
  l.rate = 0;
  rig r(l);
  std::vector<std::pair<std::string, daemon::value_point>> seen;
  r.t.on_values([&](std::int64_t job, const auto& kept) {
    CHECK(job == 7);
    seen.insert(seen.end(), kept.begin(), kept.end());
  });
  r.t.publish(7, values("x", 5));
  REQUIRE(seen.size() == 3);
  CHECK(seen[2].second.value == 2);
  seen.clear();
  r.t.publish(7, values("x", 5));
  CHECK(seen.empty());
}

TEST_CASE("a connection publishes for the job it speaks for only, and hears what was taken") {
  rig r;
  auto c = std::make_shared<test::fake_connection>(protocol::peer_role::job, 1000);
  c->speak_for(7, true);
  protocol::publish m;
  m.id = 3;
  m.job_id = 8;
  m.values = values("x", 2);
  r.t.handle_publish(c, m);
  auto reply = c->reply(3, std::chrono::milliseconds(100));
  REQUIRE(reply);
  const auto* e = std::get_if<protocol::error>(&*reply);
  REQUIRE(e != nullptr);
  CHECK(e->code == protocol::error_code::unauthorized);
  CHECK_FALSE(r.t.read(8));
  m.job_id = 7;
  m.id = 4;
  r.t.handle_publish(c, m);
  reply = c->reply(4, std::chrono::milliseconds(100));
  REQUIRE(reply);
  const auto* ok = std::get_if<protocol::ok>(&*reply);
  REQUIRE(ok != nullptr);
  CHECK(ok->result["accepted"] == 2);
  CHECK(ok->result["dropped"] == 0);
}
