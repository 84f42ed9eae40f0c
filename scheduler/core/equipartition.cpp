// equipartition: minimum for all, equal extras above it, EASY for the queue.
#include "core/policies.hpp"

#include <algorithm>
#include <numeric>

#include "core/scheduler.hpp"

namespace aqs::core {

std::vector<std::size_t> share_equally(std::size_t leftover, const std::vector<std::size_t>& caps,
                                       const std::vector<std::size_t>& order) {
  const std::size_t n = caps.size();
  std::vector<std::size_t> extra(n, 0);
  std::vector<std::size_t> by_cap(n);
  std::iota(by_cap.begin(), by_cap.end(), std::size_t{0});
  std::stable_sort(by_cap.begin(), by_cap.end(), [&](std::size_t a, std::size_t b) { return caps[a] < caps[b]; });
  std::size_t remaining = n;
  std::size_t i = 0;
  // Jobs whose cap is below the equal share saturate; the rest split evenly.
  for (; i < n; ++i) {
    std::size_t share = leftover / remaining;
    if (caps[by_cap[i]] > share) break;
    extra[by_cap[i]] = caps[by_cap[i]];
    leftover -= caps[by_cap[i]];
    --remaining;
  }
  if (remaining == 0) return extra;
  std::vector<bool> unsaturated(n, false);
  for (std::size_t k = i; k < n; ++k) unsaturated[by_cap[k]] = true;
  std::size_t base = leftover / remaining;
  std::size_t odd = leftover % remaining;
  for (std::size_t idx : order) {
    if (!unsaturated[idx]) continue;
    extra[idx] = base + (odd > 0 ? 1 : 0);  // base + 1 <= cap: cap > share >= base
    if (odd > 0) --odd;
  }
  return extra;
}

std::vector<std::size_t> share_above_floors(std::size_t leftover, const std::vector<std::size_t>& floors,
                                            const std::vector<std::size_t>& caps,
                                            const std::vector<std::size_t>& order) {
  const std::size_t n = caps.size();
  std::size_t total = leftover;
  for (std::size_t f : floors) total += f;
  // Share the whole among the jobs not yet fixed; a job whose floor is above
  // its share is above the water level: fix it at its floor and share again.
  // Fixing only lowers the others' shares, so a job found above the level
  // stays there and each round fixes at least one (few rounds: only jobs
  // holding processors on drained nodes have a floor).
  std::vector<bool> fixed(n, false);
  std::vector<std::size_t> extra(n, 0);
  for (;;) {
    std::vector<std::size_t> index_of(n, 0), sub_caps, sub_order, members;
    for (std::size_t i = 0; i < n; ++i) {
      if (fixed[i]) continue;
      index_of[i] = members.size();
      members.push_back(i);
      sub_caps.push_back(caps[i]);
    }
    for (std::size_t i : order) {
      if (!fixed[i]) sub_order.push_back(index_of[i]);
    }
    std::vector<std::size_t> sub = share_equally(total, sub_caps, sub_order);
    bool changed = false;
    for (std::size_t k = 0; k < members.size(); ++k) {
      std::size_t i = members[k];
      extra[i] = sub[k];
      if (sub[k] < floors[i]) {
        fixed[i] = true;
        extra[i] = floors[i];
        changed = true;
      }
    }
    if (!changed) return extra;
    total = leftover;
    for (std::size_t i = 0; i < n; ++i) total += fixed[i] ? 0 : floors[i];
  }
}

void whole_ranks(std::vector<std::size_t>& extra, const std::vector<std::size_t>& grains,
                 const std::vector<std::size_t>& caps, const std::vector<std::size_t>& order) {
  std::size_t spare = 0;
  for (std::size_t i = 0; i < extra.size(); ++i) {
    spare += extra[i] % grains[i];
    extra[i] -= extra[i] % grains[i];
  }
  // A rank at a time, in the order of the odd processors, while one fits.
  for (bool gave = spare > 0; gave;) {
    gave = false;
    for (std::size_t i : order) {
      if (grains[i] <= spare && extra[i] + grains[i] <= caps[i]) {
        extra[i] += grains[i];
        spare -= grains[i];
        gave = true;
      }
    }
  }
}

plan equipartition::schedule(const scheduler& s, double now) const {
  plan p;
  struct member {
    job_id id;
    std::size_t min, max, current;  // current: 0 for a job starting now
    std::size_t floor;              // its size floor: max(min, what it keeps on drained nodes)
    bool starting;
    int priority;  // job_request::priority: the odd processors' order
  };
  std::vector<member> members;
  // A job's size floor and how much of it is on UP nodes (the rule in
  // equipartition in policies.hpp: processors kept on drained nodes cost no one anything).
  auto floor_of = [&s](const job& j) {
    std::size_t kept = std::min(s.pinned_count(j), j.req.max_pe);
    std::size_t floor = std::max(j.req.min_pe, kept);
    return std::pair{floor, floor - kept};
  };
  // What can be handed out: free processors, vacated ones that will be free
  // (not those on drained nodes), and what resizable adaptive jobs hold on
  // UP nodes. `mins` is the part of it the jobs keep at their floors.
  std::size_t pool = s.free_count() + s.reserved_usable_count();
  std::size_t mins = 0;
  for (job_id id : s.adaptive_holding()) {
    const job& j = s.get(id);
    if (!scheduler::resizable(j)) continue;
    std::size_t cur = scheduler::planning_size(j);
    auto [floor, floor_usable] = floor_of(j);
    pool += cur - s.pinned_count(j);
    mins += floor_usable;
    // Its maximum within its node limit (MaxNodes): a share it could not
    // be placed on is left to the others.
    members.push_back({id, j.req.min_pe, std::max(floor, s.max_size(j)), cur, floor, false, j.req.priority});
  }
  std::size_t avail = pool > mins ? pool - mins : 0;

  // What a holding job gives back on UP nodes when it ends: a resizable one
  // has been counted at its floor, the others at their size.
  auto released = [&s, &floor_of](const job& r) {
    if (scheduler::resizable(r)) return floor_of(r).second;
    return scheduler::planning_size(r) - s.pinned_count(r);
  };
  easy_walk walk(s, now, released);
  const std::size_t usable = s.usable_count();  // once: the walk below is the hot loop of every decision
  for (const queue_key& k : s.queue()) {
    if (walk.done(avail)) break;
    const job& j = s.get(k.id);
    std::size_t need = j.req.min_pe;
    if (need > usable) continue;
    const std::size_t most = j.req.adaptive ? s.max_size(j) : need;
    if (need > most) continue;  // its minimum needs more nodes than it may have
    if (!walk.admit(p, k.id, j.req.walltime, need, avail)) continue;
    avail -= need;
    if (j.req.adaptive) {
      members.push_back({k.id, j.req.min_pe, most, 0, j.req.min_pe, true, j.req.priority});
    } else {
      p.starts.push_back({k.id, need});
    }
  }

  std::vector<std::size_t> caps(members.size()), floors(members.size()), order(members.size()),
      grains(members.size());
  bool any_floor = false;
  for (std::size_t i = 0; i < members.size(); ++i) {
    grains[i] = scheduler::rank_size(s.get(members[i].id).req);
    caps[i] = members[i].max - members[i].min;
    floors[i] = members[i].floor - members[i].min;
    any_floor = any_floor || floors[i] > 0;
  }
  std::iota(order.begin(), order.end(), std::size_t{0});
  // The order odd processors go in: a job earlier keeps one more when the
  // machine must shrink, so the lowest priority gives processors first
  // (equal priorities: as before, the job with more above its minimum keeps them).
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (members[a].priority != members[b].priority) return members[a].priority > members[b].priority;
    std::size_t ea = members[a].current > members[a].min ? members[a].current - members[a].min : 0;
    std::size_t eb = members[b].current > members[b].min ? members[b].current - members[b].min : 0;
    if (ea != eb) return ea > eb;
    return members[a].id < members[b].id;
  });
  std::vector<std::size_t> extra =
      any_floor ? share_above_floors(avail, floors, caps, order) : share_equally(avail, caps, order);
  whole_ranks(extra, grains, caps, order);

  std::vector<adaptive_size> sizes;
  for (std::size_t i = 0; i < members.size(); ++i) {
    sizes.push_back({members[i].id, members[i].min + extra[i], members[i].current, members[i].starting});
  }
  add_adaptive_sizes(s, p, sizes);
  return p;
}

void add_adaptive_sizes(const scheduler& s, plan& p, const std::vector<adaptive_size>& sizes) {
  // Rebuild the start list in queue order.
  std::vector<plan::sized> starts;
  std::size_t ri = 0;
  for (const adaptive_size& a : sizes) {
    if (a.starting) {
      const job& sj = s.get(a.job);
      const queue_key key{-sj.req.priority, sj.req.submit_time, a.job};
      while (ri < p.starts.size()) {
        const job& r = s.get(p.starts[ri].job);
        if (!(queue_key{-r.req.priority, r.req.submit_time, r.req.id} < key)) break;
        starts.push_back(p.starts[ri++]);
      }
      starts.push_back({a.job, a.size});
    } else if (a.size != a.current) {
      p.targets.push_back({a.job, a.size});
    }
  }
  while (ri < p.starts.size()) starts.push_back(p.starts[ri++]);
  p.starts = std::move(starts);
}

}  // namespace aqs::core
