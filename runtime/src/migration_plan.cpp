// migration_plan: keep what stays, re-pin on the same host, spawn the rest.
#include "migration_plan.hpp"

#include <set>
#include <stdexcept>
#include <unordered_map>

namespace aqs::runtime {

migration_plan plan_migration(const std::vector<slot>& current, const std::vector<slot>& next) {
  if (next.empty()) throw std::invalid_argument("the new map has no processor");
  std::unordered_map<int, int> index_of;  // a rank's first processor -> index in next
  std::set<int> named;
  for (std::size_t i = 0; i < next.size(); ++i) {
    for (const int p : procs_of(next[i])) {
      if (!named.insert(p).second) {
        throw std::invalid_argument("the new map names processor " + std::to_string(p) + " twice");
      }
    }
    index_of.emplace(next[i].proc, static_cast<int>(i));
  }
  migration_plan plan;
  plan.assigned.assign(current.size(), -1);
  std::vector<bool> taken(next.size(), false);
  for (std::size_t r = 0; r < current.size(); ++r) {
    auto it = index_of.find(current[r].proc);
    if (it != index_of.end() && !taken[static_cast<std::size_t>(it->second)]) {
      plan.assigned[r] = it->second;
      taken[static_cast<std::size_t>(it->second)] = true;
    }
  }
  // Ranks that lost their processor move to a free one on the same host.
  for (std::size_t r = 0; r < current.size(); ++r) {
    if (plan.assigned[r] >= 0) continue;
    for (std::size_t i = 0; i < next.size(); ++i) {
      if (!taken[i] && next[i].host == current[r].host) {
        plan.assigned[r] = static_cast<int>(i);
        taken[i] = true;
        break;
      }
    }
  }
  for (std::size_t i = 0; i < next.size(); ++i) {
    if (!taken[i]) plan.spawn.push_back(static_cast<int>(i));
  }
  plan.changes_nothing = plan.spawn.empty() && current.size() == next.size();
  for (std::size_t r = 0; plan.changes_nothing && r < current.size(); ++r) {
    const slot& s = next[static_cast<std::size_t>(plan.assigned[r])];
    plan.changes_nothing = procs_of(s) == procs_of(current[r]) && cpus_of(s) == cpus_of(current[r]);
  }
  return plan;
}

}  // namespace aqs::runtime
