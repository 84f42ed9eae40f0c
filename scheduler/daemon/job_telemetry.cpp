// job_telemetry: bounded per-job series of published values, a token bucket
// per job, and the publish handler.
#include "daemon/job_telemetry.hpp"

#include <algorithm>

#include "daemon/pipeline.hpp"
#include "protocol/errors.hpp"

namespace aqs::daemon {

job_telemetry::job_telemetry(clock& time, std::function<std::optional<std::int32_t>(std::int64_t)> owner,
                             telemetry_limits limits)
    : clock_(time), owner_(std::move(owner)), limits_(limits) {
  limits_.max_series = std::max<std::size_t>(limits_.max_series, 1);
  limits_.max_points = std::max<std::size_t>(limits_.max_points, 1);
  limits_.burst = std::max(limits_.burst, 1.0);
  limits_.rate = std::max(limits_.rate, 0.0);
}

void job_telemetry::on_values(sink s) {
  std::lock_guard lock(mu_);
  sinks_.push_back(std::move(s));
}

job_telemetry::outcome job_telemetry::publish(std::int64_t job, const std::vector<protocol::published_value>& values) {
  // Asked outside our lock: the owner comes from the access view's own.
  const auto uid = owner_(job);
  std::vector<std::pair<std::string, value_point>> kept;
  outcome out;
  std::vector<sink> sinks;
  {
    std::lock_guard lock(mu_);
    auto found = jobs_.find(job);
    if (!uid || (found != jobs_.end() && found->second.ended)) {
      throw protocol::protocol_error(protocol::error_code::invalid_state,
                                     "job " + std::to_string(job) + " is not running: its values are no longer taken");
    }
    const auto now = clock_.now();
    if (found == jobs_.end()) {
      found = jobs_.emplace(job, entry{}).first;
      found->second.tokens = limits_.burst;
      found->second.refilled = now;
    }
    entry& e = found->second;
    e.owner_uid = *uid;
    const double elapsed = std::chrono::duration<double>(now - e.refilled).count();
    if (elapsed > 0) {
      e.tokens = std::min(limits_.burst, e.tokens + elapsed * limits_.rate);
      e.refilled = now;
    }
    const double wall = clock_.wall_seconds();
    for (const auto& v : values) {
      if (e.tokens < 1.0) {
        ++out.dropped;
        continue;
      }
      auto s = e.series.find(v.name);
      if (s == e.series.end()) {
        if (e.series.size() >= limits_.max_series) {
          ++out.dropped;
          continue;
        }
        s = e.series.emplace(v.name, ring{}).first;
      }
      e.tokens -= 1.0;
      // A time the job measured is taken unless it lies in the future (a
      // skewed clock would draw points no one could see yet).
      const double t = v.time_us ? std::min(static_cast<double>(*v.time_us) / 1e6, wall) : wall;
      const value_point p{t, v.value};
      s->second.points.push_back(p);
      ++s->second.total;
      while (s->second.points.size() > limits_.max_points) s->second.points.pop_front();
      kept.emplace_back(v.name, p);
      ++out.accepted;
    }
    e.accepted += out.accepted;
    e.dropped += out.dropped;
    if (!kept.empty()) sinks = sinks_;
  }
  for (const auto& s : sinks) s(job, kept);
  return out;
}

std::optional<job_values> job_telemetry::copy(std::int64_t job, double since, bool newest_only) const {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(job);
  if (it == jobs_.end()) return std::nullopt;
  const entry& e = it->second;
  job_values v;
  v.job_id = job;
  v.owner_uid = e.owner_uid;
  v.ended = e.ended;
  v.accepted = e.accepted;
  v.dropped = e.dropped;
  for (const auto& [name, r] : e.series) {
    value_series s;
    s.name = name;
    s.total = r.total;
    if (newest_only) {
      if (!r.points.empty()) s.points.push_back(r.points.back());
    } else {
      // Points are in arrival order; times may step back a little when a
      // job's clock does: the filter looks at each.
      for (const auto& p : r.points) {
        if (p.time >= since) s.points.push_back(p);
      }
    }
    v.series.push_back(std::move(s));
  }
  return v;
}

std::optional<job_values> job_telemetry::read(std::int64_t job, double since) const { return copy(job, since, false); }

std::optional<job_values> job_telemetry::latest(std::int64_t job) const { return copy(job, 0, true); }

void job_telemetry::ended(std::int64_t job) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.ended) return;
  it->second.ended = true;
  ended_.push_back(job);
  while (ended_.size() > limits_.max_ended_jobs) {
    jobs_.erase(ended_.front());
    ended_.pop_front();
  }
}

void job_telemetry::handle_publish(const std::shared_ptr<connection>& c, const protocol::publish& m) {
  // The hello proved which job the connection speaks for (its uid on the
  // Unix socket, its token over TCP): it publishes for that one only.
  if (c->peer().job_id != m.job_id) {
    return reply_error(c, m.id, protocol::error_code::unauthorized,
                       "this connection speaks for job " + std::to_string(c->peer().job_id.value_or(0)));
  }
  try {
    const outcome o = publish(m.job_id, m.values);
    // Its rate and burst go with the answer, so that the shim drops at the
    // source what aqsd would drop. A job over its rate anyway (frames of
    // its own, not the shim's) is read no faster than k_drain values a
    // second past it: each dropped value holds its connection's reads
    // 1/k_drain s, so a flood costs the flooder a blocked socket, not aqsd
    // the parsing (benchmarks.md, "Published values").
    if (o.dropped > 0) c->hold_reads(std::chrono::microseconds(1'000'000 * o.dropped / k_drain));
    c->send(protocol::ok{m.id,
                         {{"accepted", o.accepted}, {"dropped", o.dropped}, {"rate", limits_.rate}, {"burst", limits_.burst}}});
  } catch (const protocol::protocol_error& e) {
    reply_error(c, m.id, e.code(), e.what());
  }
}

}  // namespace aqs::daemon
