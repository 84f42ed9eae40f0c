// faucets_gate: the Faucets part of the queue (faucets_gate.hpp).
#include "daemon/faucets_gate.hpp"

#include "logging/log.hpp"

namespace aqs::daemon {

void faucets_gate::close() {
  pipe_.post([this] {
    if (!open_) return;
    open_ = false;
    for (const auto& [id, e] : jobs_.live()) {
      if (!e.faucets || !e.control.empty()) continue;
      const core::job* j = core_.find(static_cast<core::job_id>(id));
      if (j == nullptr || j->state != core::job_state::pending || j->held) continue;
      core_.apply(core::event::on_job(core::event::kind::hold, static_cast<core::job_id>(id)));
      waiting_.insert(id);
      view_.set_reason(id, "FaucetsSync");
    }
    logging::info("Faucets gate closed: {} pending jobs of the server wait for it", waiting_.size());
  });
}

bool faucets_gate::let_run(std::int64_t id) {
  if (waiting_.erase(id) == 0) return false;
  const job_entry* e = jobs_.find(id);
  if (e == nullptr || !e->control.empty()) return false;
  view_.set_reason(id, "");
  const core::job* j = core_.find(static_cast<core::job_id>(id));
  if (j != nullptr) {
    if (j->state == core::job_state::pending && j->held) {
      core_.apply(core::event::on_job(core::event::kind::release, static_cast<core::job_id>(id)));
      pipe_.want_decision();
    }
  } else {
    admit_(id);
  }
  return true;
}

void faucets_gate::follow(std::set<std::int64_t> theirs, std::function<void(std::vector<faucets_copy>)> rest) {
  pipe_.post([this, theirs = std::move(theirs), rest = std::move(rest)] {
    open_ = true;
    std::size_t back = 0;
    for (const std::int64_t id : theirs) back += let_run(id) ? 1 : 0;
    std::vector<faucets_copy> others;
    for (const auto& [id, e] : jobs_.live()) {
      if (!e.faucets || theirs.contains(id)) continue;
      faucets_copy c;
      c.job_id = id;
      c.submit_token = e.submit_token;
      c.waiting = waiting_.contains(id);
      if (const core::job* j = core_.find(static_cast<core::job_id>(id))) {
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

void faucets_gate::release(std::int64_t id) {
  pipe_.post([this, id] {
    if (let_run(id)) {
      logging::info("Faucets job {} released by the server", id);
      pipe_.kick();
    }
  });
}

bool faucets_gate::admits(std::int64_t id) {
  if (open_) return true;
  waiting_.insert(id);
  view_.set_reason(id, "FaucetsSync");
  return false;
}

void faucets_gate::hold_back(std::int64_t id) {
  core_.apply(core::event::on_job(core::event::kind::hold, static_cast<core::job_id>(id)));
  waiting_.insert(id);
  view_.set_reason(id, "FaucetsSync");
}

}  // namespace aqs::daemon
