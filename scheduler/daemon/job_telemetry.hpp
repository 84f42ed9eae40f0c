// job_telemetry: the named values running jobs publish (their shim's
// AQS_Publish, aqs-publish in their scripts) for live charts: per job a
// bounded number of series, each a ring of its newest points, taken at a
// bounded rate. Thread-safe (its own mutex): a publish is handled on the
// session that read it, never on the scheduling strand, so that a job
// flooding values costs aqsd's scheduling nothing but that session's time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/clock.hpp"
#include "daemon_base/dispatcher.hpp"
#include "protocol/messages.hpp"

namespace aqs::daemon {

// The bounds (docs/admin-guide.md, "Published values"). Memory per job is
// at most max_series * max_points points (16 bytes each) plus the names.
struct telemetry_limits {
  std::size_t max_series = 16;      // names one job may publish; a new name past them is dropped
  std::size_t max_points = 2000;    // newest points kept per series
  double rate = 200;                // values a second one job may publish, sustained ...
  double burst = 1000;              // ... and at once (a token bucket)
  std::size_t max_ended_jobs = 256; // ended jobs whose values are still shown (oldest ended go first)
};

struct value_point {
  double time = 0;  // Unix seconds
  double value = 0;
  friend bool operator==(const value_point&, const value_point&) = default;
};

struct value_series {
  std::string name;
  std::vector<value_point> points;  // oldest first: the newest max_points
  std::uint64_t total = 0;          // points ever accepted (the ring may hold fewer)
};

// What a job published, as read.
struct job_values {
  std::int64_t job_id = 0;
  std::int32_t owner_uid = -1;
  bool ended = false;
  std::uint64_t accepted = 0, dropped = 0;  // values taken and dropped (rate or series limit)
  std::vector<value_series> series;         // by name
};

class job_telemetry {
public:
  // `owner(job)`: the uid owning a live job, nullopt when it is not live
  // (access_view::owner): a job that ended takes no new values.
  job_telemetry(clock& time, std::function<std::optional<std::int32_t>(std::int64_t)> owner,
                telemetry_limits limits = {});

  struct outcome {
    std::size_t accepted = 0, dropped = 0;
  };
  // Takes `values` for `job` (checked by the protocol already): each costs
  // one token of the job's bucket; a value without a token, or under a new
  // name past max_series, is dropped and counted. Throws
  // protocol::protocol_error invalid_state when the job is not live.
  outcome publish(std::int64_t job, const std::vector<protocol::published_value>& values);

  // The job's values, points at or after `since` (Unix seconds); nullopt
  // when it has published nothing (or its values were let go).
  std::optional<job_values> read(std::int64_t job, double since = 0) const;
  // Each series' newest point and count only (GET /api/v1/jobs/{id}).
  std::optional<job_values> latest(std::int64_t job) const;

  // The job ended: its values stay readable among the newest
  // max_ended_jobs ended jobs'; none are taken any more.
  void ended(std::int64_t job);

  // Called after every publish that kept values, outside the lock, on the
  // publishing session's thread, with the points kept. Must not block; add
  // before aqsd serves.
  using sink = std::function<void(std::int64_t job, const std::vector<std::pair<std::string, value_point>>& kept)>;
  void on_values(sink s);

  // The protocol handler (role job, runs on the session): the connection
  // must speak for `m.job_id`. Replies ok {accepted, dropped}.
  void handle_publish(const std::shared_ptr<connection>& c, const protocol::publish& m);

  const telemetry_limits& limits() const noexcept { return limits_; }
  // Values a second read past a job's rate (the rest wait in its socket).
  static constexpr std::size_t k_drain = 20'000;

private:
  struct ring {
    std::deque<value_point> points;
    std::uint64_t total = 0;
  };
  struct entry {
    std::int32_t owner_uid = -1;
    bool ended = false;
    double tokens = 0;
    clock::steady::time_point refilled{};
    std::uint64_t accepted = 0, dropped = 0;
    std::map<std::string, ring> series;
  };
  std::optional<job_values> copy(std::int64_t job, double since, bool newest_only) const;

  clock& clock_;
  std::function<std::optional<std::int32_t>(std::int64_t)> owner_;
  telemetry_limits limits_;
  mutable std::mutex mu_;
  std::unordered_map<std::int64_t, entry> jobs_;
  std::deque<std::int64_t> ended_;  // oldest ended first
  std::vector<sink> sinks_;
};

}  // namespace aqs::daemon
