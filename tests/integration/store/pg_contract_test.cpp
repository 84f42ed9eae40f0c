// The job_store contract (tests/unit/store/job_store_contract.hpp) run
// against pg_job_store, each case on a fresh database.
#include "job_store_contract.hpp"

#include "store/pg_job_store.hpp"
#include "store_test_util.hpp"
#include "test_pg.hpp"

namespace {

struct pg_store {
  aqs::store::job_store& store() { return store_; }
  aqs::test::test_database db_;
  aqs::store::pg_job_store store_{aqs::test::options_for(db_.conninfo())};
};

}  // namespace

TYPE_TO_STRING(pg_store);
AQS_JOB_STORE_CONTRACT(pg_store);
