// sim_jobs: the jobs, workloads and trace events the simulator's unit tests
// build by hand, written once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/simulator.hpp"

namespace aqs::sim::test {

// A rigid job of `size` processors; its estimate is its run time unless given.
inline sim_job rigid(std::uint64_t id, double submit, double run, std::size_t size, double estimate = -1) {
  sim_job j;
  j.id = id;
  j.submit = submit;
  j.runtime = run;
  j.estimate = estimate < 0 ? run : estimate;
  j.size = j.min_pe = j.max_pe = size;
  return j;
}

// An adaptive job that asks for `size` and takes `min` to `max`.
inline sim_job adaptive(std::uint64_t id, double submit, double run, std::size_t size, std::size_t min,
                        std::size_t max) {
  sim_job j = rigid(id, submit, run, size);
  j.adaptive = true;
  j.min_pe = min;
  j.max_pe = max;
  return j;
}

// A machine of `procs` processors and these jobs.
inline workload on(std::size_t procs, std::vector<sim_job> jobs) {
  workload w;
  w.procs = procs;
  w.jobs = std::move(jobs);
  return w;
}

// Event `k` of `job` at `t` (a range change: to `min`-`max`).
inline trace_event ev(double t, std::uint64_t job, trace_event::kind k, std::size_t min = 0, std::size_t max = 0) {
  return {.time = t, .job = job, .what = k, .min_pe = min, .max_pe = max};
}

// The options of a run under `policy`, with `events` replayed and `cost`
// seconds per resize.
inline sim_options with(const char* policy, std::vector<trace_event> events = {}, double cost = 0) {
  sim_options o;
  o.policy = policy;
  o.resize_cost = cost;
  o.events = std::move(events);
  return o;
}

}  // namespace aqs::sim::test
