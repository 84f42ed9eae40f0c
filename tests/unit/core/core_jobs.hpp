// core_jobs: the job requests the core's unit tests build by hand, written once.
#pragma once

#include <cstddef>

#include "core/scheduler.hpp"

namespace aqs::core::test {

// A rigid job of user "u" on `n` processors.
inline job_request rigid(job_id id, std::size_t n, double walltime = 100, double submit = 0) {
  job_request r;
  r.id = id;
  r.user = "u";
  r.min_pe = r.max_pe = n;
  r.walltime = walltime;
  r.submit_time = submit;
  return r;
}

// An adaptive job of user "u" that takes `min` to `max` processors.
inline job_request adaptive(job_id id, std::size_t min, std::size_t max, double walltime = 100, double submit = 0) {
  job_request r = rigid(id, min, walltime, submit);
  r.max_pe = max;
  r.adaptive = true;
  return r;
}

}  // namespace aqs::core::test
