// metrics: counters and histograms under one mutex.
#include "daemon/metrics.hpp"

#include <chrono>

namespace aqs::daemon {

namespace {
// Latencies from a millisecond to a minute: decisions and commits are
// milliseconds, resizes that spawn ranks seconds.
std::vector<double> latency_bounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}
}  // namespace

void histogram::observe(double v) {
  ++count;
  sum += v;
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (v <= bounds[i]) {
      ++counts[i];
      return;
    }
  }
}

metrics::metrics() {
  s_.resize_latency = histogram(latency_bounds());
  s_.decision_time = histogram(latency_bounds());
  s_.commit_latency = histogram(latency_bounds());
  for (const char* p : {"wait", "spawn", "data", "total"}) s_.resize_phase.emplace(p, histogram(latency_bounds()));
  for (const char* o : {"acked", "refused", "timeout", "abandoned", "killed"}) s_.resizes.emplace(o, 0);
  s_.started_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void metrics::submitted() {
  std::lock_guard lock(mu_);
  ++s_.submissions;
}

void metrics::decided(double seconds) {
  std::lock_guard lock(mu_);
  s_.decision_time.observe(seconds);
}

void metrics::committed(double seconds) {
  std::lock_guard lock(mu_);
  s_.commit_latency.observe(seconds);
}

void metrics::resize_started() {
  std::lock_guard lock(mu_);
  ++s_.resizes_started;
}

void metrics::resize_ended(const std::string& outcome, double seconds) {
  std::lock_guard lock(mu_);
  ++s_.resizes[outcome];
  if (seconds >= 0) s_.resize_latency.observe(seconds);
}

void metrics::resize_phase(const std::string& phase, double seconds) {
  std::lock_guard lock(mu_);
  auto it = s_.resize_phase.find(phase);
  if (it != s_.resize_phase.end()) it->second.observe(seconds);
}

void metrics::job_ended(const std::string& state) {
  std::lock_guard lock(mu_);
  ++s_.jobs_ended[state];
}

metrics_snapshot metrics::read() const {
  std::lock_guard lock(mu_);
  return s_;
}

}  // namespace aqs::daemon
