// easy_backfill: the classic EASY rules (Lifka 1995; the CQSim and Slurm backfill semantics).
#include "core/policies.hpp"

#include <algorithm>

#include "core/scheduler.hpp"

namespace aqs::core {

backfill_window find_window(const scheduler& s, double now, std::size_t need, std::size_t avail,
                            std::vector<std::pair<double, std::size_t>> planned,
                            const std::function<std::size_t(const job&)>& released) {
  backfill_window w;
  if (avail >= need) {
    w.shadow = now;
    w.extra = avail - need;
    return w;
  }
  std::sort(planned.begin(), planned.end());
  auto pi = planned.begin();
  auto ri = s.holding_by_end().begin();
  const auto re = s.holding_by_end().end();
  std::size_t freed = avail;
  while (pi != planned.end() || ri != re) {
    double end;
    if (ri == re || (pi != planned.end() && pi->first < ri->first)) {
      end = pi->first;
      freed += pi->second;
      ++pi;
    } else {
      end = ri->first;
      freed += released(s.get(ri->second));
      ++ri;
    }
    if (freed >= need) {
      w.shadow = std::max(end, now);
      w.extra = freed - need;
      return w;
    }
  }
  return w;
}

bool may_backfill(backfill_window& w, double now, double walltime, std::size_t need, std::size_t avail) {
  if (need > avail) return false;
  if (now + walltime <= w.shadow) return true;
  if (need <= w.extra) {
    w.extra -= need;
    return true;
  }
  return false;
}

bool easy_walk::admit(plan& p, job_id id, double walltime, std::size_t need, std::size_t avail) {
  if (blocked_) return may_backfill(w_, now_, walltime, need, avail);
  if (need <= avail) {
    planned_.emplace_back(now_ + walltime, need);
    return true;
  }
  reserve(p, id, window(need, avail));
  return false;
}

void easy_walk::reserve(plan& p, job_id id, const backfill_window& w) {
  blocked_ = true;
  w_ = w;
  p.reservation = plan::reservation_t{id, w.shadow};
}

plan easy_backfill::schedule(const scheduler& s, double now) const {
  plan p;
  std::size_t free = s.free_count();
  // A job ending gives back only its processors on UP nodes to the queue.
  easy_walk walk(s, now, [&s](const job& r) { return r.size() - s.pinned_count(r); });
  const std::size_t usable = s.usable_count();  // once: the walk below is the hot loop of every decision
  for (const queue_key& k : s.queue()) {
    if (walk.done(free)) break;
    const job& j = s.get(k.id);
    std::size_t need = rigid_size(s, j, usable);
    if (need > usable) continue;
    if (!walk.admit(p, k.id, j.req.walltime, need, free)) continue;
    p.starts.push_back({k.id, need});
    free -= need;
  }
  return p;
}

}  // namespace aqs::core
