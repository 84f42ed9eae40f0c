// The daemon's record conversions: iso8601 against the C library's own
// formatting over five centuries, either side of the epoch.
#include <doctest/doctest.h>

#include <cstdint>
#include <ctime>
#include <random>
#include <string>

#include "daemon/job_records.hpp"

using namespace aqs;

namespace {

std::string reference(std::int64_t us) {
  std::int64_t secs = us / 1'000'000, rem = us % 1'000'000;
  if (rem < 0) {
    rem += 1'000'000;
    --secs;
  }
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char ms[8];
  std::snprintf(ms, sizeof ms, ".%03dZ", static_cast<int>(rem / 1000));
  return std::string(buf) + ms;
}

store::time_point at(std::int64_t us) { return store::time_point{std::chrono::microseconds{us}}; }

}  // namespace

TEST_CASE("iso8601 writes UTC with milliseconds exactly as gmtime and strftime do") {
  CHECK(daemon::iso8601(at(0)) == "1970-01-01T00:00:00.000Z");
  CHECK(daemon::iso8601(at(-1)) == "1969-12-31T23:59:59.999Z");
  CHECK(daemon::iso8601(at(951'782'400'000'000)) == "2000-02-29T00:00:00.000Z");  // a leap day of a 400-year
  CHECK(daemon::iso8601(at(1'795'000'000'123'456)) == reference(1'795'000'000'123'456));
  std::mt19937_64 rng(42);
  // 1600 to 2400, and every day boundary and month end near today.
  std::uniform_int_distribution<std::int64_t> span(-11'676'096'000'000'000, 13'569'465'600'000'000);
  for (int i = 0; i < 200'000; ++i) {
    const std::int64_t us = span(rng);
    REQUIRE_MESSAGE(daemon::iso8601(at(us)) == reference(us), "at " << us << " us");
  }
  for (std::int64_t day = 20'000; day < 21'500; ++day) {
    for (std::int64_t us : {day * 86'400'000'000 - 1, day * 86'400'000'000}) {
      REQUIRE_MESSAGE(daemon::iso8601(at(us)) == reference(us), "at " << us << " us");
    }
  }
}

TEST_CASE("an adaptive job's preferred size, speedup model and resize cost reach the core request, also after a restart") {
  protocol::job_spec s;
  s.name = "a";
  s.argv = {"x"};
  s.workdir = "/";
  s.adaptive = true;
  s.min_pe = 2;
  s.max_pe = 16;
  s.geometry = protocol::job_geometry{};
  s.geometry->pref_pe = 8;
  s.geometry->speedup = "amdahl:0.9";
  s.geometry->resize_cost_s = 12;
  const core::job_request r = daemon::to_core_request(7, s, "alice", 100);
  CHECK(r.pref_pe == 8);
  CHECK(r.speedup.what == core::speedup_model::kind::amdahl);
  CHECK(r.resize_cost == doctest::Approx(12));
  store::job_summary sum;
  sum.id = 7;
  sum.adaptive = true;
  sum.min_pe = 2;
  sum.max_pe = 16;
  sum.geometry = protocol::geometry_json(*s.geometry);
  const core::job_request back = daemon::to_core_request(sum);
  CHECK(back.pref_pe == 8);
  CHECK(back.resize_cost == doctest::Approx(12));
  // A rigid job keeps none of it.
  s.adaptive = false;
  s.min_pe = s.max_pe = 4;
  CHECK(daemon::to_core_request(7, s, "alice", 100).pref_pe == 0);
}
