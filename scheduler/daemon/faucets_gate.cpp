// faucets_gate: jobs a Faucets server placed here run only while this
// cluster and the server agree they are its. After a restart they wait until
// the uplink has heard from the server; while the server is unreachable,
// those still pending leave the queue. When the server comes back it lists
// the jobs it placed here: those run again; any other copy (a forward whose
// answer was lost with the link, a job the server placed elsewhere since) is
// reported to the server and keeps waiting until the server releases or
// cancels it. Held in the core, not in the store: the mark is the job's
// submit token, so a restart closes the gate again by itself.
#include "daemon/controller.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

void controller::faucets_close() {
  pipe_.post([this] {
    if (!faucets_open_) return;
    faucets_open_ = false;
    for (auto& [id, e] : jobs_.live()) {
      if (!e.faucets || !e.control.empty()) continue;
      const core::job* j = sched_.find(static_cast<core::job_id>(id));
      if (j == nullptr || j->state != core::job_state::pending || j->held) continue;
      sched_.apply(core::event::on_job(core::event::kind::hold, static_cast<core::job_id>(id)));
      faucets_waiting_.insert(id);
      view_.set_reason(id, "FaucetsSync");
    }
    logging::info("Faucets gate closed: {} pending jobs of the server wait for it", faucets_waiting_.size());
  });
}

bool controller::faucets_let_run(std::int64_t id) {
  if (faucets_waiting_.erase(id) == 0) return false;
  job_entry* e = jobs_.find(id);
  if (e == nullptr || !e->control.empty()) return false;
  view_.set_reason(id, "");
  const core::job* j = sched_.find(static_cast<core::job_id>(id));
  if (j != nullptr) {
    if (j->state == core::job_state::pending && j->held) {
      sched_.apply(core::event::on_job(core::event::kind::release, static_cast<core::job_id>(id)));
      pipe_.want_decision();
    }
  } else {
    admit_or_hold(id);
  }
  return true;
}

void controller::faucets_follow(std::set<std::int64_t> theirs, std::function<void(std::vector<faucets_copy>)> rest) {
  pipe_.post([this, theirs = std::move(theirs), rest = std::move(rest)] {
    faucets_open_ = true;
    std::size_t back = 0;
    for (const std::int64_t id : theirs) back += faucets_let_run(id) ? 1 : 0;
    std::vector<faucets_copy> others;
    for (auto& [id, e] : jobs_.live()) {
      if (!e.faucets || theirs.contains(id)) continue;
      faucets_copy c;
      c.job_id = id;
      c.submit_token = e.submit_token;
      c.waiting = faucets_waiting_.contains(id);
      if (const core::job* j = sched_.find(static_cast<core::job_id>(id))) {
        c.state = j->state;
        c.nprocs = static_cast<std::int64_t>(j->nprocs);
      }
      others.push_back(std::move(c));
    }
    logging::info("Faucets gate open: {} jobs of the server queued again; {} other copies reported to it", back,
                  others.size());
    if (back > 0) pipe_.kick();
    rest(std::move(others));
  });
}

void controller::faucets_release(std::int64_t id) {
  pipe_.post([this, id] {
    if (faucets_let_run(id)) {
      logging::info("Faucets job {} released by the server", id);
      pipe_.kick();
    }
  });
}

void controller::faucets_not_started(std::int64_t id) {
  job_entry* e = jobs_.find(id);
  if (e == nullptr) return;
  logging::warn("job {}: not started, its Faucets server did not confirm the start; it waits for the server", id);
  sched_.apply(core::event::on_job(core::event::kind::requeue, static_cast<core::job_id>(id)));
  pipe_.transition(id, core::job_state::pending, std::nullopt, "not started: the Faucets server did not confirm it");
  e->host.reset();
  e->token.clear();
  view_.forget_instance(id);
  e->launch_confirmed = false;
  e->misses = 0;
  resizes_.disarm(id);
  pipe_.after_commit([this, id] { notify(id, core::job_state::pending, std::nullopt, std::nullopt, nullptr); });
  // Behind the gate until the server lists it (follow) or releases it.
  sched_.apply(core::event::on_job(core::event::kind::hold, static_cast<core::job_id>(id)));
  faucets_waiting_.insert(id);
  view_.set_reason(id, "FaucetsSync");
  pipe_.decide();
}

}  // namespace aqs::daemon
