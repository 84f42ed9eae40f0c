// The job_store contract run against memory_job_store.
#include "job_store_contract.hpp"

#include "store/memory_job_store.hpp"

namespace {

struct memory_store {
  aqs::store::job_store& store() { return store_; }
  aqs::store::memory_job_store store_;
};

}  // namespace

TYPE_TO_STRING(memory_store);
AQS_JOB_STORE_CONTRACT(memory_store);
