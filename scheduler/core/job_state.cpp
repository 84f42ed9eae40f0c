// job_state: names and the transition table.
#include "core/job_state.hpp"

#include <cstddef>

namespace aqs::core {

namespace {

// Each state's name. The switch has no default: a new enumerator is a
// compile error here (-Wswitch, an error with -Werror) until it has a name.
// Values outside the enum (from a cast) have none.
constexpr std::string_view name_of(job_state s) noexcept {
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
    case job_state::out_of_memory: return "OUT_OF_MEMORY";
  }
  return {};
}

// k_all_job_states lists every enumerator, each once, in the enum's order:
// the enumerators are the values 0.. that have a name.
constexpr bool all_states_listed() {
  std::size_t named = 0;
  for (unsigned v = 0; v < 256; ++v) {
    if (!name_of(static_cast<job_state>(v)).empty()) ++named;
  }
  if (named != k_all_job_states.size()) return false;
  for (std::size_t i = 0; i < k_all_job_states.size(); ++i) {
    if (static_cast<std::size_t>(k_all_job_states[i]) != i) return false;
  }
  return true;
}
static_assert(all_states_listed(), "core::k_all_job_states must list every job_state once, in the enum's order");

}  // namespace

std::string_view to_string(job_state s) noexcept {
  const std::string_view n = name_of(s);
  return n.empty() ? "UNKNOWN" : n;
}

std::optional<job_state> parse_job_state(std::string_view text) noexcept {
  for (const job_state s : k_all_job_states) {
    if (name_of(s) == text) return s;
  }
  return std::nullopt;
}

// No default: a new state must be said final or not here.
bool is_final(job_state s) noexcept {
  switch (s) {
    case job_state::completed:
    case job_state::failed:
    case job_state::cancelled:
    case job_state::timeout:
    case job_state::node_fail:
    case job_state::out_of_memory:
      return true;
    case job_state::pending:
    case job_state::running:
    case job_state::resizing:
    case job_state::suspended:
      return false;
  }
  return false;
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
