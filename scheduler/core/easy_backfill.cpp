// easy_backfill: the classic EASY rules (Lifka 1995; the CQSim and Slurm backfill semantics).
#include "core/easy_backfill.hpp"

#include <algorithm>

#include "core/fcfs.hpp"
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

plan easy_backfill::schedule(const scheduler& s, double now) const {
  plan p;
  std::size_t free = s.free_count();
  std::vector<std::pair<double, std::size_t>> planned;
  bool blocked = false;
  backfill_window w;
  const std::size_t usable = s.usable_count();  // once: the walk below is the hot loop of every decision
  for (const queue_key& k : s.queue()) {
    if (blocked && free == 0) break;
    const job& j = s.get(k.id);
    std::size_t need = rigid_size(s, j, usable);
    if (need > usable) continue;
    if (!blocked) {
      if (need <= free) {
        p.starts.push_back({k.id, need});
        planned.emplace_back(now + j.req.walltime, need);
        free -= need;
        continue;
      }
      blocked = true;
      // A job ending gives back only its processors on UP nodes to the queue.
      w = find_window(s, now, need, free, planned, [&s](const job& r) { return r.size() - s.pinned_count(r); });
      p.reservation = plan::reservation_t{k.id, w.shadow};
      continue;
    }
    if (may_backfill(w, now, j.req.walltime, need, free)) {
      p.starts.push_back({k.id, need});
      free -= need;
    }
  }
  return p;
}

}  // namespace aqs::core
