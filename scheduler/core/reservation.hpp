// reservation: advance reservations (Slurm's `scontrol create reservation`):
// processors set aside from a start time for named users or accounts, what
// the scheduler does with them before and during that time, and how the
// processors of a new one are chosen.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/processor_set.hpp"

namespace aqs::core {

class scheduler;

// One reservation as the scheduler plans with it (the daemon keeps who
// created it and who may use it; the core needs only its name, window and
// processors). Times are on the caller's clock, like `now`.
//
// What the scheduler does (scheduler::set_reservations):
//  - Before `start`, its processors take only jobs without a reservation
//    that end by `start` by their time limit (EASY backfilling around it,
//    in queue order); every other job is planned without them, so nothing
//    started before it overlaps it and nothing planned waits for it.
//  - From `start` to `end` they run only the jobs that asked for it
//    (job_request::reservation), scheduled by the partition's policy as a
//    machine of its own; those jobs get no other processors. An adaptive
//    job of another that holds some of them at `start` is sent a map
//    without them (the same size where free processors elsewhere allow,
//    never below its minimum): it is shrunk off them, not killed, and they
//    are free once it acknowledges. With a lead
//    (scheduler::set_reservation_lead) this happens that long before the
//    start, so that they are free at the start. A rigid job still on them (its time
//    limit ran past `start`, or the reservation was made with IGNORE_JOBS)
//    keeps them until it ends.
//  - From `end` on it is gone: its processors are everyone's again, and
//    its jobs that still run keep theirs until they end.
struct advance_reservation {
  std::string name;
  double start = 0;
  double end = 0;
  processor_set procs;

  bool active(double now) const noexcept { return start <= now && now < end; }
  bool future(double now) const noexcept { return now < start; }
};

// What a new reservation asks for: either given processors (its nodes'
// every processor, say) or a count the scheduler chooses.
struct reservation_ask {
  double start = 0;
  double end = 0;
  std::optional<processor_set> procs;  // Nodes=: exactly these
  std::size_t count = 0;               // CoreCnt=: this many, chosen
  bool ignore_jobs = false;            // IGNORE_JOBS: running rigid jobs do not stand in the way
};

// The processors for a new reservation, or why there are none: a one-line
// error. Processors of other reservations whose windows overlap this one's
// are never taken, nor those on nodes that are not UP. Of the rest, a count
// is chosen in this order, and given processors must all pass it: free
// ones; those of adaptive jobs (shrunk off them at the start); those of
// rigid jobs that end by the start by their time limit. A rigid job running
// past the start stands in the way unless ignore_jobs. Within each class
// the lowest numbers first, so a reservation keeps whole nodes and ranges.
struct reservation_choice {
  processor_set procs;
  std::string error;  // set when procs is empty
};
reservation_choice choose_reservation_procs(const scheduler& s, const reservation_ask& ask,
                                            const std::vector<advance_reservation>& others);

}  // namespace aqs::core
