// store_test_util: small helpers shared by the job store's integration tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include <doctest/doctest.h>

#include "store/pg_job_store.hpp"

#include "store_samples.hpp"
#include "temp_dir.hpp"

namespace aqs::test {

inline store::job_request simple_request(std::string user = "alice", int procs = 2) {
  return sample_request(std::move(user), procs);
}

inline store::pg_job_store_options options_for(std::string conninfo) {
  store::pg_job_store_options o;
  o.conninfo = std::move(conninfo);
  return o;
}

}  // namespace aqs::test
