// payoff: the preferred-size common pool that resizes a job only when the resize pays for itself.
#pragma once

#include "core/strategy.hpp"

namespace aqs::core {

// pref_common_pool's queue, moldable starts and preferred sizes, plus three
// rules that keep resizes from costing more than they bring:
//  1. Grows pay: a running job grows from p to q processors only if the time
//     it saves, by its estimated remaining run (estimated end - now) and its
//     declared speedup model (linear when none), is more than one resize's
//     cost (job_request::resize_cost, else strategy_params::
//     default_resize_cost). A grow that does not pay leaves the processors
//     to the other jobs, or idle.
//  2. No rebalancing: a running job is shrunk only when the pool is short,
//     i.e. to start queued jobs (furthest above its preferred size first);
//     never to even out shares among running jobs.
//  3. An interval: no job grows less than min_resize_interval seconds after
//     its start or its previous resize, and while the head of the queue
//     waits a job grows only if now + interval is no later than the head's
//     reservation, or within the reservation's spare processors (EASY's
//     test, applied to the grown part), so that it is not grown only to be
//     shrunk again for the head within its interval. A shrink that starts
//     waiting jobs is never held back by the interval: EASY's guarantee to
//     the head ranks first. Since shrinks happen only to start jobs (rule 2),
//     a job is resized at most once per interval except to make room for
//     waiting work.
class payoff final : public strategy {
public:
  explicit payoff(strategy_params params = {}) : params_(params) {}
  std::string_view name() const noexcept override { return "payoff"; }
  plan schedule(const scheduler& s, double now) const override;
  const strategy_params& params() const noexcept { return params_; }

private:
  strategy_params params_;
};

// payoff_lxf: payoff, with the queued jobs after the blocked head tried for
// backfilling in order of their expansion factor, (wait + walltime) /
// walltime, largest first, instead of in queue order (issue 34's KTH study;
// docs/simulator.md). The head is still the first job in queue order that
// does not fit and keeps its reservation: no backfilled or grown job delays
// it (EASY's guarantee). The order favours short jobs and, as they wait,
// long ones, so with no adaptive job it is not easy but EASY with that
// backfill order (on the study's workloads never worse than easy).
class payoff_lxf final : public strategy {
public:
  explicit payoff_lxf(strategy_params params = {}) : params_(params) {}
  std::string_view name() const noexcept override { return "payoff_lxf"; }
  plan schedule(const scheduler& s, double now) const override;
  const strategy_params& params() const noexcept { return params_; }

private:
  strategy_params params_;
};

}  // namespace aqs::core
