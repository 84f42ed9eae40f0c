// job_control: what users ask of their jobs once submitted: fkill's cancel
// and signal, fctl's hold, release, suspend, resume, requeue and update, and
// a running job's own range requests (aqs_request_range); an interactive job
// whose frun went away is cancelled.
//
// The rule it keeps: it owns no table. Each request is checked against the
// job's owner and state, applied to the core, written through the pipeline,
// and only then acted on, through the launcher (signals and kills to the
// job's nodes). The job entries' control fields (control mark, cancel and
// requeue requests) are written here and nowhere else. On the pipeline's
// strand only (handle_control runs there too: the routing table posts it);
// called by the routing table and by the controller (a closed connection).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/scheduler.hpp"
#include "daemon/access_view.hpp"
#include "daemon/job_intake.hpp"
#include "daemon/job_watchers.hpp"
#include "daemon/launcher.hpp"
#include "daemon/node_manager.hpp"
#include "daemon/step_manager.hpp"
#include "daemon/write_pipeline.hpp"
#include "daemon_base/dispatcher.hpp"
#include "protocol/messages.hpp"

namespace aqs::daemon {

class job_control {
public:
  using conn_ptr = std::shared_ptr<connection>;

  // fkill's SIGTERM is followed by SIGKILL after `kill_grace`.
  job_control(core::scheduler& sched, write_pipeline& pipe, job_intake& intake, node_manager& nodes,
              step_manager& steps, launcher& instances, access_view& view, job_watchers& watchers,
              std::chrono::seconds kill_grace, final_hook ended);

  void handle_cancel(const conn_ptr& c, const protocol::cancel& m);
  // fctl, and a job's own range requests. Each action returns why it was refused.
  void handle_control(const conn_ptr& c, const protocol::control& m);
  // frun went away: an interactive job nobody watches any more is cancelled
  // (as srun's job ends with srun).
  void orphan_interactive(const conn_ptr& gone);

private:
  std::optional<std::string> hold(std::int64_t id, job_entry& e, const core::job* j, bool admin, const std::string& caller);
  std::optional<std::string> release(std::int64_t id, job_entry& e, const core::job* j, bool admin,
                                     const std::string& caller);
  std::optional<std::string> suspend(std::int64_t id, job_entry& e, const core::job* j, const std::string& caller);
  std::optional<std::string> resume(std::int64_t id, job_entry& e, const core::job* j, const std::string& caller);
  std::optional<std::string> requeue(std::int64_t id, job_entry& e, const core::job* j, const std::string& caller);
  // The change passes the admission checks of a submission (admission.hpp)
  // first; `admin`: root asks (any partition's users).
  std::optional<std::string> update(std::int64_t id, job_entry& e, const core::job* j, const protocol::control& m,
                                    const std::string& caller, bool admin);
  job_table& jobs() noexcept { return intake_.jobs(); }
  std::vector<core::node_span> spans() const { return view_.spans(); }
  void on_final(std::int64_t id, core::job_state state) { ended_(id, state, std::nullopt, std::nullopt); }
  // The launcher's, by the names the handlers use.
  void send_kill(std::int64_t id, int sig, std::chrono::seconds grace, bool escalate = true) {
    instances_.send_kill(id, sig, grace, escalate);
  }
  void signal_everywhere(std::int64_t id, int sig) { instances_.signal_everywhere(id, sig); }

  core::scheduler& sched_;
  write_pipeline& pipe_;
  job_intake& intake_;
  node_manager& nodes_;
  step_manager& steps_;
  launcher& instances_;
  access_view& view_;
  job_watchers& watchers_;
  std::chrono::seconds kill_grace_;
  final_hook ended_;
};

}  // namespace aqs::daemon
