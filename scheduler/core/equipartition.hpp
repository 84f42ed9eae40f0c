// equipartition: the Faucets strategy, adaptive jobs share the machine equally above their minimum.
#pragma once

#include <cstddef>
#include <vector>

#include "core/strategy.hpp"

namespace aqs::core {

// At every decision (arrival, completion, ack, ...), exactly as Faucets:
// 1. Every resizable adaptive job (running, not frozen, not suspended) is
//    counted at its minimum; rigid, suspended and frozen jobs at their size.
// 2. The queue is walked in order. The head starts if its minimum (adaptive)
//    or size (rigid) fits in what is left, and so on, so adaptive jobs are
//    shrunk toward their minimum exactly when that lets the head start.
//    When the head does not fit it gets an EASY reservation (running adaptive
//    jobs give back their minimum at their estimated end, since everything
//    above the minimum can be taken at once) and later jobs are backfilled
//    under the EASY rules.
// 3. The processors left over are shared equally among the adaptive jobs
//    (running and starting), as extra processors above each one's minimum,
//    up to its maximum (water-filling: the extras of unsaturated jobs differ
//    by at most one). The odd processors go to the jobs that hold the most
//    extra already, then the lowest id, so that recomputing moves no ranks.
//
// Drained nodes. Only processors on UP nodes can be handed to a job, so the
// pool of steps 1-3 is free processors, vacated ones on UP nodes, and what
// resizable adaptive jobs hold on UP nodes. What a job holds on a drained
// node (its planning map less UP nodes; no job holds any on a DOWN node,
// since losing a node kills its jobs) counts toward that job's size but
// never toward the pool. The rule for such a job:
//  - It keeps its drained processors, up to its maximum: its size floor is
//    max(min, min(drained, max)) instead of min, and only the part of that
//    floor on UP nodes is taken from the pool. A processor it gave up there
//    would be lost to everyone, so giving it up would shrink the job for
//    nothing; and a drain lets running work finish, it does not evict it.
//  - Its extra above its minimum counts its drained processors: it is at
//    least floor - min, and it gets UP processors only when the equal level
//    of step 3 is above that (water-filling with floors, share_above_floors).
//    So a job on a drained node does not also take a full share of the rest.
//  - A shrink (scheduler::decide) gives back its UP processors first, which
//    is exactly what the plan counted on handing out; its drained ones go
//    only when its maximum drops below them.
// With every node UP all floors are the minimums and this is Faucets exactly.
class equipartition final : public strategy {
public:
  std::string_view name() const noexcept override { return "equipartition"; }
  plan schedule(const scheduler& s, double now) const override;
};

// Water-filling: shares `leftover` among jobs with caps[i] = max - min, as
// equal extras capped per job; ties for the odd processors go by `order`
// (indices, most preferred first). Returns the extra of each job. Exposed
// for tests.
std::vector<std::size_t> share_equally(std::size_t leftover, const std::vector<std::size_t>& caps,
                                       const std::vector<std::size_t>& order);

// Water-filling with floors: each job gets at least floors[i] (<= caps[i]),
// and `leftover` more is shared so that every job above its floor is at the
// common level (the odd ones by `order`, as share_equally). Returns the extra
// of each job, floor included. With all floors zero it is share_equally.
std::vector<std::size_t> share_above_floors(std::size_t leftover, const std::vector<std::size_t>& floors,
                                            const std::vector<std::size_t>& caps,
                                            const std::vector<std::size_t>& order);

// Jobs with ranks of several processors (-c) take whole ranks: each extra
// is rounded down to a multiple of grains[i], and what that leaves is given
// back a rank at a time, by `order`, to the jobs it fits whole and under
// their caps (a 1-processor rank always fits). Caps and floors are whole
// ranks, so no job drops below its floor. Exposed for tests.
void whole_ranks(std::vector<std::size_t>& extra, const std::vector<std::size_t>& grains,
                 const std::vector<std::size_t>& caps, const std::vector<std::size_t>& order);

// The size a plan gives an adaptive job: to start at, or to be resized to
// from `current`.
struct adaptive_size {
  job_id job;
  std::size_t size;
  std::size_t current;  // 0 for a job starting now
  bool starting;
};

// Adds the adaptive jobs' sizes to `p`, as the equipartition family does:
// those starting join p.starts at their queue positions among the (rigid)
// starts already there, and those running whose size changes become
// p.targets.
void add_adaptive_sizes(const scheduler& s, plan& p, const std::vector<adaptive_size>& sizes);

}  // namespace aqs::core
