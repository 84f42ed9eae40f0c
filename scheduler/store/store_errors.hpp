// store_errors: what the job store throws, one type per case callers handle.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/job_state.hpp"

namespace aqs::store {

// Base of every job store error below.
class store_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A request the database could never accept: a NUL byte or invalid UTF-8 in
// a text field, min_pe < 1, max_pe < min_pe, a rigid job with min != max, ...
// The message names the field. Nothing was written.
class invalid_job : public store_error {
public:
  using store_error::store_error;
};

// No job (or node) with that id/name.
class not_found : public store_error {
public:
  using store_error::store_error;
};

// The transition is not in core::is_legal_transition's table. Nothing was
// written.
class illegal_transition : public store_error {
public:
  illegal_transition(std::int64_t job, core::job_state from, core::job_state to);
  std::int64_t job() const noexcept { return job_; }
  core::job_state from() const noexcept { return from_; }
  core::job_state to() const noexcept { return to_; }

private:
  std::int64_t job_;
  core::job_state from_, to_;
};

// job_transition::from was given and the job is in another state (someone
// else moved it). Nothing was written.
class unexpected_state : public store_error {
public:
  unexpected_state(std::int64_t job, core::job_state expected, core::job_state actual);
  core::job_state actual() const noexcept { return actual_; }

private:
  core::job_state actual_;
};

// The database stayed unreachable for longer than the store's reconnect
// budget, or an operation's outcome could not be established. The operation
// may be retried later; for submit, with the same submit_token.
class store_unavailable : public store_error {
public:
  using store_error::store_error;
};

}  // namespace aqs::store
