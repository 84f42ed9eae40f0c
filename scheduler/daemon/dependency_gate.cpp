// dependency_gate: afterok's rule and the held set.
#include "daemon/dependency_gate.hpp"

#include <algorithm>
#include <cstdint>
#include <climits>

namespace aqs::daemon {

dependency_gate::verdict dependency_gate::evaluate(
    const std::vector<std::int64_t>& deps,
    const std::function<std::optional<core::job_state>(std::int64_t)>& state_of) {
  verdict v;
  for (std::int64_t d : deps) {
    const std::optional<core::job_state> st = state_of(d);
    if (st && *st == core::job_state::completed) continue;
    if (st && core::is_final(*st)) {
      v.what = verdict::kind::never;
      v.failed_dep = d;
      v.failed_state = *st;
      v.waiting.clear();
      return v;
    }
    v.waiting.push_back(d);
  }
  if (!v.waiting.empty()) v.what = verdict::kind::waiting;
  return v;
}

void dependency_gate::hold(std::int64_t job, const std::vector<std::int64_t>& waiting) {
  held_.insert(job);
  for (std::int64_t d : waiting) dependents_.emplace(d, job);  // held again after a start: once
}

std::vector<std::int64_t> dependency_gate::started(std::int64_t dep) const {
  std::vector<std::int64_t> out;
  for (auto it = dependents_.lower_bound({dep, INT64_MIN}); it != dependents_.end() && it->first == dep; ++it) {
    if (held_.count(it->second) != 0) out.push_back(it->second);
  }
  return out;
}

std::vector<std::int64_t> dependency_gate::ended(std::int64_t dep) {
  const auto first = dependents_.lower_bound({dep, INT64_MIN});
  auto last = first;
  std::vector<std::int64_t> out;
  for (; last != dependents_.end() && last->first == dep; ++last) {
    if (held_.count(last->second) != 0) out.push_back(last->second);
  }
  dependents_.erase(first, last);
  return out;
}

}  // namespace aqs::daemon
