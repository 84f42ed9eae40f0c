// common_pool: the preferred-size common pool that pref_common_pool and payoff share (pure).
#pragma once

#include <cstddef>
#include <vector>

#include "core/strategy.hpp"

namespace aqs::core {

// The rules the two preferred-size policies differ in.
struct pool_rules {
  // payoff: grows must pay (time saved > resize cost), running jobs are
  // shrunk only to start queued jobs, and a job grows only min_interval
  // seconds or more after its start or its last resize.
  bool payoff = false;
  double min_interval = 0;
  double default_cost = 10;
  // payoff_lxf: once the head is blocked, the other queued jobs are tried
  // for backfilling in order of their expansion factor, (now - submit +
  // walltime) / walltime, largest first (ties in queue order), instead of in
  // queue order. The head and its reservation are the same either way.
  bool lxf_backfill = false;
};

// A queued job's expansion factor at `now`: (now - submit + walltime) /
// walltime, with walltime taken as at least 1 s. Exposed for tests.
double expansion_factor(double submit, double walltime, double now);

// One decision of a preferred-size common pool (pref_common_pool in policies.hpp states
// the rules; payoff.hpp what it adds):
// 1. The pool is the free processors, those being vacated on UP nodes and
//    what resizable adaptive jobs hold above their minimum (their size floor
//    on drained nodes, as equipartition in policies.hpp).
// 2. The queue is walked in order with EASY: a job starts when its minimum
//    (adaptive) or size (rigid) fits; the first that does not gets the
//    reservation, computed with adaptive jobs giving back everything above
//    their floor at once and their floor at their estimated end; later jobs
//    backfill when they end before it or fit in its spare processors.
//    (payoff_lxf: the jobs after the head in order of expansion factor.)
//    Moldable start: an adaptive job that fits at its minimum but not at its
//    preferred size starts now only if that ends it sooner (by its walltime,
//    taken as its run time at the preferred size, rescaled by its speedup
//    model) than waiting for its preferred size would; else it waits, and
//    holds the reservation when it is the first to wait.
// 3. What is left is shared among the adaptive jobs (running and starting):
//    first equally up to each one's preferred size, then equally up to each
//    one's maximum. So the jobs furthest above their preferred size are the
//    ones shrunk to start others, and idle processors go to jobs below their
//    preferred size first.
// Rigid jobs keep EASY's guarantee: a grow only takes processors the pool
// can take back at any later decision (a shrink to start waiting jobs is
// never held back, not even by payoff's interval). Under payoff a grow
// while the head waits is also kept only when now + min_interval is no
// later than the head's reservation or it fits the reservation's spare
// processors, so that a job is not grown only to be shrunk again within its
// interval.
plan plan_common_pool(const scheduler& s, double now, const pool_rules& rules);

// Expected seconds a running adaptive job saves by going from `from` to `to`
// processors (positive for a grow), by its estimated end and its declared
// speedup model; the payoff rule compares it with the resize cost. Exposed
// for tests.
double resize_gain(const job& j, std::size_t from, std::size_t to, double now);

}  // namespace aqs::core
