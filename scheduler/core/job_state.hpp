// job_state: the states of a job and which transitions between them are legal.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace aqs::core {

enum class job_state : unsigned char {
  pending,
  running,
  resizing,
  suspended,
  completed,
  failed,
  cancelled,
  timeout,
  node_fail,
  out_of_memory,  // killed for using more memory than it asked for (--mem)
};

inline constexpr std::array<job_state, 10> k_all_job_states = {
    job_state::pending,   job_state::running,   job_state::resizing,
    job_state::suspended, job_state::completed, job_state::failed,
    job_state::cancelled, job_state::timeout,   job_state::node_fail,
    job_state::out_of_memory};

// "PENDING", "RUNNING", ... as stored, shown by fjobs and sent on the wire.
std::string_view to_string(job_state s) noexcept;
// Inverse of to_string (exact, upper case); nullopt for anything else.
std::optional<job_state> parse_job_state(std::string_view text) noexcept;

// A job in a final state never changes again (NODE_FAIL is final unless the
// job asked to be requeued, which is the one way back to PENDING).
bool is_final(job_state s) noexcept;
// Holds processors: RUNNING, RESIZING, SUSPENDED (a suspended job keeps its
// processors reserved but not busy).
bool holds_processors(job_state s) noexcept;

// The legal transitions:
//   PENDING   -> RUNNING | CANCELLED | FAILED (e.g. a dependency failed)
//   RUNNING   -> RESIZING | SUSPENDED | COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY
//   RESIZING  -> RUNNING | COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY
//   SUSPENDED -> RUNNING | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY
//   NODE_FAIL -> PENDING (requeue)
bool is_legal_transition(job_state from, job_state to) noexcept;

}  // namespace aqs::core
