// store_errors: the messages of the job store's errors that carry data.
#include "store/store_errors.hpp"

#include <string>

namespace aqs::store {

using core::job_state;

illegal_transition::illegal_transition(std::int64_t job, job_state from, job_state to)
    : store_error("illegal transition of job " + std::to_string(job) + ": " +
                  std::string(core::to_string(from)) + " -> " + std::string(core::to_string(to))),
      job_(job),
      from_(from),
      to_(to) {}

unexpected_state::unexpected_state(std::int64_t job, job_state expected, job_state actual)
    : store_error("job " + std::to_string(job) + " is " + std::string(core::to_string(actual)) +
                  ", not " + std::string(core::to_string(expected)) + " as expected"),
      actual_(actual) {}

}  // namespace aqs::store
