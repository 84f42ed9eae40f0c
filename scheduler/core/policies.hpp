// policies: the built-in scheduling policies (strategy.hpp's registry
// makes them by name) and the pieces they share: fcfs, easy (EASY
// backfilling), equipartition and pref_common_pool; payoff is in payoff.hpp.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "core/strategy.hpp"

namespace aqs::core {

// ---- fcfs: first come, first served, strictly in queue order, no backfilling.

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

// ---- easy_backfill: EASY backfilling, one reservation for the head of the queue.

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

// The EASY walk of the queue, as easy, equipartition and pref_common_pool
// take it: jobs start in queue order while they fit; the first that does
// not is the head and gets the plan's reservation (find_window, with the
// jobs started before it and `released` for the holding ones); after it,
// jobs are only backfilled (may_backfill).
class easy_walk {
public:
  using released_fn = std::function<std::size_t(const job&)>;
  easy_walk(const scheduler& s, double now, released_fn released)
      : s_(s), now_(now), released_(std::move(released)) {}
  // Whether the head is blocked.
  bool blocked() const noexcept { return blocked_; }
  // Whether no later job can start: blocked, with nothing left.
  bool done(std::size_t avail) const noexcept { return blocked_ && avail == 0; }
  // Whether the queued job `id`, needing `need` of the `avail` processors
  // for its estimate `walltime`, starts now (the caller then takes `need`
  // from what it counts as available). When it is the head that does not
  // fit, it gets p's reservation.
  bool admit(plan& p, job_id id, double walltime, std::size_t need, std::size_t avail);
  // When a job needing `need` could start, with `avail` free now and the
  // jobs started so far.
  backfill_window window(std::size_t need, std::size_t avail) const {
    return find_window(s_, now_, need, avail, planned_, released_);
  }
  // Makes `id` the head, waiting for w: p's reservation.
  void reserve(plan& p, job_id id, const backfill_window& w);
  // The head's window as the backfilled jobs left it (its extra is what
  // they have not taken); no reservation: shadow +inf.
  const backfill_window& head_window() const noexcept { return w_; }

private:
  const scheduler& s_;
  double now_;
  released_fn released_;
  std::vector<std::pair<double, std::size_t>> planned_;  // (estimated end, processors) of the jobs started in order
  bool blocked_ = false;
  backfill_window w_;
};

// ---- equipartition: the Faucets strategy, adaptive jobs share the machine equally above their minimum.

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

// ---- pref_common_pool: FCFS + EASY with moldable starts at a preferred size and a common pool of processors.

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
