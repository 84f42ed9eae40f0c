// job_control: fkill's cancel requests (pending jobs end at once, running
// ones are signalled through their node agent and end when it reports them),
// fctl's requests (hold, release, suspend, resume, requeue, update) and a
// running job's own range requests (aqs_request_range). Each is checked
// against the job's owner and state, applied to the core, written to the
// store, and only then acted on (signals to the agents).
#include "daemon/job_control.hpp"

#include <csignal>

#include "core/map_display.hpp"
#include "daemon/admission.hpp"
#include "daemon/partition_gate.hpp"
#include "daemon_base/permissions.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

using core::job_state;

namespace {

std::string job_name(std::int64_t id) { return "job " + std::to_string(id); }

// The controller acting on its own behalf (e.g. cancelling an orphaned
// interactive job): root, and whatever it is sent goes nowhere.
class internal_peer final : public connection {
public:
  internal_peer() {
    peer_.uid = 0;
    peer_.remote = "aqsd";
  }
  void send(protocol::message) override {}
  void close() override {}
  const peer_info& peer() const noexcept override { return peer_; }
  std::uint64_t serial() const noexcept override { return 0; }

private:
  peer_info peer_;
};

}  // namespace

job_control::job_control(core::scheduler& sched, write_pipeline& pipe, job_intake& intake, node_manager& nodes,
                         step_manager& steps, launcher& instances, access_view& view, job_watchers& watchers,
                         std::chrono::seconds kill_grace, final_hook ended)
    : sched_(sched),
      pipe_(pipe),
      intake_(intake),
      nodes_(nodes),
      steps_(steps),
      instances_(instances),
      view_(view),
      watchers_(watchers),
      kill_grace_(kill_grace),
      ended_(std::move(ended)) {}

void job_control::handle_cancel(const conn_ptr& c, const protocol::cancel& m) {
  const peer_info& p = c->peer();
  const std::string caller = p.uid ? user_name_of(*p.uid) : "root";
  std::vector<std::int64_t> targets;
  // An array's id names all its live tasks (scancel's way).
  for (const std::int64_t id : m.job_ids) {
    const auto reached = intake_.cancel_targets(id);
    targets.insert(targets.end(), reached.begin(), reached.end());
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
    auto done = intake_.cancel_array_task(t, p, caller);
    if (done.refused) {
      refuse(done.refused->job_id, done.refused->code, std::move(done.refused->message));
    }
    targets.insert(targets.end(), done.split_off.begin(), done.split_off.end());
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
      if (e.host) send_kill(id, SIGTERM, kill_grace_);
    } else if (e.cancel_requested) {
      // Already cancelled; its transition is being written.
    } else {
      e.cancel_requested = true;
      logging::info("pending job {} cancelled by {}", id, caller);
      if (j != nullptr) sched_.apply(core::event::completion(static_cast<core::job_id>(id), job_state::cancelled));
      intake_.pending_cancelled(id);
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

void job_control::handle_control(const conn_ptr& c, const protocol::control& m) {
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

std::optional<std::string> job_control::hold(std::int64_t id, job_entry& e, const core::job* j, bool admin,
                                            const std::string& caller) {
  if (!e.control.empty() && e.control != "resume") return job_name(id) + " is already held";
  const bool queued = j != nullptr && j->state == job_state::pending;
  // A job waiting for its dependencies is not in the core yet: it is held
  // when it is admitted.
  if (j != nullptr && !queued) return job_name(id) + " is not pending (" + std::string(core::to_string(j->state)) + ")";
  if (j == nullptr && !intake_.waits_outside_core(id)) return job_name(id) + " is not pending";
  if (queued) sched_.apply(core::event::on_job(core::event::kind::hold, static_cast<core::job_id>(id)));
  e.control = admin ? "held-admin" : "held-user";
  view_.set_reason(id, admin ? "JobHeldAdmin" : "JobHeldUser");
  pipe_.record_update({id, e.control, std::nullopt, std::nullopt, std::nullopt, "held by " + caller});
  logging::info("job {} held by {}", id, caller);
  return std::nullopt;
}

std::optional<std::string> job_control::release(std::int64_t id, job_entry& e, const core::job* j, bool admin,
                                               const std::string& caller) {
  if (e.control != "held-user" && e.control != "held-admin") return job_name(id) + " is not held";
  if (e.control == "held-admin" && !admin) return job_name(id) + " was held by an administrator; only root may release it";
  e.control.clear();
  view_.set_reason(id, "");
  if (j != nullptr && j->held) {
    sched_.apply(core::event::on_job(core::event::kind::release, static_cast<core::job_id>(id)));
  } else if (intake_.waits_for_dependencies(id)) {
    view_.set_reason(id, "Dependency");
  }
  pipe_.record_update({id, std::string(), std::nullopt, std::nullopt, std::nullopt, "released by " + caller});
  logging::info("job {} released by {}", id, caller);
  return std::nullopt;
}

std::optional<std::string> job_control::suspend(std::int64_t id, job_entry& e, const core::job* j,
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

std::optional<std::string> job_control::resume(std::int64_t id, job_entry& e, const core::job* j,
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

std::optional<std::string> job_control::requeue(std::int64_t id, job_entry& e, const core::job* j,
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

std::optional<std::string> job_control::update(std::int64_t id, job_entry& e, const core::job* j,
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
  const auto parts = intake_.partitions();
  admission_request ar;
  ar.who = submitter{e.user, e.uid, e.gid};
  if (parts->configured) ar.groups = group_names_of(e.user, e.gid);
  ar.root = e.uid == 0 || admin;
  ar.partition = e.req.partition;
  if (m.time_limit_s) ar.walltime_s = *m.time_limit_s;
  if (resized) ar.cpus = lo;
  never_fits_check never_fits;
  if (resized) {
    never_fits = [&](const core::partition* p) { return p ? view_.never_fits(r, *p) : sched_.never_fits(r); };
  }
  if (const admission a = admit(*parts, ar, never_fits); !a.error.empty()) {
    if (!a.never_fits.empty()) return job_name(id) + " can never have that: " + a.never_fits;
    return job_name(id) + ": " + a.error;
  }

  store::control_change u;
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

void job_control::orphan_interactive(const conn_ptr& gone) {
  for (std::int64_t id : watchers_.drop(*gone)) {
    const job_entry* e = jobs().find(id);
    if (e == nullptr || !e->interactive) continue;
    logging::info("interactive job {} lost its frun: cancelling it", id);
    protocol::cancel c;
    c.id = 0;
    c.job_ids = {id};
    // As root: the owner's own frun went away; nobody is told.
    auto self = std::make_shared<internal_peer>();
    handle_cancel(self, c);
  }
}

}  // namespace aqs::daemon
