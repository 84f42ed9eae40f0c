// job_rules: request checks and transition planning shared by the job stores.
#include "store/job_rules.hpp"

#include "protocol/auth.hpp"
#include "store/sql_text.hpp"
#include "store/store_errors.hpp"

namespace aqs::store {

using core::job_state;

void check_request(const job_submission& q) {
  check_text("submit_token", q.submit_token);
  check_text("user_name", q.user_name);
  check_text("name", q.name);
  check_text("script", q.script);
  check_text("workdir", q.workdir);
  check_text("stdout_pattern", q.stdout_pattern);
  check_text("stderr_pattern", q.stderr_pattern);
  for (const auto& a : q.argv) check_text("argv", a);
  for (const auto& e : q.environment) check_text("environment", e);
  if (q.user_name.empty()) throw invalid_job("user_name is empty");
  if (q.uid < 0) throw invalid_job("uid is negative");
  if (q.gid < 0) throw invalid_job("gid is negative");
  if (q.min_pe < 1) throw invalid_job("min_pe must be at least 1, not " + std::to_string(q.min_pe));
  if (q.max_pe < q.min_pe) {
    throw invalid_job("max_pe " + std::to_string(q.max_pe) + " is less than min_pe " + std::to_string(q.min_pe));
  }
  if (!q.adaptive && q.max_pe != q.min_pe) throw invalid_job("a rigid (not adaptive) job needs min_pe == max_pe");
  if (q.walltime_s && *q.walltime_s <= 0) throw invalid_job("walltime must be positive");
  for (auto d : q.dependencies) {
    if (d <= 0) throw invalid_job("dependency on job " + std::to_string(d) + ", which cannot exist");
  }
}

std::string make_submit_token() { return "aqs-" + protocol::random_hex(16); }

void check_node_request(const node_request& q) {
  check_text("node name", q.name);
  check_text("node address", q.address);
  check_text("node cpus", q.cpus);
  if (q.name.empty()) throw invalid_job("node name is empty");
  if (q.nprocs < 1) throw invalid_job("node " + q.name + " must have at least 1 processor");
  if (q.memory_mb < 0 || q.gpus < 0) throw invalid_job("node " + q.name + ": negative memory or GPUs");
}

void check_transition(const job_transition& t) {
  check_text("reason", t.reason);
  if ((t.exit_code || t.term_signal) && !core::is_final(t.to)) {
    throw invalid_job("exit status given for job " + std::to_string(t.job_id) + " entering " +
                      std::string(core::to_string(t.to)) + ", which is not a final state");
  }
  if (t.term_signal && *t.term_signal <= 0) throw invalid_job("term_signal must be positive");
}

planned_transition plan_transition(const job_transition& t, job_state from, const std::string& old_procs,
                                   const std::optional<std::string>& old_resize) {
  if (t.from && *t.from != from) throw unexpected_state(t.job_id, *t.from, from);
  if (!core::is_legal_transition(from, t.to)) throw illegal_transition(t.job_id, from, t.to);

  std::string procs;                        // jobs.procs afterwards
  std::optional<std::string> resize_procs;  // jobs.resize_procs afterwards
  std::string event_new;                    // the event's new map
  const std::string given = t.procs ? t.procs->to_string() : std::string();
  if (core::holds_processors(t.to)) {
    if (t.to == job_state::resizing) {
      if (given.find('1') == std::string::npos) {
        throw invalid_job("resizing job " + std::to_string(t.job_id) + " needs the new map");
      }
      procs = old_procs;  // still held until the job acknowledges
      resize_procs = given;
      event_new = given;
    } else {
      if (t.procs) {
        procs = given;
      } else if (from == job_state::resizing && old_resize) {
        procs = *old_resize;
      } else {
        procs = old_procs;
      }
      if (procs.find('1') == std::string::npos) {
        throw invalid_job("job " + std::to_string(t.job_id) + " entering " +
                          std::string(core::to_string(t.to)) + " needs a non-empty processor map");
      }
      event_new = procs;
    }
  } else if (t.procs && t.procs->any()) {
    throw invalid_job("job " + std::to_string(t.job_id) + " entering " +
                      std::string(core::to_string(t.to)) + " holds no processors: no map allowed");
  }

  return planned_transition{from, old_procs, std::move(procs), std::move(resize_procs), std::move(event_new)};
}

history_event event_of(const job_transition& t, const planned_transition& p, std::int64_t id, time_point time) {
  history_event e;
  e.id = id;
  e.job_id = t.job_id;
  e.time = time;
  e.old_state = p.from;
  e.new_state = t.to;
  e.old_procs = core::processor_set::from_string(p.old_procs);
  e.new_procs = core::processor_set::from_string(p.event_new);
  e.reason = t.reason;
  e.exit_code = t.exit_code;
  e.term_signal = t.term_signal;
  return e;
}

void check_update(const control_change& u, job_state state, bool adaptive, std::int32_t min_pe, std::int32_t max_pe) {
  const std::string job = "job " + std::to_string(u.job_id);
  if (u.reason.empty()) throw invalid_job(job + ": an update needs a reason");
  check_text("reason", u.reason);
  if (core::is_final(state)) throw invalid_job(job + " has ended (" + std::string(core::to_string(state)) + ")");
  if (u.control) {
    const std::string& c = *u.control;
    const bool claim = claimed_epoch(c).has_value();
    if (!c.empty() && c != "held-user" && c != "held-admin" && c != "resume" && !claim) {
      throw invalid_job(job + ": unknown control '" + c + "'");
    }
    if (claim && state != job_state::resizing) throw invalid_job(job + " is not resizing");
    if ((c == "held-user" || c == "held-admin") && state != job_state::pending) {
      throw invalid_job(job + " is not pending");
    }
    if (c == "resume" && state != job_state::suspended) throw invalid_job(job + " is not suspended");
  }
  const std::int32_t lo = u.min_pe.value_or(min_pe), hi = u.max_pe.value_or(max_pe);
  if (lo < 1 || hi < lo) throw invalid_job(job + ": need 1 <= min <= max");
  if (!adaptive && lo != hi) throw invalid_job(job + " is rigid: its min and max stay equal");
  if (u.walltime_s && *u.walltime_s < 0) throw invalid_job(job + ": a time limit cannot be negative");
}

bool is_live(job_state s) noexcept {
  return s == job_state::pending || s == job_state::running || s == job_state::resizing ||
         s == job_state::suspended;
}

}  // namespace aqs::store
