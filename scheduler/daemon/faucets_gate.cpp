// faucets_gate: jobs a Faucets server placed here run only while this
// cluster and the server agree they are its. After a restart they wait until
// the uplink has heard from the server (which first cancels those it sent
// elsewhere meanwhile); while the server is unreachable, those still pending
// leave the queue. Held in the core, not in the store: the mark is the job's
// submit token, so a restart closes the gate again by itself.
#include "daemon/controller.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

void controller::faucets_gate(bool open) {
  post([this, open] {
    if (open == faucets_open_) return;
    faucets_open_ = open;
    if (!open) {
      for (auto& [id, e] : jobs_.live()) {
        if (!e.faucets || !e.control.empty()) continue;
        const core::job* j = sched_.find(static_cast<core::job_id>(id));
        if (j == nullptr || j->state != core::job_state::pending || j->held) continue;
        sched_.apply(core::event::on_job(core::event::kind::hold, static_cast<core::job_id>(id)));
        faucets_waiting_.insert(id);
        view_.set_reason(id, "FaucetsSync");
      }
      logging::info("Faucets gate closed: {} pending jobs of the server wait for it", faucets_waiting_.size());
      return;
    }
    const auto waiting = std::move(faucets_waiting_);
    faucets_waiting_.clear();
    std::size_t back = 0;
    for (const std::int64_t id : waiting) {
      job_entry* e = jobs_.find(id);
      if (e == nullptr || !e->control.empty()) continue;
      view_.set_reason(id, "");
      const core::job* j = sched_.find(static_cast<core::job_id>(id));
      if (j != nullptr) {
        if (j->state == core::job_state::pending && j->held) {
          sched_.apply(core::event::on_job(core::event::kind::release, static_cast<core::job_id>(id)));
        }
      } else {
        admit_or_hold(id);
      }
      ++back;
    }
    if (back > 0) logging::info("Faucets gate open: {} jobs of the server queued again", back);
    kick();
  });
}

}  // namespace aqs::daemon
