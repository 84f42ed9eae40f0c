// pg_transitions: job transitions as statements inside the caller's
// transaction (pg_job_store runs them through pg_session::run).
#pragma once

#include <optional>
#include <vector>

#include <pqxx/pqxx>

#include "core/job_state.hpp"
#include "store/records.hpp"

namespace aqs::store {

// One transition: lock the row, check, update the row and append the event.
// `before` receives the state the job was in. Throws like
// job_store::transition.
history_event apply_transition(pqxx::work& tx, const job_transition& t, std::optional<core::job_state>& before);

// Several transitions of different jobs, in two round trips whatever their
// number. `before[i]` receives the state job i was in.
std::vector<history_event> apply_transitions(pqxx::work& tx, const std::vector<job_transition>& ts,
                                         std::vector<std::optional<core::job_state>>& before);

// After an unknown COMMIT: the event if the transition landed, nullopt if
// the job is still where the attempt found it (`before`); store_unavailable
// if that cannot be told.
std::optional<history_event> transition_landed(pqxx::work& tx, const job_transition& t,
                                           std::optional<core::job_state> before);

}  // namespace aqs::store
