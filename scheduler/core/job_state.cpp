// job_state: names and the transition table.
#include "core/job_state.hpp"

namespace aqs::core {

std::string_view to_string(job_state s) noexcept {
  switch (s) {
    case job_state::pending: return "PENDING";
    case job_state::running: return "RUNNING";
    case job_state::resizing: return "RESIZING";
    case job_state::suspended: return "SUSPENDED";
    case job_state::completed: return "COMPLETED";
    case job_state::failed: return "FAILED";
    case job_state::cancelled: return "CANCELLED";
    case job_state::timeout: return "TIMEOUT";
    case job_state::node_fail: return "NODE_FAIL";
  }
  return "UNKNOWN";
}

std::optional<job_state> parse_job_state(std::string_view text) noexcept {
  for (job_state s : k_all_job_states) {
    if (to_string(s) == text) return s;
  }
  return std::nullopt;
}

bool is_final(job_state s) noexcept {
  switch (s) {
    case job_state::completed:
    case job_state::failed:
    case job_state::cancelled:
    case job_state::timeout:
    case job_state::node_fail:
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
             to == cancelled || to == timeout || to == node_fail;
    case resizing:
      return to == running || to == completed || to == failed || to == cancelled ||
             to == timeout || to == node_fail;
    case suspended:
      return to == running || to == failed || to == cancelled || to == timeout ||
             to == node_fail;
    case node_fail:
      return to == pending;
    case completed:
    case failed:
    case cancelled:
    case timeout:
      return false;
  }
  return false;
}

}  // namespace aqs::core
