// controller: aqsd's request handling: the scheduling state on one strand,
// every event written to the store before anything is done about it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include "core/map_display.hpp"
#include "core/partition.hpp"
#include "core/scheduler.hpp"
#include "daemon/access_view.hpp"
#include "daemon/clock.hpp"
#include "daemon/array_table.hpp"
#include "daemon/dependency_gate.hpp"
#include "daemon/dispatcher.hpp"
#include "daemon/job_records.hpp"
#include "daemon/job_table.hpp"
#include "daemon/latency_table.hpp"
#include "daemon/metrics.hpp"
#include "daemon/node_manager.hpp"
#include "daemon/observe.hpp"
#include "daemon/pipeline.hpp"
#include "daemon/resize_manager.hpp"
#include "daemon/routing.hpp"
#include "daemon/step_table.hpp"
#include "daemon/token_authority.hpp"
#include "daemon/user_limits.hpp"
#include "daemon/watch_list.hpp"
#include "daemon/write_pipeline.hpp"
#include "protocol/replies.hpp"
#include "store/job_store.hpp"

namespace aqs::daemon {

struct controller_options {
  std::string policy = "equipartition";
  std::string cluster_key;
  // A node silent longer than this goes DOWN; its jobs end NODE_FAIL.
  std::chrono::milliseconds heartbeat_timeout{10'000};
  // An adaptive job that has not applied a new map by then keeps its old one.
  std::chrono::milliseconds resize_timeout{30'000};
  // A map the job's shim claimed (resize_begin) and has not acknowledged by
  // then: its ranks may be on either map, so the job is killed and FAILED.
  std::chrono::milliseconds resize_claim_timeout{300'000};
  // fkill: SIGTERM, then SIGKILL after this.
  std::chrono::seconds kill_grace{10};
  // Most jobs in one list_jobs reply page.
  std::int64_t list_page = protocol::k_max_list;
  // Where HTTP token revocations are kept (unset: in memory only).
  std::optional<std::filesystem::path> revoked_tokens_file;
  // ftoken without --lifespan.
  std::int64_t token_lifespan_s = token_authority::k_default_lifespan_s;
  // With a Faucets uplink: jobs a Faucets server placed here wait until the
  // uplink opens the gate (faucets_gate) once the server has said which are
  // still its, so that none runs here that was sent elsewhere meanwhile.
  bool faucets_gate = false;
  // The partitions (aqs.conf); the implicit one of all nodes by default.
  core::site_config partitions = core::implicit_config();
  // Per-user caps (aqs.conf and flags; daemon/user_limits.hpp).
  user_limits limits;
};

// An owner of parts, one concern each (docs/architecture.md): the core
// scheduler, the nodes part (node_manager, with the latency part), the job
// table, the dependency gate, the resize part (resize_manager), the step
// table and the watch list live on the scheduling strand; the access view
// is what session threads may read; the store and the clock are seams
// (in-memory store and virtual time in tests). Parts write through the
// pipeline interface this class implements; messages reach handlers
// through one routing table (routes()).
//
// Threads: the network layer calls the dispatcher methods from its session
// strands. Everything that touches the scheduling state is posted to one
// strand (`strand_`), so the core runs single-threaded without locks.
// Blocking store calls run on two small pools: one thread for writes, in
// order (`writer_`), two for reads that answer clients (`readers_`).
//
// The pipeline of a scheduling event (the crash-safety argument):
//   1. the event is applied to the core and its store transitions are
//      queued in the current batch (nothing is acted on yet);
//   2. when no batch is being written, the core decides, the decisions'
//      transitions join the batch, and the batch is written in one
//      transaction per step (group commit of everything that piled up);
//   3. only after that COMMIT are launches, kills, maps, replies and
//      notifications sent.
// A crash before 3 loses no acknowledged fact: agents resend unacknowledged
// reports, and nothing was launched that the store does not know about.
class controller final : public dispatcher, private node_jobs, private resize_jobs {
public:
  // `time` defaults to the machine's clocks; tests pass virtual time.
  controller(boost::asio::io_context& io, store::job_store& store, controller_options options,
             std::function<void()> request_stop, clock& time = system_clock());
  ~controller() override;

  // Loads the live jobs and nodes from the store into the core (blocking;
  // call before the server starts). Running jobs wait for their agents to
  // register again; nodes that do not within the heartbeat timeout go DOWN.
  // Throws store errors, or std::runtime_error if the stored state cannot be
  // rebuilt (the message says which job or node).
  void recover();
  // Starts the timers and the first decision.
  void start();
  // Stops timers, shuts the store's submissions down (store::job_store::
  // shutdown: their callbacks reach into this controller) and waits for the
  // store pools (no new work is accepted). Bounded even when the database is
  // down: a write waiting for it is abandoned (it was never acknowledged).
  void stop();
  // SIGHUP: new partitions (aqs.conf read again). Pending jobs follow them
  // (a job whose partition is gone waits with PartitionConfig), running
  // jobs stay where they run; the next decision uses them.
  void reload_partitions(core::site_config partitions);
  // The store failed for good: the daemon should exit non-zero.
  bool failed() const noexcept { return pipe_.failed(); }

  // dispatcher
  void on_open(const std::shared_ptr<connection>& conn) override;
  void on_message(const std::shared_ptr<connection>& conn, protocol::message m) override;
  void on_close(const std::shared_ptr<connection>& conn) override;
  std::optional<std::string> tcp_key(protocol::peer_role role, std::optional<std::int64_t> job_id) override;
  // The one routing table (controller.cpp): every message aqsd takes, the
  // roles that may send it, any further permission rule, where it runs.
  static const routing_table<controller>& routes();

  // ---- for read-only fronts (observe.cpp) -------------------------------
  // The bearer tokens this daemon issues (ftoken) and the HTTP front checks.
  const token_authority& tokens() const noexcept { return tokens_; }
  // Counters and latencies for /metrics.
  const metrics& stats() const noexcept { return metrics_; }
  // Takes a snapshot on the strand and calls `done` with it there (keep it
  // short: post elsewhere for anything slow). Never called once stopped.
  void snapshot(std::function<void(cluster_snapshot)> done);
  // Called on the strand with every committed state or map change; add
  // before start(). Must not block. Every sink added is called.
  void on_change(change_sink sink) { change_sinks_.push_back(std::move(sink)); }
  // The gate of jobs a Faucets server placed here (daemon/faucets_gate.cpp).
  // Closed (the server is unreachable): those pending leave the queue
  // (FaucetsSync).
  void faucets_close();
  // The server has listed the jobs it placed here (`theirs`, local ids): the
  // gate opens, those of them waiting run again, and every other live job a
  // Faucets server placed here is passed to `rest` on the strand; those of
  // them still waiting keep waiting for faucets_release or a cancel.
  void faucets_follow(std::set<std::int64_t> theirs, std::function<void(std::vector<faucets_copy>)> rest);
  // The server says this copy is its job's placement: it may run.
  void faucets_release(std::int64_t id);
  // Asked before a job a Faucets server placed here is launched: `done(true)`
  // once the server has recorded that it starts (so it never places it
  // elsewhere), `done(false)` if it refused, did not answer, or is
  // unreachable; then the job goes back to the queue, behind the gate.
  // `done` may be called on any thread. Set before start().
  using faucets_start_check =
      std::function<void(std::int64_t job_id, const std::string& submit_token, std::function<void(bool)> done)>;
  void on_faucets_start(faucets_start_check check) { faucets_start_check_ = std::move(check); }
  // The cluster's room and queue, taken on the strand; `done` runs there.
  void capacity(std::function<void(capacity_summary)> done);
  // When a job like `r` would start here if submitted now, in seconds from
  // now (core/start_estimate: this cluster's own strategy run forward on a
  // copy of its state); nullopt: never. `done` runs on the strand.
  void estimate_start(core::job_request r, std::function<void(std::optional<double>)> done);

private:
  using conn_ptr = std::shared_ptr<connection>;

  // ---- deciding (controller.cpp) ----------------------------------------
  // The pipeline's decider: the core decides; its decisions join the batch.
  void decide_now();
  void refresh_partition_reasons();  // why pending jobs wait, per partition
  void apply_decisions(const std::vector<core::decision>& ds);
  double now() const;

  // ---- handlers, one concern per file -----------------------------------
  // submit.cpp
  // One submission being worked on: where its answer goes, what of its
  // per-user reservation no job holds yet (given back when it is answered),
  // and its token (a resend while it is worked on waits for its answer).
  struct submit_call;
  using call_ptr = std::shared_ptr<submit_call>;
  void handle_submit(const conn_ptr& c, const protocol::submit& s);
  // With partitions configured: their checks (partition_gate.hpp), which may
  // set the job's time limit and narrow its partition list.
  void handle_partition_submit(const call_ptr& call, const protocol::submit& s, const submitter& who);
  // After the checks: dependencies looked up, then stored.
  void submit_checked(const call_ptr& call, const protocol::submit& s, const submitter& who);
  protocol::submit_reply submit_reply_for(const protocol::job_spec& job, std::int64_t id) const;
  // The answer to a submission (and to every resend of it that waited);
  // gives back what of its reservation no job took. Any thread.
  void answer_submit(const call_ptr& call, protocol::submit_reply r);
  void answer_submit_error(const call_ptr& call, protocol::error_code code, std::string message);
  // Queues the submission for group commit; the reply follows the arrival.
  void store_submission(const call_ptr& call, const protocol::submit& s, const submitter& who,
                        std::map<std::int64_t, core::job_state> deps);
  // A submission the store did not take: store_unavailable (retry) or refused.
  void reply_store_refusal(const call_ptr& call, std::exception_ptr error);
  // A job array: one compact record (its id is the array's) holding the
  // pending indices, whatever the array's size (issue 28).
  void store_array(const call_ptr& call, const protocol::submit& s, const submitter& who,
                   std::map<std::int64_t, core::job_state> deps);
  // Splits the next tasks off an eligible array's compact record, within
  // its throttle or window, k_split_slice at most per turn (submit.cpp).
  struct split_run {
    std::int64_t array_id = 0;
    store::array_split split;             // split.array_id: the record
    std::vector<std::int64_t> ids;
    core::task_ranges rest;               // the indices left in a record afterwards
    std::optional<std::int64_t> becomes;  // the record became this task
    std::string error;
  };
  void split_array(std::int64_t array_id);
  void on_split(split_run run);
  // A job of the array made from its record (its text is the record's, in the store).
  job_entry copy_for(const job_entry& record, std::int64_t id) const;
  void arrive_task(std::int64_t id, std::int64_t record, std::int64_t array_id, std::int64_t index);
  // `keep_spec`: keep the job's text in memory until launch (else it is
  // read from the store then: array tasks, big scripts). `charged_bytes`:
  // the job text it holds of its user's MaxScriptBytesPerUser.
  void arrive(std::int64_t id, protocol::job_spec spec, submitter who,
              std::map<std::int64_t, core::job_state> dep_states, bool keep_spec = true,
              std::int64_t charged_bytes = 0, std::int64_t charged_jobs = 1);
  // admit_or_hold for many jobs (those an ended dependency released), a
  // bounded slice per turn of the strand.
  void admit_in_slices(std::vector<std::int64_t> ids);
  void admit_or_hold(std::int64_t id);
  // After a final transition committed: dependents, watchers, bookkeeping.
  void on_final(std::int64_t id, core::job_state state, std::optional<std::int32_t> code = std::nullopt,
                std::optional<std::int32_t> signal = std::nullopt);
  std::optional<core::job_state> known_state(std::int64_t id) const;
  // launch.cpp
  void launch(std::int64_t id, const core::processor_set& procs);
  // launch() once any Faucets start check has said yes.
  void launch_checked(std::int64_t id, const core::processor_set& procs);
  // A Faucets job the server did not let start: back to the queue, waiting.
  void faucets_not_started(std::int64_t id);
  // Lets a job waiting behind the Faucets gate run (faucets_gate.cpp); false:
  // it was not waiting.
  bool faucets_let_run(std::int64_t id);
  void send_launch(std::int64_t id, const core::processor_set& procs, protocol::job_spec spec);
  void handle_job_started(const conn_ptr& c, const protocol::job_started& m);
  void handle_job_exited(const conn_ptr& c, const protocol::job_exited& m);
  void handle_agent_reply(const conn_ptr& c, const protocol::message& m);
  void end_job(std::int64_t id, core::job_state state, std::optional<std::int32_t> code,
               std::optional<std::int32_t> signal, std::string reason);
  // kill.cpp
  void handle_cancel(const conn_ptr& c, const protocol::cancel& m);
  void send_kill(std::int64_t id, int sig, std::chrono::seconds grace, bool escalate = true);
  // control.cpp: fctl (hold, release, suspend, resume, requeue, update) and
  // a job's own range requests. Each action returns why it was refused.
  void handle_control(const conn_ptr& c, const protocol::control& m);
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
  // The core's resume decision: RUNNING again on `to` (an adaptive job is
  // sent `to` as a new map), its processes continued on every node.
  void resumed(std::int64_t id, const core::processor_set& to, bool adaptive);
  // The agent reported a job that fctl requeue killed: back to PENDING.
  void requeued(std::int64_t id);
  // Queues a store::job_update in the current batch.
  // `sig` to the job's processes on its node and on every node of its steps.
  void signal_everywhere(std::int64_t id, int sig);
  // Recovery (recover.cpp): resize_manager::resume_claimed.
  void resume_claimed_resize(std::int64_t id, std::int64_t epoch, const core::processor_set& target) {
    resizes_.resume_claimed(id, epoch, target);
  }
  // resize_jobs (kill.cpp)
  bool is_live(std::int64_t job) const override { return jobs_.is_live(job); }
  void kill_uncertain(std::int64_t job, std::string reason) override;
  // remote_exec.cpp: processes a job starts on its other nodes (aqs-rsh).
  void handle_remote_exec(const conn_ptr& c, const protocol::remote_exec& m);
  // An agent's answer to a step's launch; false if `rid` was not one.
  bool step_launch_answered(const node_entry& n, std::int64_t rid, const protocol::message& m);
  // A job_exited from a node running a step of that job; false if none.
  bool step_exited(const node_entry& n, const protocol::job_exited& m);
  void end_steps_of(const conn_ptr& conn);     // the launcher went: its steps end
  void end_steps_of_job(std::int64_t job_id);  // the job ended: every step ends
  // The job's batch host sent its --signal warning: its steps on other nodes get it.
  void handle_job_signal(const conn_ptr& c, const protocol::job_signal& m);
  // node_jobs (launch.cpp): what a node's agent says of the jobs it runs.
  std::vector<std::int64_t> adopt_running(std::size_t index, const std::vector<std::int64_t>& running) override;
  bool still_wanted(std::size_t index, const protocol::message& queued) override;
  void jobs_reported(std::size_t index, const std::vector<std::int64_t>& running) override;
  void refresh_spans() override;
  const std::string& cluster_id() const override { return cluster_id_; }
  // views.cpp
  void handle_list_jobs(const conn_ptr& c, const protocol::list_jobs& m);
  void handle_list_nodes(const conn_ptr& c, const protocol::list_nodes& m);
  void handle_job_history(const conn_ptr& c, const protocol::job_history& m);
  void handle_watch(const conn_ptr& c, const protocol::watch_job& m);
  // Output from the node that runs the job's script or a step of it; what
  // another node says about a job that is not its own is dropped.
  void handle_output(const conn_ptr& c, const protocol::output& m);
  // frun went away: an interactive job nobody watches any more is cancelled
  // (as srun's job ends with srun).
  void orphan_interactive(const conn_ptr& gone);
  void notify(std::int64_t id, core::job_state state, std::optional<std::int32_t> code,
              std::optional<std::int32_t> signal, const core::processor_set* procs);
  std::vector<core::node_span> spans() const { return view_.spans(); }
  // recover.cpp: recover() itself
  // tokens.cpp: bearer tokens for the HTTP API (ftoken)
  void handle_issue_token(const conn_ptr& c, const protocol::issue_token& m);
  void handle_revoke_token(const conn_ptr& c, const protocol::revoke_token& m);

  // Launcher tokens are bound to the job's hosts: the addresses its
  // processes may connect from over TCP.
  void refresh_job_addresses(std::int64_t id, const core::processor_set& procs, bool adaptive);
  void refresh_agent_addresses() override { view_.set_agent_addresses(nodes_.agent_addresses()); }
  static void reply_error(const conn_ptr& c, std::int64_t id, protocol::error_code code, std::string message);

  controller_options options_;
  std::function<void()> request_stop_;
  clock& clock_;
  metrics metrics_;  // before the pipeline, which counts its commits in it
  // The strand, the store's writer and readers, the batch (write_pipeline.hpp).
  write_pipeline pipe_;

  // The scheduling state and its parts: touched on strand_ only.
  core::scheduler sched_;
  latency_table latency_;
  node_manager nodes_;
  job_table jobs_;
  dependency_gate deps_;
  array_table arrays_;
  resize_manager resizes_;
  step_table steps_;
  watch_list watchers_;
  std::map<std::int64_t, std::int64_t> launch_requests_;  // our request id -> job
  std::int64_t next_request_id_ = 1;
  // The cluster's id (store::live_state::cluster_id, from recover()): agents
  // learn it when they register and adopt only this cluster's jobs; job
  // tokens begin with it.
  std::string cluster_id_;

  // Read from session threads (thread-safe).
  access_view view_;
  token_authority tokens_;
  user_ledger ledger_;
  std::vector<change_sink> change_sinks_;
  faucets_start_check faucets_start_check_;    // set before start()
  bool faucets_open_ = true;                   // strand_
  std::set<std::int64_t> faucets_waiting_;     // strand_: pending jobs behind the gate
};

}  // namespace aqs::daemon
