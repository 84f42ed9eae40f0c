// common_pool: EASY for the queue, a two-level water-fill (preferred, then maximum) for adaptive jobs.
#include "core/common_pool.hpp"

#include <algorithm>
#include <numeric>

#include "core/policies.hpp"
#include "core/scheduler.hpp"

namespace aqs::core {

double resize_gain(const job& j, std::size_t from, std::size_t to, double now) {
  const double left = std::max(0.0, j.estimated_end - now);
  return left - j.req.speedup.rescale(left, from, to);
}

double expansion_factor(double submit, double walltime, double now) {
  const double w = std::max(walltime, 1.0);
  return (now - submit + w) / w;
}

namespace {

struct member {
  job_id id;
  std::size_t min, pref, max;
  std::size_t current;  // 0 for a job starting now
  std::size_t floor;    // max(min, what it keeps on drained nodes)
  bool starting;
  bool locked = false;  // payoff: resized less than the interval ago, so it may not grow now
};

// Two-level water-fill of `total` extras (above the minimums, floors
// included) over the members: first up to pref - min, then up to max - min,
// each never below lo[i] (<= hi[i]) nor above hi[i].
std::vector<std::size_t> fill(std::size_t avail, const std::vector<member>& m, const std::vector<std::size_t>& lo,
                              const std::vector<std::size_t>& hi, const std::vector<std::size_t>& order) {
  const std::size_t n = m.size();
  std::vector<std::size_t> cap1(n), floor1(n);
  std::size_t lo_total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    cap1[i] = std::min(m[i].pref - m[i].min, hi[i]);
    floor1[i] = std::min(lo[i], cap1[i]);
    lo_total += lo[i];
  }
  // The floors are always kept: the strategy plans no more than the pool
  // (the caller's floors fit in avail).
  std::size_t total = std::max(avail, lo_total);
  std::size_t floor1_total = std::accumulate(floor1.begin(), floor1.end(), std::size_t{0});
  std::size_t extra_floor = lo_total - floor1_total;  // floors above the preferred level, kept in phase 2
  std::size_t phase1 = total - extra_floor;
  std::vector<std::size_t> e1 = share_above_floors(phase1 - floor1_total, floor1, cap1, order);
  std::size_t used = std::accumulate(e1.begin(), e1.end(), std::size_t{0});
  std::vector<std::size_t> cap2(n), floor2(n);
  for (std::size_t i = 0; i < n; ++i) {
    cap2[i] = hi[i] - e1[i];
    floor2[i] = lo[i] > e1[i] ? lo[i] - e1[i] : 0;
  }
  std::size_t floor2_total = std::accumulate(floor2.begin(), floor2.end(), std::size_t{0});
  std::size_t rest = total - used;
  std::vector<std::size_t> e2 = share_above_floors(rest > floor2_total ? rest - floor2_total : 0, floor2, cap2, order);
  for (std::size_t i = 0; i < n; ++i) e1[i] += e2[i];
  return e1;
}

}  // namespace

