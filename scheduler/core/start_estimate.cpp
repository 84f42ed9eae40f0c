// start_estimate: a what-if run of the scheduler, completing running jobs at their estimated ends.
#include "core/start_estimate.hpp"

#include <algorithm>
#include <limits>
#include <vector>

namespace aqs::core {

namespace {

// Acknowledges every resize under way (those of the real cluster, at the start).
void ack_all_resizes(scheduler& c) {
  std::vector<job_id> resizing;
  for (const auto& [end, id] : c.holding_by_end()) {
    if (c.get(id).state == job_state::resizing) resizing.push_back(id);
  }
  for (job_id id : resizing) c.apply(event::on_job(event::kind::resize_ack, id));
}

// Acknowledges the resizes these decisions began (resizes, and resumes of
// adaptive jobs, which apply their new map as a resize); true if there was any.
bool ack_resizes(scheduler& c, const std::vector<decision>& decisions) {
  bool any = false;
  for (const decision& d : decisions) {
    if (d.what != decision::kind::resize && d.what != decision::kind::resume) continue;
    if (c.get(d.job).state != job_state::resizing) continue;
    c.apply(event::on_job(event::kind::resize_ack, d.job));
    any = true;
  }
  return any;
}

// An id no job of `s` has, after every real one in the queue order's last tie-break.
job_id unused_id(const scheduler& s) {
  job_id id = std::numeric_limits<job_id>::max();
  while (s.find(id) != nullptr) --id;
  return id;
}

}  // namespace

std::optional<double> estimate_start(const scheduler& s, const job_request& r, double now) {
  if (r.min_pe == 0 || r.max_pe < r.min_pe) return std::nullopt;
  if (s.never_fits(r)) return std::nullopt;
  scheduler c = s.snapshot();
  job_request q = r;
  q.id = unused_id(s);
  q.submit_time = now;
  if (!q.adaptive) q.max_pe = q.min_pe;
  ack_all_resizes(c);
  c.apply(event::arrival(q));
  // A strategy may shrink and then grow again at one instant once shrinks
  // are acknowledged; a few rounds settle it (each one frees or places
  // processors), the bound only guards against a strategy that never does.
  constexpr int rounds_per_instant = 4;
  double t = now;
  std::vector<job_id> ending;
  while (true) {
    for (int round = 0; round < rounds_per_instant; ++round) {
      const auto decisions = c.decide(t);
      const bool acked = ack_resizes(c, decisions);
      if (c.get(q.id).state != job_state::pending) return t - now;
      if (!acked) break;
    }
    const auto& by_end = c.holding_by_end();
    if (by_end.empty()) return std::nullopt;  // nothing left to end: it waits for what we cannot see
    // Every job ending at the next end time (ends in the past count as now).
    const double next = std::max(t, by_end.begin()->first);
    ending.clear();
    for (const auto& [end, id] : by_end) {
      if (std::max(t, end) > next) break;
      ending.push_back(id);
    }
    for (job_id id : ending) c.apply(event::completion(id));
    t = next;
  }
}

}  // namespace aqs::core
