// bench_requests: the job requests the in-process decision benchmarks feed
// the core (bench_policies, bench_scale), written once. Header only, on the
// include path of every benchmark.
#pragma once

#include <cstddef>

#include "core/job.hpp"

namespace aqs::bench {

// A rigid request of the benchmarks' user for `procs` processors, an hour
// long, submitted at `now`.
inline core::job_request rigid_request(core::job_id id, std::size_t procs, double now) {
  core::job_request r;
  r.id = id;
  r.user = "bench";
  r.min_pe = r.max_pe = procs;
  r.walltime = 3600;
  r.submit_time = now;
  return r;
}

}  // namespace aqs::bench