plan plan_common_pool(const scheduler& s, double now, const pool_rules& rules) {
  plan p;
  p.keep_order = true;
  std::vector<member> members;
  auto floor_of = [&s](const job& j) {
    std::size_t kept = std::min(s.pinned_count(j), j.req.max_pe);
    std::size_t floor = std::max(j.req.min_pe, kept);
    return std::pair{floor, floor - kept};
  };
  auto locked = [&](const job& j) {
    return rules.payoff && rules.min_interval > 0 && now < j.last_resize_time + rules.min_interval;
  };
  std::size_t pool = s.free_count() + s.reserved_usable_count();
  std::size_t mins = 0;
  for (job_id id : s.adaptive_holding()) {
    const job& j = s.get(id);
    if (!scheduler::resizable(j)) continue;
    const std::size_t cur = scheduler::planning_size(j);
    auto [floor, floor_usable] = floor_of(j);
    pool += cur - s.pinned_count(j);
    mins += floor_usable;
    const std::size_t most = std::max(floor, s.max_size(j));
    members.push_back({id, j.req.min_pe, std::clamp(preferred_size(j.req), j.req.min_pe, most), most, cur, floor,
                       false, locked(j)});
  }
  std::size_t avail = pool > mins ? pool - mins : 0;

  // A holding job gives back, at its estimated end, its floor on UP nodes
  // if resizable (the rest is in the pool), else all it holds on UP nodes.
  auto released = [&s, &floor_of](const job& r) {
    if (scheduler::resizable(r)) return floor_of(r).second;
    return scheduler::planning_size(r) - s.pinned_count(r);
  };
  easy_walk walk(s, now, released);
  const std::size_t usable = s.usable_count();
  auto visit = [&](const queue_key& k) {
    const job& j = s.get(k.id);
    const std::size_t need = j.req.min_pe;
    if (need > usable) return;
    const std::size_t most = j.req.adaptive ? s.max_size(j) : need;
    if (need > most) return;
    if (!walk.blocked() && need <= avail && j.req.adaptive) {
      // Moldable start: below its preferred size only if that ends it sooner;
      // else it is the head, waiting for its preferred size.
      const std::size_t pref = std::clamp(preferred_size(j.req), need, most);
      const std::size_t now_size = std::min(pref, avail);
      if (now_size < pref && pref <= usable) {
        const backfill_window at_pref = walk.window(pref, avail);
        const double finish_now = now + j.req.speedup.rescale(j.req.walltime, pref, now_size);
        const double finish_wait = at_pref.shadow + j.req.walltime;
        if (finish_wait < finish_now) {
          walk.reserve(p, k.id, at_pref);
          return;
        }
      }
    }
    if (!walk.admit(p, k.id, j.req.walltime, need, avail)) return;
    avail -= need;
    if (j.req.adaptive) {
      members.push_back({k.id, need, std::clamp(preferred_size(j.req), need, most), most, 0, need, true, false});
    } else {
      p.starts.push_back({k.id, need});
    }
  };
  // Backfill candidates for payoff_lxf: only those that could fit now (a
  // job needing more than `avail` is refused whatever the order, and avail
  // only shrinks), and at most k_lxf_window of them; the queue after the
  // last one is tried in queue order, so a decision costs the same on a
  // queue of 100,000 as on one of a thousand.
  constexpr std::size_t k_lxf_window = 500;
  std::vector<std::pair<double, const queue_key*>> candidates;
  auto it = s.queue().begin();
  const auto end = s.queue().end();
  for (; it != end && !walk.done(avail); ++it) {
    if (rules.lxf_backfill && walk.blocked()) {
      const job& j = s.get(it->id);
      if (j.req.min_pe > avail) continue;
      candidates.emplace_back(-expansion_factor(it->submit_time, j.req.walltime, now), &*it);
      if (candidates.size() == k_lxf_window) {
        ++it;
        break;
      }
      continue;
    }
    visit(*it);
  }
  // Largest factor first, ties in queue order.
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : *a.second < *b.second;
  });
  for (const auto& c : candidates) {
    if (walk.done(avail)) break;
    visit(*c.second);
  }
  for (; it != end && !walk.done(avail); ++it) visit(*it);

  const std::size_t n = members.size();
  std::vector<std::size_t> order(n), grains(n), hi(n), lo(n), cur_extra(n);
  for (std::size_t i = 0; i < n; ++i) {
    grains[i] = scheduler::rank_size(s.get(members[i].id).req);
    hi[i] = members[i].max - members[i].min;
    lo[i] = members[i].floor - members[i].min;
    cur_extra[i] = members[i].current > members[i].min ? members[i].current - members[i].min : 0;
  }
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (cur_extra[a] != cur_extra[b]) return cur_extra[a] > cur_extra[b];
    return members[a].id < members[b].id;
  });

  // The extras to share: the pool less the minimums, plus what jobs keep
  // above their minimum on drained nodes (not in the pool), as equipartition.
  const std::size_t total = avail + std::accumulate(lo.begin(), lo.end(), std::size_t{0});
  std::vector<std::size_t> extra;
  if (!rules.payoff) {
    extra = fill(total, members, lo, hi, order);
  } else {
    std::size_t held_extra = 0;
    for (std::size_t i = 0; i < n; ++i) held_extra += std::max(cur_extra[i], lo[i]);
    if (total <= held_extra) {
      // Short: running jobs only shrink (those furthest above their preferred
      // size first) and starting jobs get their minimum.
      for (std::size_t i = 0; i < n; ++i) hi[i] = members[i].starting ? lo[i] : std::max(cur_extra[i], lo[i]);
      extra = fill(total, members, lo, hi, order);
    } else {
      // Room to spare: nobody shrinks; a grow is kept only when it pays
      // (time saved > its cost) and, as the grown job keeps its processors
      // for the interval, does not delay the head's reservation. A refused
      // grow fixes the job at its size and the rest is shared again.
      for (std::size_t i = 0; i < n; ++i) {
        lo[i] = std::max(cur_extra[i], lo[i]);
        if (members[i].locked) hi[i] = lo[i];  // within its interval: no grow
      }
      backfill_window budget = walk.head_window();
      for (bool again = true; again;) {
        again = false;
        extra = fill(total, members, lo, hi, order);
        backfill_window trial = budget;
        for (std::size_t i = 0; i < n && !again; ++i) {
          if (extra[i] <= lo[i]) continue;
          const job& j = s.get(members[i].id);
          std::size_t allowed = extra[i];
          if (!members[i].starting) {
            const double cost = j.req.resize_cost >= 0 ? j.req.resize_cost : rules.default_cost;
            if (resize_gain(j, members[i].current, members[i].min + extra[i], now) <= cost) allowed = lo[i];
          }
          const std::size_t delta = allowed - lo[i];
          if (delta > 0 && walk.blocked() && now + rules.min_interval > trial.shadow) {
            const std::size_t spare = std::min(delta, trial.extra);
            allowed = lo[i] + spare;
            trial.extra -= spare;
          }
          if (allowed < extra[i]) {
            hi[i] = allowed;  // fixed at what it may have; the others share the rest
            again = true;
          }
        }
        if (!again) budget = trial;
      }
    }
  }
  std::vector<std::size_t> caps(n);
  for (std::size_t i = 0; i < n; ++i) caps[i] = hi[i];
  whole_ranks(extra, grains, caps, order);

  // Adaptive starts keep their queue position among the rigid ones.
  std::vector<adaptive_size> sizes;
  for (std::size_t i = 0; i < n; ++i) {
    sizes.push_back({members[i].id, members[i].min + extra[i], members[i].current, members[i].starting});
  }
  add_adaptive_sizes(s, p, sizes);
  return p;
}

}  // namespace aqs::core
