// start_estimate: when a job would start on this cluster, by running its own strategy forward on a snapshot.
#pragma once

#include <optional>

#include "core/job.hpp"
#include "core/scheduler.hpp"

namespace aqs::core {

// When would a job like `r` start on this cluster if it were submitted now:
// seconds from `now`, 0 when it would start at once. Runs the cluster's own
// strategy forward on a snapshot of `s` (scheduler::snapshot; `s` is left
// as it is), with `r` queued as the newest job of its priority (its id and
// submit time are replaced), and:
//  - running jobs end at start + walltime (their estimated end; one already
//    past it ends at once, so a job without a walltime ends now);
//  - pending jobs keep their order; held and suspended jobs stay as they are;
//  - every resize, those under way included, is acknowledged at once, so an
//    adaptive job gives processors back as soon as the strategy shrinks it.
// nullopt: it can never start here (it needs more than the cluster has, or
// a shape its nodes cannot hold), or not without something the estimate
// does not foresee (nodes coming back up, a held job being released).
std::optional<double> estimate_start(const scheduler& s, const job_request& r, double now);

}  // namespace aqs::core
