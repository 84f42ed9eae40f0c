// dependency_gate: jobs held back by afterok dependencies (not yet in the
// core), and which of them to look at again when a dependency ends. On the
// strand.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/job_state.hpp"

namespace aqs::daemon {

class dependency_gate {
public:
  // What a job's dependencies allow now.
  struct verdict {
    enum class kind { ready, waiting, never } what = kind::ready;
    std::vector<std::int64_t> waiting;  // kind::waiting: the unfinished ones
    std::int64_t failed_dep = 0;        // kind::never: one that ended other than COMPLETED
    core::job_state failed_state = core::job_state::failed;
  };
  // afterok: ready once every dependency COMPLETED; never once one ended any
  // other way; else waiting. `state_of` gives a dependency's state, nullopt
  // while unknown (counted as waiting).
  static verdict evaluate(const std::vector<std::int64_t>& deps,
                          const std::function<std::optional<core::job_state>(std::int64_t)>& state_of);

  // Holds `job` until each of `waiting` ends.
  void hold(std::int64_t job, const std::vector<std::int64_t>& waiting);
  bool is_held(std::int64_t job) const { return held_.count(job) != 0; }
  // The job is no longer held (admitted, cancelled or ended).
  void release(std::int64_t job) { held_.erase(job); }
  // `dep` ended: the held jobs that waited on it, to be evaluated again.
  std::vector<std::int64_t> ended(std::int64_t dep);
  // `dep` started: the held jobs that wait on it (an `after` dependency may
  // be met now), still waiting on it until evaluated again.
  std::vector<std::int64_t> started(std::int64_t dep) const;
  std::size_t held_count() const noexcept { return held_.size(); }

private:
  std::set<std::int64_t> held_;
  // (dep, held job), each pair once: an ordered set, so that holding the
  // 100,000 tasks of an array behind one job is n log n, not n^2 (a
  // multimap searched for duplicates was quadratic).
  std::set<std::pair<std::int64_t, std::int64_t>> dependents_;
};

}  // namespace aqs::daemon
