// easy_backfill: EASY backfilling, one reservation for the head of the queue.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <vector>

#include "core/strategy.hpp"

namespace aqs::core {

// Starts jobs in queue order while they fit. When the head does not fit, it
// gets a reservation: the earliest time at which enough processors are free,
// judged by running jobs' walltime estimates (start + walltime). A later job
// may start now if it fits now and either ends (by its estimate) by that time
// or uses only processors the head will not need then ("extra"). Candidates
// are taken in queue order. Adaptive jobs run rigid at their maximum.
class easy_backfill final : public strategy {
public:
  std::string_view name() const noexcept override { return "easy"; }
  plan schedule(const scheduler& s, double now) const override;
  bool resizes() const noexcept override { return false; }
};

// The head's reservation: `shadow` is when it can start, `extra` how many
// processors are left over for it at that time. shadow is +inf when it
// never fits (then nothing can delay it).
struct backfill_window {
  double shadow = std::numeric_limits<double>::infinity();
  std::size_t extra = 0;
};

// Computes the window for a head needing `need` processors when `avail` are
// free now. Processors come back as jobs end: the holding jobs in estimated-end
// order, each giving back released(job), merged with `planned` (estimated
// end, processors) of jobs started in this pass. Ends in the past count as now.
// released() must count only processors on UP nodes (scheduler::pinned_count):
// what a job frees on a drained node never comes back to the queue.
backfill_window find_window(const scheduler& s, double now, std::size_t need, std::size_t avail,
                            std::vector<std::pair<double, std::size_t>> planned,
                            const std::function<std::size_t(const job&)>& released);

// A backfill candidate may start now if it fits in `avail` and does not delay
// the head: ends by the shadow time or fits in the extra processors. On
// success, updates the window's extra.
bool may_backfill(backfill_window& w, double now, double walltime, std::size_t need, std::size_t avail);

}  // namespace aqs::core
