// control: fctl's requests (hold, release, suspend, resume, requeue,
// update) and a running job's own range requests (aqs_request_range).
// Each is checked against the job's owner and state, applied to the core,
// written to the store, and only then acted on (signals to the agents).
#include <csignal>

#include "core/map_display.hpp"
#include "daemon/admission.hpp"
#include "daemon/controller.hpp"
#include "daemon/partition_gate.hpp"
#include "daemon_base/permissions.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

using core::job_state;

namespace {

std::string job_name(std::int64_t id) { return "job " + std::to_string(id); }

}  // namespace

void controller::signal_everywhere(std::int64_t id, int sig) {
  const job_entry* e = jobs().find(id);
  std::set<std::size_t> nodes;
  if (e != nullptr && e->host) nodes.insert(*e->host);
  if (const auto* sn = steps_.nodes_of(id)) nodes.insert(sn->begin(), sn->end());
  for (std::size_t n : nodes) {
    if (n < nodes_.size() && sched_.machine().at(n).state != core::node_state::down) {
      nodes_.send(n, protocol::kill{nodes_.new_request_id(), id, sig, 0, false});
    }
  }
}

void controller::handle_control(const conn_ptr& c, const protocol::control& m) {
  const peer_info& p = c->peer();
  const bool as_job = p.role == protocol::peer_role::job;
  const std::string caller = as_job ? "the job itself" : p.uid ? user_name_of(*p.uid) : "root";
  protocol::control_reply reply;
  std::optional<protocol::cancel_failure> first;
  auto refuse = [&](std::int64_t id, protocol::error_code code, std::string msg) {
    if (!first) first = protocol::cancel_failure{id, code, msg};
    reply.failed.push_back({id, code, std::move(msg)});
  };
  for (const std::int64_t id : m.job_ids) {
    job_entry* e = jobs().find(id);
    if (as_job && (p.job_id != id || m.action != "update" || m.time_limit_s)) {
      refuse(id, protocol::error_code::unauthorized,
             "a job may only ask for a new range of processors for itself");
      continue;
    }
    if (e == nullptr) {
      if (const final_info* f = jobs().finished(id)) {
        refuse(id, protocol::error_code::invalid_state,
               job_name(id) + " has already ended (" + std::string(core::to_string(f->state)) + ")");
      } else {
        refuse(id, protocol::error_code::not_found, "no pending or running job " + std::to_string(id));
      }
      continue;
    }
    if (!as_job && !may_act_on_job(p, e->uid)) {
      refuse(id, protocol::error_code::permission_denied, job_name(id) + " belongs to " + e->user + ", not to " + caller);
      continue;
    }
    if (e->cancel_requested) {
      refuse(id, protocol::error_code::invalid_state, job_name(id) + " is being cancelled");
      continue;
    }
    const core::job* j = sched_.find(static_cast<core::job_id>(id));
    std::optional<std::string> why;
    if (m.action == "hold") {
      why = hold(id, *e, j, is_admin(p), caller);
    } else if (m.action == "release") {
      why = release(id, *e, j, is_admin(p), caller);
    } else if (m.action == "suspend") {
      why = suspend(id, *e, j, caller);
    } else if (m.action == "resume") {
      why = resume(id, *e, j, caller);
    } else if (m.action == "requeue") {
      why = requeue(id, *e, j, caller);
    } else {
      why = update(id, *e, j, m, caller, is_admin(p));
    }
    if (why) {
      refuse(id, protocol::error_code::invalid_state, std::move(*why));
      continue;
    }
    reply.done.push_back(id);
  }
  const std::int64_t rid = m.id;
  if (reply.done.empty() && first) {
    reply_error(c, rid, first->code, first->message);
    return;
  }
  pipe_.after_commit([c, rid, reply] { c->send(protocol::make_ok(rid, reply)); });
  pipe_.decide();
}

std::optional<std::string> controller::hold(std::int64_t id, job_entry& e, const core::job* j, bool admin,
                                            const std::string& caller) {
  if (!e.control.empty() && e.control != "resume") return job_name(id) + " is already held";
  const bool queued = j != nullptr && j->state == job_state::pending;
  // A job waiting for its dependencies is not in the core yet: it is held
  // when it is admitted.
  if (j != nullptr && !queued) return job_name(id) + " is not pending (" + std::string(core::to_string(j->state)) + ")";
  if (j == nullptr && !intake_.deps().is_held(id) && !intake_.arrays().is_waiting(id)) return job_name(id) + " is not pending";
  if (queued) sched_.apply(core::event::on_job(core::event::kind::hold, static_cast<core::job_id>(id)));
  e.control = admin ? "held-admin" : "held-user";
  view_.set_reason(id, admin ? "JobHeldAdmin" : "JobHeldUser");
  pipe_.record_update({id, e.control, std::nullopt, std::nullopt, std::nullopt, "held by " + caller});
  logging::info("job {} held by {}", id, caller);
  return std::nullopt;
}

