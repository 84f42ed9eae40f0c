// metrics: what aqsd counts and times for /metrics (submissions, resizes and
// their latencies, decision time, store commit latency, jobs ended). The
// controller records, the HTTP front reads a copy. Thread-safe, no I/O.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace aqs::daemon {

// A cumulative histogram over fixed upper bounds (seconds), as OpenMetrics
// wants it: counts[i] observations <= bounds[i], then +Inf = count.
struct histogram {
  std::vector<double> bounds;
  std::vector<std::uint64_t> counts;  // per bucket, not cumulative; one per bound
  std::uint64_t count = 0;
  double sum = 0;

  explicit histogram(std::vector<double> b = {}) : bounds(std::move(b)), counts(bounds.size(), 0) {}
  void observe(double v);
};

struct metrics_snapshot {
  std::uint64_t submissions = 0;
  std::map<std::string, std::uint64_t> resizes;        // outcome (acked, refused, timeout) -> count
  std::map<std::string, std::uint64_t> jobs_ended;     // final state -> count
  std::uint64_t resizes_started = 0;
  histogram resize_latency;                             // map sent -> ack, seconds
  std::map<std::string, histogram> resize_phase;        // the shim's phases: wait, spawn, data, total
  histogram decision_time;                              // one core decision, seconds
  histogram commit_latency;                             // one batch written to the store, seconds
  double started_at = 0;                                // Unix seconds
};

class metrics {
public:
  metrics();
  void submitted();
  void decided(double seconds);
  void committed(double seconds);
  void resize_started();
  // `outcome`: acked, refused, timeout. `seconds`: from the map's sending to
  // its end (acked only, else negative: not observed).
  void resize_ended(const std::string& outcome, double seconds);
  void resize_phase(const std::string& phase, double seconds);
  void job_ended(const std::string& state);
  metrics_snapshot read() const;

private:
  mutable std::mutex mu_;
  metrics_snapshot s_;
};

}  // namespace aqs::daemon
