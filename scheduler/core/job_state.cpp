// job_state: names and the transition table.
#include "core/job_state.hpp"

#include "core/enum_names.hpp"

namespace aqs::core {

namespace {
constexpr enum_table<job_state, 10> k_names = {{
    {job_state::pending, "PENDING"},
    {job_state::running, "RUNNING"},
    {job_state::resizing, "RESIZING"},
    {job_state::suspended, "SUSPENDED"},
    {job_state::completed, "COMPLETED"},
    {job_state::failed, "FAILED"},
    {job_state::cancelled, "CANCELLED"},
    {job_state::timeout, "TIMEOUT"},
    {job_state::node_fail, "NODE_FAIL"},
    {job_state::out_of_memory, "OUT_OF_MEMORY"},
}};
}  // namespace

std::string_view to_string(job_state s) noexcept { return name_in(k_names, s, "UNKNOWN"); }

std::optional<job_state> parse_job_state(std::string_view text) noexcept { return value_in(k_names, text); }

bool is_final(job_state s) noexcept {
  switch (s) {
    case job_state::completed:
    case job_state::failed:
    case job_state::cancelled:
    case job_state::timeout:
    case job_state::node_fail:
    case job_state::out_of_memory:
      return true;
    default:
      return false;
  }
}

bool holds_processors(job_state s) noexcept {
  return s == job_state::running || s == job_state::resizing || s == job_state::suspended;
}

bool is_legal_transition(job_state from, job_state to) noexcept {
  using enum job_state;
  switch (from) {
    case pending:
      return to == running || to == cancelled || to == failed;
    case running:
      return to == resizing || to == suspended || to == completed || to == failed ||
             to == cancelled || to == timeout || to == node_fail || to == out_of_memory ||
             to == pending;  // requeued (fctl requeue)
    case resizing:
      return to == running || to == completed || to == failed || to == cancelled ||
             to == timeout || to == node_fail || to == out_of_memory || to == pending;
    case suspended:
      return to == running || to == failed || to == cancelled || to == timeout ||
             to == node_fail || to == out_of_memory || to == pending;
    case node_fail:
      return to == pending;
    case completed:
    case failed:
    case cancelled:
    case timeout:
    case out_of_memory:
      return false;
  }
  return false;
}

}  // namespace aqs::core
