// launcher: a started job's running instance on its nodes.
//
// The rule it keeps: it is the only part that sends a job's launch, its
// signals and its kills to agents, and the only one that hears what agents
// say of the jobs they run (started, refused, exited, listed or lost in a
// heartbeat). It owns the instance's side of each job entry (host, token,
// launch confirmation, heartbeat misses, recovered mark, a step's OOM) and
// the cluster id agents are told; everything else it reaches through the
// other parts' interfaces. On the pipeline's strand only; called by the
// controller (routing table, the core's decisions, recovery), by job_control
// (kills, suspend and resume signals, fctl requeue), by the nodes part
// (node_jobs) and by the resize part (resize_jobs).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/scheduler.hpp"
#include "daemon/access_view.hpp"
#include "daemon/faucets_gate.hpp"
#include "daemon/job_intake.hpp"
#include "daemon/job_watchers.hpp"
#include "daemon/node_manager.hpp"
#include "daemon/resize_manager.hpp"
#include "daemon/step_manager.hpp"
#include "daemon/write_pipeline.hpp"
#include "daemon_base/dispatcher.hpp"
#include "protocol/messages.hpp"

namespace aqs::daemon {

// What the wiring does when a job reached a final state and its end is
// committed: every part lets it go (controller::on_final).
using final_hook = std::function<void(std::int64_t, core::job_state, std::optional<std::int32_t>,
                                      std::optional<std::int32_t>)>;

class launcher final : public node_jobs, public resize_jobs {
public:
  using conn_ptr = std::shared_ptr<connection>;

  launcher(core::scheduler& sched, write_pipeline& pipe, job_intake& intake, node_manager& nodes, step_manager& steps,
           resize_manager& resizes, faucets_gate& gate, access_view& view, job_watchers& watchers, final_hook ended);

  // The core started the job on `procs` (its start is committed): its launch
  // goes to the node of its first processor, once any Faucets start check
  // said yes.
  void launch(std::int64_t id, const core::processor_set& procs);
  // Ends the job in `state` (written, then every part lets it go).
  void end_job(std::int64_t id, core::job_state state, std::optional<std::int32_t> code,
               std::optional<std::int32_t> signal, std::string reason);
  // `sig` to the job's processes on the node that runs its script; with
  // `escalate`, SIGKILL follows after `grace`.
  void send_kill(std::int64_t id, int sig, std::chrono::seconds grace, bool escalate = true);
  // `sig` to the job's processes on its node and on every node of its steps.
  void signal_everywhere(std::int64_t id, int sig);
  // The core's resume decision: RUNNING again on `to` (an adaptive job is
  // sent `to` as a new map), its processes continued on every node.
  void resumed(std::int64_t id, const core::processor_set& to, bool adaptive);
  // The agent reported a job that fctl requeue killed: back to PENDING.
  void requeued(std::int64_t id);
  // The job's running instance is gone (requeued, lost with its node, not
  // started): no host, token, confirmed launch or resize of it is kept.
  void drop_instance(std::int64_t id, job_entry& e);
  // Launcher tokens are bound to the job's hosts: the addresses its
  // processes may connect from over TCP.
  void refresh_job_addresses(std::int64_t id, const core::processor_set& procs, bool adaptive);
  // Recovery: the cluster's id (store::live_state::cluster_id).
  void set_cluster_id(std::string id) { cluster_id_ = std::move(id); }

  // ---- what agents send (routing table) ---------------------------------
  void handle_job_started(const conn_ptr& c, const protocol::job_started& m);
  void handle_job_exited(const conn_ptr& c, const protocol::job_exited& m);
  // Stores what `node` measured of the job, when it measured (issue 32).
  void record_measurement(const std::string& node, const protocol::job_exited& m);
  // An agent's ok or error: the answer to a launch (of a job or a step).
  void handle_agent_reply(const conn_ptr& c, const protocol::message& m);

  // ---- node_jobs ----------------------------------------------------------
  std::vector<std::int64_t> adopt_running(std::size_t index, const std::vector<std::int64_t>& running) override;
  bool still_wanted(std::size_t index, const protocol::message& queued) override;
  void jobs_reported(std::size_t index, const std::vector<std::int64_t>& running) override;
  void refresh_spans() override;
  void refresh_agent_addresses() override { view_.set_agent_addresses(nodes_.agent_addresses()); }
  const std::string& cluster_id() const override { return cluster_id_; }

  // ---- resize_jobs --------------------------------------------------------
  bool is_live(std::int64_t job) const override { return intake_.jobs().is_live(job); }
  void kill_uncertain(std::int64_t job, std::string reason) override;

private:
  // launch() once any Faucets start check has said yes.
  void launch_checked(std::int64_t id, const core::processor_set& procs);
  // A Faucets job the server did not let start: back to the queue, waiting.
  void faucets_not_started(std::int64_t id);
  void send_launch(std::int64_t id, const core::processor_set& procs, protocol::job_spec spec);
  job_table& jobs() noexcept { return intake_.jobs(); }
  std::vector<core::node_span> spans() const { return view_.spans(); }
  void on_final(std::int64_t id, core::job_state state, std::optional<std::int32_t> code = std::nullopt,
                std::optional<std::int32_t> signal = std::nullopt) {
    ended_(id, state, code, signal);
  }

  core::scheduler& sched_;
  write_pipeline& pipe_;
  job_intake& intake_;
  node_manager& nodes_;
  step_manager& steps_;
  resize_manager& resizes_;
  faucets_gate& gate_;
  access_view& view_;
  job_watchers& watchers_;
  final_hook ended_;
  // Agents learn it when they register and adopt only this cluster's jobs;
  // job tokens begin with it.
  std::string cluster_id_;
};

}  // namespace aqs::daemon
