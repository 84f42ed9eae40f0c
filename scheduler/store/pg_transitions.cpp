// pg_transitions: the SQL side of job transitions: lock the rows, plan with
// job_rules, write rows and events, and tell after an unknown COMMIT whether
// they landed.
#include "store/pg_transitions.hpp"

#include <string>
#include <unordered_map>
#include <utility>

#include "store/job_rules.hpp"
#include "store/pg_rows.hpp"
#include "store/sql_text.hpp"
#include "store/store_errors.hpp"

namespace aqs::store {

using core::job_state;


// One transition inside the caller's transaction: lock, check, update the
// row and append the event. `before` receives the state the job was in.
history_event apply_transition(pqxx::work& tx, const job_transition& t, std::optional<job_state>& before) {
  const pqxx::result cur = tx.exec_prepared("lock_job", t.job_id);
  if (cur.empty()) throw not_found("no job " + std::to_string(t.job_id));
  const pqxx::row row = cur[0];
  before = state_of(row["state"]);
  const planned_transition p =
      plan_transition(t, *before, row["procs"].as<std::string>(), opt_text(row["resize_procs"]));
  const bool clear_start = t.to == job_state::pending;
  const bool set_start = t.to == job_state::running;
  const bool set_end = core::is_final(t.to);
  const pqxx::result ev = tx.exec_prepared(
      "apply_transition", t.job_id, std::string(core::to_string(t.to)), p.procs, p.resize_procs,
      clear_start, set_start, set_end, t.exit_code, t.term_signal, std::string(core::to_string(p.from)),
      p.old_procs, p.event_new, t.reason);
  if (ev.size() != 1) throw store_error("job " + std::to_string(t.job_id) + " vanished during its transition");
  return event_of(t, p, ev[0]["id"].as<std::int64_t>(), micros(ev[0]["time"]));
}

namespace {

void append_optional_int(std::string& out, const std::optional<std::int32_t>& v) {
  out += v ? std::to_string(*v) : std::string("null");
}

}  // namespace

// Several transitions of different jobs inside the caller's transaction, in
// two round trips whatever their number. `before[i]` receives the state job
// i was in.
std::vector<history_event> apply_transitions(pqxx::work& tx, const std::vector<job_transition>& ts,
                                         std::vector<std::optional<job_state>>& before) {
  std::string ids = "{";
  for (std::size_t i = 0; i < ts.size(); ++i) ids += (i ? "," : "") + std::to_string(ts[i].job_id);
  ids += "}";
  const pqxx::result rows = tx.exec_prepared("lock_jobs", ids);
  std::unordered_map<std::int64_t, std::size_t> row_of;
  for (std::size_t r = 0; r < rows.size(); ++r) row_of.emplace(rows[r]["id"].as<std::int64_t>(), r);
  std::vector<planned_transition> plans;
  plans.reserve(ts.size());
  std::string json = "[";
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const job_transition& t = ts[i];
    auto found = row_of.find(t.job_id);
    if (found == row_of.end()) throw not_found("no job " + std::to_string(t.job_id));
    const pqxx::row row = rows[found->second];
    before[i] = state_of(row["state"]);
    plans.push_back(plan_transition(t, *before[i], row["procs"].as<std::string>(), opt_text(row["resize_procs"])));
    const planned_transition& p = plans.back();
    if (i) json.push_back(',');
    json += "{\"ord\":" + std::to_string(i) + ",\"job_id\":" + std::to_string(t.job_id) + ",\"state\":";
    append_json_string(json, std::string(core::to_string(t.to)));
    json += ",\"procs\":";
    append_json_string(json, p.procs);
    json += ",\"resize_procs\":";
    if (p.resize_procs) {
      append_json_string(json, *p.resize_procs);
    } else {
      json += "null";
    }
    json += std::string(",\"clear_start\":") + (t.to == job_state::pending ? "true" : "false");
    json += std::string(",\"set_start\":") + (t.to == job_state::running ? "true" : "false");
    json += std::string(",\"set_end\":") + (core::is_final(t.to) ? "true" : "false");
    json += ",\"exit_code\":";
    append_optional_int(json, t.exit_code);
    json += ",\"term_signal\":";
    append_optional_int(json, t.term_signal);
    json += ",\"old_state\":";
    append_json_string(json, std::string(core::to_string(p.from)));
    json += ",\"old_procs\":";
    append_json_string(json, p.old_procs);
    json += ",\"new_procs\":";
    append_json_string(json, p.event_new);
    json += ",\"reason\":";
    append_json_string(json, t.reason);
    json += "}";
  }
  json += "]";
  const pqxx::result ev = tx.exec_prepared("apply_transitions", json);
  if (ev.size() != ts.size()) throw store_error("a job vanished during a batch of transitions");
  std::unordered_map<std::int64_t, std::pair<std::int64_t, time_point>> by_job;
  for (const auto& r : ev) {
    by_job.emplace(r["job_id"].as<std::int64_t>(), std::make_pair(r["id"].as<std::int64_t>(), micros(r["time"])));
  }
  std::vector<history_event> events;
  events.reserve(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto& [id, time] = by_job.at(ts[i].job_id);
    events.push_back(event_of(ts[i], plans[i], id, time));
  }
  return events;
}

// After an unknown COMMIT: the event if the transition landed, nullopt if
// the job is still where the attempt found it; anything else cannot be told.
std::optional<history_event> transition_landed(pqxx::work& tx, const job_transition& t, std::optional<job_state> before) {
  // Only this store moves jobs: the job is either still where the attempt
  // found it (not landed: run again, which re-checks) or in the target state
  // with our event last.
  const pqxx::result cur = tx.exec_prepared("job_state", t.job_id);
  if (cur.empty()) throw not_found("no job " + std::to_string(t.job_id));
  const job_state now = state_of(cur[0]["state"]);
  if (before && now == *before) return std::nullopt;
  if (now == t.to) {
    const pqxx::result last = tx.exec_prepared("last_event", t.job_id);
    if (!last.empty()) {
      history_event e = read_events(last).front();
      if (e.new_state == t.to) return e;
    }
  }
  throw store_unavailable("lost the connection while committing job " + std::to_string(t.job_id) +
                          "'s transition and cannot tell whether it landed (job is now " +
                          std::string(core::to_string(now)) + ")");
}

}  // namespace aqs::store
