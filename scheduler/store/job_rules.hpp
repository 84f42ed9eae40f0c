// job_rules: the checks and the state-machine arithmetic every job_store
// implementation applies, so that they refuse and write the same things.
#pragma once

#include <optional>
#include <string>

#include "core/job_state.hpp"
#include "store/records.hpp"

namespace aqs::store {

// Throws invalid_job, naming the field, for a request the database could
// never accept (bad text, processor counts, uid, walltime, dependencies).
void check_request(const job_submission& q);
// A fresh submit_token for a request that came without one. Tokens the store
// makes start "aqs-" (clients send bare hex).
std::string make_submit_token();

// Checks of a transition that need no stored state: the text and the exit
// status. Throws invalid_job.
void check_transition(const job_transition& t);

// Checks a control_change against the job as stored (its state, kind and
// range). Throws invalid_job.
void check_update(const control_change& u, core::job_state state, bool adaptive, std::int32_t min_pe,
                  std::int32_t max_pe);

// Throws invalid_job for a node request that can never be registered.
void check_node_request(const node_request& q);

// What one transition writes, worked out from the job's current row. Maps
// are processor_set::to_string() text, as stored.
struct planned_transition {
  core::job_state from = core::job_state::pending;
  std::string old_procs;
  std::string procs;                        // the job's map afterwards
  std::optional<std::string> resize_procs;  // the asked-for map afterwards (RESIZING only)
  std::string event_new;                    // the event's new map
};

// Checks the transition against the job's current state, map and asked-for
// map, and works out the new row and event. Throws like
// job_store::transition (unexpected_state, illegal_transition, invalid_job).
planned_transition plan_transition(const job_transition& t, core::job_state from, const std::string& old_procs,
                                   const std::optional<std::string>& old_resize);

// The event a planned transition appends, with the id and time the store
// gave it.
history_event event_of(const job_transition& t, const planned_transition& p, std::int64_t id, time_point time);

// The states a recovery or a live listing returns.
bool is_live(core::job_state s) noexcept;

}  // namespace aqs::store