std::optional<std::string> controller::release(std::int64_t id, job_entry& e, const core::job* j, bool admin,
                                               const std::string& caller) {
  if (e.control != "held-user" && e.control != "held-admin") return job_name(id) + " is not held";
  if (e.control == "held-admin" && !admin) return job_name(id) + " was held by an administrator; only root may release it";
  e.control.clear();
  view_.set_reason(id, "");
  if (j != nullptr && j->held) {
    sched_.apply(core::event::on_job(core::event::kind::release, static_cast<core::job_id>(id)));
  } else if (intake_.deps().is_held(id)) {
    view_.set_reason(id, "Dependency");
  }
  pipe_.record_update({id, std::string(), std::nullopt, std::nullopt, std::nullopt, "released by " + caller});
  logging::info("job {} released by {}", id, caller);
  return std::nullopt;
}

std::optional<std::string> controller::suspend(std::int64_t id, job_entry& e, const core::job* j,
                                               const std::string& caller) {
  if (j == nullptr || (j->state != job_state::running && j->state != job_state::resizing)) {
    return job_name(id) + " is not running";
  }
  if (j->state == job_state::resizing) return job_name(id) + " is being resized; suspend it once it has applied its new map";
  // Its launch went to its agent (or is queued for it) before this stop can:
  // an agent stops a job that is still starting as soon as it runs.
  if (!e.host) return job_name(id) + " is still starting; suspend it once it runs";
  const core::processor_set was = j->procs;
  sched_.apply(core::event::on_job(core::event::kind::suspend, static_cast<core::job_id>(id)));
  pipe_.transition(id, job_state::suspended, std::nullopt,
             "suspended by " + caller + " (its " + std::to_string(was.count()) + " processors freed)");
  pipe_.after_commit([this, id] {
    signal_everywhere(id, SIGSTOP);
    watchers_.notify(id, job_state::suspended, std::nullopt, std::nullopt, nullptr);
  });
  logging::info("job {} suspended by {}", id, caller);
  return std::nullopt;
}

std::optional<std::string> controller::resume(std::int64_t id, job_entry& e, const core::job* j,
                                              const std::string& caller) {
  if (j == nullptr || j->state != job_state::suspended) return job_name(id) + " is not suspended";
  if (j->resume_wanted) return job_name(id) + " is already waiting to resume";
  sched_.apply(core::event::on_job(core::event::kind::resume, static_cast<core::job_id>(id)));
  e.control = "resume";
  view_.set_reason(id, "Resources");
  pipe_.record_update({id, e.control, std::nullopt, std::nullopt, std::nullopt,
                 "resume asked by " + caller + (j->req.adaptive ? "" : ": waits for its processors")});
  logging::info("job {} asked to resume by {}", id, caller);
  return std::nullopt;
}

void controller::resumed(std::int64_t id, const core::processor_set& to, bool adaptive) {
  job_entry* e = jobs().find(id);
  if (e != nullptr) e->control.clear();
  view_.set_reason(id, "");
  pipe_.transition(id, job_state::running, to, "resumed on " + core::format_processor_map(spans(), to));
  if (adaptive) {
    // Its ranks are where they stopped: the new map moves them at the
    // next MPI_Migrate().
    refresh_job_addresses(id, to, true);
    resizes_.begin(id, to);
  }
  pipe_.after_commit([this, id, to] {
    signal_everywhere(id, SIGCONT);
    watchers_.notify(id, job_state::running, std::nullopt, std::nullopt, &to);
  });
}

std::optional<std::string> controller::requeue(std::int64_t id, job_entry& e, const core::job* j,
                                               const std::string& caller) {
  if (j == nullptr || !core::holds_processors(j->state)) return job_name(id) + " is not running or suspended";
  if (e.interactive) return job_name(id) + " is interactive (frun); it cannot be requeued";
  if (e.requeue_by) return job_name(id) + " is already being requeued";
  if (!e.host) return job_name(id) + " is still starting; requeue it once it runs";
  // It goes back to the queue when its agent reports it gone (requeued()):
  // until then its processes may still run, and a new instance must not
  // start beside them.
  e.requeue_by = caller;
  pipe_.after_commit([this, id, host = *e.host] {
    steps_.end_of_job(id);
    nodes_.send(host, protocol::kill{nodes_.new_request_id(), id, SIGKILL, 0});
  });
  logging::info("job {} requeued by {}: killing it", id, caller);
  return std::nullopt;
}

void controller::requeued(std::int64_t id) {
  job_entry* e = jobs().find(id);
  if (e == nullptr) return;
  const std::string by = e->requeue_by.value_or("root");
  e->requeue_by.reset();
  sched_.apply(core::event::on_job(core::event::kind::requeue, static_cast<core::job_id>(id)));
  pipe_.transition(id, job_state::pending, std::nullopt, "requeued by " + by);
  drop_instance(id, *e);  // the killed instance can no longer speak for the job
  e->control.clear();
  view_.set_reason(id, "");
  pipe_.after_commit([this, id] { watchers_.notify(id, job_state::pending, std::nullopt, std::nullopt, nullptr); });
  pipe_.decide();
}

