// kill: fkill's cancel requests: pending jobs end at once, running ones are
// signalled through their node agent and end when it reports them.
#include <csignal>

#include <boost/asio/post.hpp>

#include "daemon/controller.hpp"
#include "daemon_base/permissions.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

namespace asio = boost::asio;
using core::job_state;

void controller::send_kill(std::int64_t id, int sig, std::chrono::seconds grace, bool escalate) {
  const job_entry* e = jobs().find(id);
  if (e == nullptr || !e->host) return;
  protocol::kill k;
  k.id = nodes_.new_request_id();
  k.job_id = id;
  k.signal = sig;
  k.grace_s = grace.count();
  k.escalate = escalate;  // fkill --signal: that signal only
  nodes_.send(*e->host, std::move(k));
}

void controller::kill_uncertain(std::int64_t id, std::string reason) {
  send_kill(id, SIGKILL, std::chrono::seconds(0), true);
  end_job(id, job_state::failed, std::nullopt, SIGKILL, std::move(reason));
}

void controller::handle_cancel(const conn_ptr& c, const protocol::cancel& m) {
  const peer_info& p = c->peer();
  const std::string caller = p.uid ? user_name_of(*p.uid) : "root";
  std::vector<std::int64_t> targets;
  // An array's id names all its live tasks (scancel's way).
  for (const std::int64_t id : m.job_ids) {
    const auto tasks = intake_.arrays().tasks_of(id);
    if (tasks.empty()) {
      targets.push_back(id);
    } else {
      targets.insert(targets.end(), tasks.begin(), tasks.end());
    }
    // Its compact record too, once it moved off the array's id: the tasks
    // not yet split off.
    if (const auto* rec = intake_.arrays().find_compact(id); rec != nullptr && rec->record != id) targets.push_back(rec->record);
  }
  if (targets.empty() && m.user && m.array_tasks.empty()) targets = jobs().of_user(*m.user);
  protocol::cancel_reply reply;
  auto& cancelled = reply.cancelled;
  auto& failed = reply.failed;
  protocol::error_code first_code = protocol::error_code::not_found;
  std::string first_message;
  auto refuse = [&](std::int64_t id, protocol::error_code code, std::string msg) {
    if (failed.empty()) {
      first_code = code;
      first_message = msg;
    }
    failed.push_back({id, code, std::move(msg)});
  };
  // Tasks still in their array's compact record leave it (fkill 123_7).
  for (const std::string& t : m.array_tasks) {
    const auto us = t.find('_');
    std::int64_t array = 0, index = -1;
    try {
      if (us == std::string::npos) throw std::invalid_argument(t);
      array = std::stoll(t.substr(0, us));
      index = std::stoll(t.substr(us + 1));
    } catch (const std::exception&) {
      refuse(0, protocol::error_code::bad_request, "'" + t + "' is not ARRAY_INDEX");
      continue;
    }
    array_table::compact* rec = intake_.arrays().find_compact(array);
    job_entry* r = rec != nullptr ? jobs().find(rec->record) : nullptr;
    if (r == nullptr || r->cancel_requested || !rec->rest.contains(index)) {
      // Split off meanwhile: the live task itself.
      bool split = false;
      for (const std::int64_t id : intake_.arrays().tasks_of(array)) {
        const job_entry* e = jobs().find(id);
        if (e != nullptr && e->geometry && e->geometry->array_task_id == index) {
          targets.push_back(id);
          split = true;
        }
      }
      if (!split) refuse(array, protocol::error_code::not_found, "no pending or running task " + t);
      continue;
    }
    if (!may_act_on_job(p, r->uid)) {
      refuse(array, protocol::error_code::permission_denied,
             "array " + std::to_string(array) + " belongs to " + r->user + ", not to " + caller);
      continue;
    }
    if (rec->splitting) {
      refuse(array, protocol::error_code::invalid_state, "task " + t + " is being split off its array now: try again");
      continue;
    }
    logging::info("task {} cancelled by {} before it was split off its array", t, caller);
    rec->rest.erase(index);
    r->charged_jobs -= 1;
    intake_.ledger().release(r->uid, 1, 0);
    if (rec->rest.empty()) {
      // Its last index: the record itself ends.
      r->cancel_requested = true;
      intake_.deps().release(rec->record);
      pipe_.transition(rec->record, job_state::cancelled, std::nullopt, "cancelled by " + caller);
      pipe_.after_commit([this, id = rec->record] { on_final(id, job_state::cancelled); });
      continue;
    }
    r->geometry->array = rec->rest.to_string() + (rec->max_running > 0 ? "%" + std::to_string(rec->max_running) : "");
    // On the writer before this request's commit (the reply waits for it),
    // in order with the splits.
    store::array_split shrink;
    shrink.array_id = rec->record;
    shrink.rest_geometry = protocol::geometry_json(*r->geometry);
    pipe_.on_writer([this, shrink = std::move(shrink)] {
      try {
        pipe_.store().split_array(shrink);
      } catch (const std::exception& e) {
        logging::warn("array record {}: a task's cancel was not written: {}", shrink.array_id, e.what());
      }
    });
  }
  for (std::int64_t id : targets) {
    job_entry* found = jobs().find(id);
    if (found == nullptr) {
      if (const final_info* f = jobs().finished(id)) {
        refuse(id, protocol::error_code::invalid_state,
               "job " + std::to_string(id) + " has already ended (" + std::string(core::to_string(f->state)) + ")");
      } else {
        refuse(id, protocol::error_code::not_found, "no pending or running job " + std::to_string(id));
      }
      continue;
    }
    job_entry& e = *found;
    if (m.user && e.user != *m.user) continue;  // the listed jobs that user owns
    if (!may_act_on_job(p, e.uid)) {
      refuse(id, protocol::error_code::permission_denied,
             "job " + std::to_string(id) + " belongs to " + e.user + ", not to " + caller);
      continue;
    }
    const core::job* j = sched_.find(static_cast<core::job_id>(id));
    const bool running = j != nullptr && core::holds_processors(j->state);
    if (m.signal) {
      if (!running || !e.host) {
        refuse(id, protocol::error_code::invalid_state, "job " + std::to_string(id) + " is not running");
        continue;
      }
      send_kill(id, static_cast<int>(*m.signal), std::chrono::seconds(0), false);
      cancelled.push_back(id);
      continue;
    }
    if (running) {
      if (!e.cancel_requested) logging::info("job {} cancelled by {}", id, caller);
      e.cancel_requested = true;
      // Before its launch went out, launch() ends it instead.
      if (e.host) send_kill(id, SIGTERM, options_.kill_grace);
    } else if (e.cancel_requested) {
      // Already cancelled; its transition is being written.
    } else {
      e.cancel_requested = true;
      logging::info("pending job {} cancelled by {}", id, caller);
      if (j != nullptr) sched_.apply(core::event::completion(static_cast<core::job_id>(id), job_state::cancelled));
      intake_.deps().release(id);
      pipe_.transition(id, job_state::cancelled, std::nullopt, "cancelled by " + caller);
      pipe_.after_commit([this, id] { on_final(id, job_state::cancelled); });
      pipe_.want_decision();
    }
    cancelled.push_back(id);
  }
  const std::int64_t rid = m.id;
  if (cancelled.empty() && !failed.empty()) {
    reply_error(c, rid, first_code, first_message);
    return;
  }
  // Pending jobs are CANCELLED in the store when the reply goes out.
  pipe_.after_commit([c, rid, reply] { c->send(protocol::make_ok(rid, reply)); });
  pipe_.kick();
}

}  // namespace aqs::daemon
