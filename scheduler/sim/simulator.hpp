// simulator: replays a workload through aqs::core with a discrete-event loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/priority.hpp"
#include "core/strategy.hpp"
#include "sim/events.hpp"
#include "sim/workload.hpp"

namespace aqs::sim {

struct sim_options {
  std::string policy = "easy";
  std::size_t procs_per_node = 1;  // cluster model: procs / procs_per_node nodes
  speedup_model speedup;
  double resize_cost = 0;  // seconds a job makes no progress per resize (acks come then)
  // The payoff policy's interval and default cost (strategy.hpp). Every
  // adaptive job declares resize_cost as its cost, its own speedup model
  // (sim_job::parallel_fraction, else `speedup`) and its preferred size.
  core::strategy_params params{};
  // Suspend, resume and range changes at given trace times (an events file).
  std::vector<trace_event> events;
  // Synthesised events, timed from each chosen job's own start (so they hit
  // it while it runs, whatever the policy): suspend_fraction of the jobs are
  // suspended once, after a uniformly drawn fraction of their expected run,
  // for suspend_duration seconds; range_change_fraction of the adaptive jobs
  // ask, at such a point, for a new range: (coin flip) min..min(machine,
  // 2*max) or max(1, min/2)..max(that, max/2). Drawn with `seed`.
  double suspend_fraction = 0;
  double suspend_duration = 0;
  double range_change_fraction = 0;
  std::uint64_t seed = 1;
  // Fair share (--fairshare): every trace user id is a user association
  // under root with one share; its usage is the processor-seconds its jobs
  // held, decayed with priority.half_life_s; before each decision every
  // queued job gets the multifactor priority (core/priority.hpp) of its
  // user's fair-share factor and its age. All weights 0 (the default): off,
  // and runs are exactly as without it.
  core::priority_weights priority{};
};

struct job_result {
  std::uint64_t id = 0;
  double submit = 0, start = 0, end = 0;
  std::size_t first_procs = 0;  // processors at start
  std::size_t min_pe = 0, max_pe = 0;
  bool adaptive = false;
  std::size_t resizes = 0;
  std::size_t suspensions = 0;
  double suspended_s = 0;  // time spent suspended (not running, holding nothing)
};

struct sim_result {
  std::vector<job_result> jobs;  // in workload order
  std::size_t procs = 0;
  double mean_wait = 0, mean_response = 0, mean_bsld = 0;
  double utilization = 0;  // held processor-seconds / (procs * (last end - first submit))
  double makespan = 0;     // last end - first submit
  std::size_t resizes = 0, ranks_moved = 0, decisions = 0;
  double wall_s = 0;  // filled in by the caller, which owns the clock
  // Events (file and synthesised): applied, and skipped by reason.
  std::size_t suspends = 0, resumes = 0, range_changes = 0;
  std::size_t deferred_suspends = 0;  // hit a job being resized: applied at its ack
  std::size_t resumed_at_end = 0;     // still suspended when nothing else was left to happen
  std::size_t unblocked_resumes = 0;  // times the simulator worked around the core's blocked resume (simulator.cpp)
  std::size_t events_skipped = 0;
  std::map<std::string, std::size_t> events_skipped_by_reason;
  double mean_suspended_s = 0;  // over all jobs
  // With fair share: how many times a queued job's priority changed, and
  // each trace user's decayed usage at the end (processor-seconds), by user id.
  std::size_t priority_changes = 0;
  std::map<long long, double> user_usage;
};

// Bounded slowdown with tau = 10 s: max(1, (wait + run) / max(run, 10)).
double bounded_slowdown(double wait, double run, double tau = 10.0);

// Runs the workload to completion. Equal-time events are handled as CQSim
// does: completions (and resize acknowledgements) first, then arrivals, then
// the suspend/resume/range events (in file order), then one scheduling
// decision. Adaptive jobs progress at speedup.relative_rate() of their logged
// run time per second. A suspended job makes no progress and holds no
// processors; resumed, it waits for the core's resume decision. Events the
// job cannot take (unknown job, not started, finished, ...) are skipped and
// counted by reason, never thrown. A job still suspended when nothing else
// is left to happen is resumed then (counted in resumed_at_end).
// Bounded slowdown uses the run time without the suspended time. Throws std::invalid_argument for an
// unknown policy (listing the known ones) or a machine that is not a whole
// number of nodes, std::logic_error if the workload cannot finish (a job no
// policy can ever place).
sim_result simulate(const workload& w, const sim_options& opt);

}  // namespace aqs::sim