std::optional<std::string> controller::update(std::int64_t id, job_entry& e, const core::job* j,
                                              const protocol::control& m, const std::string& caller, bool admin) {
  const bool pending = j == nullptr || j->state == job_state::pending;
  const bool resized = m.min_pe || m.max_pe;
  std::size_t lo = e.req.min_pe, hi = e.req.max_pe;
  std::optional<std::size_t> ntasks;  // a rigid job sized in tasks (-n N): its new task count
  if (resized) {
    lo = m.min_pe ? static_cast<std::size_t>(*m.min_pe) : e.req.min_pe;
    hi = m.max_pe ? static_cast<std::size_t>(*m.max_pe) : e.req.max_pe;
    if (hi < lo) return job_name(id) + ": the new minimum " + std::to_string(lo) + " is above the maximum " + std::to_string(hi);
    if (!e.req.adaptive) {
      if (lo != hi) return job_name(id) + " is rigid: give it one size (--min and --max equal)";
      if (!pending) return job_name(id) + " is rigid and has started: its size cannot change";
      const core::job_shape& sh = e.req.shape;
      if (!sh.plain() && sh.cpus_per_task == 1) {
        return job_name(id) + " has a layout (-N, --ntasks-per-node, --exclusive, --mem or GPUs): its size cannot "
                              "change; cancel it and submit it again";
      }
      if (sh.ntasks != 0 || sh.cpus_per_task > 1) {
        core::job_shape rest = sh;
        rest.cpus_per_task = 1;
        if (!rest.plain()) {
          return job_name(id) + " has a layout (-N, --ntasks-per-node, --exclusive, --mem or GPUs): its size cannot "
                                "change; cancel it and submit it again";
        }
        if (lo % sh.cpus_per_task != 0) {
          return job_name(id) + " has tasks of " + std::to_string(sh.cpus_per_task) +
                 " processors (-c): give a multiple of " + std::to_string(sh.cpus_per_task);
        }
        ntasks = lo / sh.cpus_per_task;
      }
    }
    if (e.req.adaptive && !e.req.shape.plain()) return job_name(id) + " has a task geometry: its range cannot change";
  }
  if (m.time_limit_s && !pending) return job_name(id) + " has started: its time limit is the one it started with";

  // The same admission checks as a submission (admission.hpp), on what the
  // change asks for: its partitions' limits, and whether it could ever fit.
  core::job_request r = e.req;
  r.min_pe = lo;
  r.max_pe = hi;
  if (ntasks) r.shape.ntasks = *ntasks;
  admission_request ar;
  ar.who = submitter{e.user, e.uid, e.gid};
  if (options_.partitions.configured) ar.groups = group_names_of(e.user, e.gid);
  ar.root = e.uid == 0 || admin;
  ar.partition = e.req.partition;
  if (m.time_limit_s) ar.walltime_s = *m.time_limit_s;
  if (resized) ar.cpus = lo;
  never_fits_check never_fits;
  if (resized) {
    never_fits = [&](const core::partition* p) { return p ? view_.never_fits(r, *p) : sched_.never_fits(r); };
  }
  if (const admission a = admit(options_.partitions, ar, never_fits); !a.error.empty()) {
    if (!a.never_fits.empty()) return job_name(id) + " can never have that: " + a.never_fits;
    return job_name(id) + ": " + a.error;
  }

  store::job_update u;
  u.job_id = id;
  std::string what;
  if (resized) {
    if (j != nullptr) {
      sched_.apply(core::event::change(static_cast<core::job_id>(id), lo, hi));
    }
    e.req.min_pe = lo;
    e.req.max_pe = hi;
    u.min_pe = static_cast<std::int32_t>(lo);
    u.max_pe = static_cast<std::int32_t>(hi);
    if (ntasks) {
      // Its launch lays out and counts tasks (SLURM_NTASKS, the MPI
      // hostfile) from these: the new size must be in them too.
      e.req.shape.ntasks = *ntasks;
      u.ntasks = static_cast<std::int32_t>(*ntasks);
    }
    if (e.spec) {
      e.spec->min_pe = static_cast<std::int64_t>(lo);
      e.spec->max_pe = static_cast<std::int64_t>(hi);
      if (ntasks && e.spec->geometry) e.spec->geometry->ntasks = static_cast<std::int64_t>(*ntasks);
    }
    what = "range " + std::to_string(lo) + "-" + std::to_string(hi);
  }
  if (m.time_limit_s) {
    u.walltime_s = static_cast<std::int32_t>(*m.time_limit_s);
    e.req.walltime = *m.time_limit_s > 0 ? static_cast<double>(*m.time_limit_s) : e.req.walltime;
    if (e.spec) {
      e.spec->walltime_s.reset();
      if (*m.time_limit_s > 0) e.spec->walltime_s = *m.time_limit_s;
    }
    what += std::string(what.empty() ? "" : ", ") + "time limit " +
            (*m.time_limit_s > 0 ? std::to_string(*m.time_limit_s) + " s" : std::string("none"));
  }
  u.reason = what + (caller == "the job itself" ? " requested by the job" : " set by " + caller);
  pipe_.record_update(std::move(u));
  logging::info("job {}: {}", id, what);
  return std::nullopt;
}

}  // namespace aqs::daemon
