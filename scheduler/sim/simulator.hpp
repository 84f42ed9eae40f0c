// simulator: replays a workload through aqs::core with a discrete-event loop.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/workload.hpp"

namespace aqs::sim {

struct sim_options {
  std::string policy = "easy";
  std::size_t procs_per_node = 1;  // cluster model: procs / procs_per_node nodes
  speedup_model speedup;
  double resize_cost = 0;  // seconds a job makes no progress per resize (acks come then)
};

struct job_result {
  std::uint64_t id = 0;
  double submit = 0, start = 0, end = 0;
  std::size_t first_procs = 0;  // processors at start
  std::size_t min_pe = 0, max_pe = 0;
  bool adaptive = false;
  std::size_t resizes = 0;
};

struct sim_result {
  std::vector<job_result> jobs;  // in workload order
  std::size_t procs = 0;
  double mean_wait = 0, mean_response = 0, mean_bsld = 0;
  double utilization = 0;  // held processor-seconds / (procs * (last end - first submit))
  double makespan = 0;     // last end - first submit
  std::size_t resizes = 0, ranks_moved = 0, decisions = 0;
  double wall_s = 0;  // filled in by the caller, which owns the clock
};

// Bounded slowdown with tau = 10 s: max(1, (wait + run) / max(run, 10)).
double bounded_slowdown(double wait, double run, double tau = 10.0);

// Runs the workload to completion. Equal-time events are handled as CQSim
// does: completions (and resize acknowledgements) first, then arrivals, then
// one scheduling decision. Adaptive jobs progress at speedup.relative_rate()
// of their logged run time per second. Throws std::invalid_argument for an
// unknown policy (listing the known ones) or a machine that is not a whole
// number of nodes, std::logic_error if the workload cannot finish (a job no
// policy can ever place).
sim_result simulate(const workload& w, const sim_options& opt);

}  // namespace aqs::sim
