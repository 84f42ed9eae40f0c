// pref_common_pool: FCFS + EASY with moldable starts at a preferred size and a common pool of processors.
#pragma once

#include "core/strategy.hpp"

namespace aqs::core {

// The preferred-size common pool (the pref_common_pool family of Zojer,
// Posner and Özden's malleable scheduling study), over the same core as
// equipartition:
//  - the queue is served FCFS with EASY backfilling; rigid jobs keep EASY's
//    guarantee (nothing backfilled or grown delays the head's reservation:
//    adaptive jobs' processors above their minimum can be taken back at any
//    decision, and the reservation counts on exactly that);
//  - an adaptive job starts at its preferred size (job_request::pref_pe,
//    default its minimum) when the pool has it, and below it (moldable, down
//    to its minimum) only when that ends it sooner than waiting for its
//    preferred size;
//  - to start waiting jobs, running adaptive jobs are shrunk, those furthest
//    above their preferred size first;
//  - idle processors go to adaptive jobs first up to their preferred size,
//    then up to their maximum, shared equally at each level.
// The details (drained nodes, ranks of several processors) are
// equipartition's; plan_common_pool in common_pool.hpp is the algorithm.
class pref_common_pool final : public strategy {
public:
  std::string_view name() const noexcept override { return "pref_common_pool"; }
  plan schedule(const scheduler& s, double now) const override;
};

}  // namespace aqs::core
