// fcfs: first come, first served, strictly in queue order, no backfilling.
#pragma once

#include "core/strategy.hpp"

namespace aqs::core {

// Starts queued jobs in order while the next one fits, and stops at the first
// that does not. Adaptive jobs are treated as rigid at their maximum (or the
// whole usable cluster if smaller, but never below their minimum): rigid
// strategies never resize. Jobs larger than the usable cluster are passed
// over (they would block the queue forever).
class fcfs final : public strategy {
public:
  std::string_view name() const noexcept override { return "fcfs"; }
  plan schedule(const scheduler& s, double now) const override;
  bool resizes() const noexcept override { return false; }
};

// The size a rigid strategy gives a job: min_pe == max_pe for rigid jobs;
// an adaptive job starts as large as it may (its maximum within its
// partition's MaxCPUsPerJob and MaxNodes: scheduler::max_size) and the
// usable processors allow, never below its minimum.
std::size_t rigid_size(const scheduler& s, const job& j, std::size_t usable);

}  // namespace aqs::core
