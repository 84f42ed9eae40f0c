// store_test_util: small helpers shared by the job store's integration tests.
#pragma once

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <pqxx/pqxx>

#include <doctest/doctest.h>

#include "store/pg_job_store.hpp"

#include "store_samples.hpp"
#include "temp_dir.hpp"
#include "test_pg.hpp"

namespace aqs::test {

inline store::job_submission simple_request(std::string user = "alice", int procs = 2) {
  return sample_request(std::move(user), procs);
}

inline store::pg_job_store_options options_for(std::string conninfo) {
  store::pg_job_store_options o;
  o.conninfo = std::move(conninfo);
  return o;
}

// A store on a database of its own: the fixture of most store tests.
struct fresh_store {
  test_database db;
  store::pg_job_store store{options_for(db.conninfo())};
};

// simple_request() with `change` made to it.
template <class Change>
store::job_submission changed_request(Change change) {
  auto q = simple_request();
  change(q);
  return q;
}

// Faults at COMMIT, each fired once when armed, for a store on `conninfo`
// with one committer (so the write a test sends is the one hit): the next
// COMMIT's connection terminated from outside before it lands, or the next
// COMMIT landing with its answer lost.
struct commit_faults {
  std::string conninfo;
  std::atomic<bool> cut_next{false};
  std::atomic<bool> lose_next{false};
  std::atomic<int> commits{0};  // COMMITs attempted, cut off or not

  store::pg_job_store_options options() const {
    auto o = options_for(conninfo);
    o.committers = 1;
    return o;
  }
  store::pg_job_store::test_hooks hooks() {
    store::pg_job_store::test_hooks h;
    h.before_commit = [this](int backend) {
      ++commits;
      if (!cut_next.exchange(false)) return;
      pqxx::connection c(conninfo);
      pqxx::nontransaction tx(c);
      tx.exec_params("SELECT pg_terminate_backend($1, 10000)", backend);
    };
    h.fake_in_doubt_after_commit = [this] { return lose_next.exchange(false); };
    return h;
  }
};

// A store on a database of its own, with commit_faults to arm.
struct faulty_store {
  test_database db;
  commit_faults faults{db.conninfo()};
  store::pg_job_store store{faults.options(), faults.hooks()};
};

}  // namespace aqs::test
