// store_samples: the job request store tests submit when its details do not
// matter (the memory store's unit tests and the PostgreSQL store's share it).
#pragma once

#include <string>

#include "store/records.hpp"

namespace aqs::test {

inline store::job_submission sample_request(std::string user = "alice", int procs = 2) {
  store::job_submission q;
  q.user_name = std::move(user);
  q.uid = 1000;
  q.gid = 1000;
  q.name = "job";
  q.script = "#!/bin/sh\nhostname\n";
  q.workdir = "/home/" + q.user_name;
  q.min_pe = procs;
  q.max_pe = procs;
  return q;
}

}  // namespace aqs::test
