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

}  // namespace aqs::core
