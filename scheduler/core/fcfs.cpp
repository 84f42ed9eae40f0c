// fcfs: in-order starts; the head blocks everything behind it.
#include "core/policies.hpp"

#include <algorithm>

#include "core/scheduler.hpp"

namespace aqs::core {

std::size_t rigid_size(const scheduler& s, const job& j, std::size_t usable) {
  const std::size_t most = j.req.adaptive ? s.max_size(j) : j.req.max_pe;
  return std::max(j.req.min_pe, std::min(most, usable));
}

plan fcfs::schedule(const scheduler& s, double /*now*/) const {
  plan p;
  std::size_t free = s.free_count();
  const std::size_t usable = s.usable_count();  // once: the walk below is the hot loop of every decision
  for (const queue_key& k : s.queue()) {
    const job& j = s.get(k.id);
    std::size_t need = rigid_size(s, j, usable);
    if (need > usable) continue;
    if (need > free) break;
    p.starts.push_back({k.id, need});
    free -= need;
  }
  return p;
}

}  // namespace aqs::core
