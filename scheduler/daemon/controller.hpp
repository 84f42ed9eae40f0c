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
#include "daemon/faucets_gate.hpp"
#include "daemon_base/dispatcher.hpp"
#include "daemon/job_records.hpp"
#include "daemon/job_accounting.hpp"
#include "daemon/job_reservations.hpp"
#include "daemon/job_control.hpp"
#include "daemon/job_intake.hpp"
#include "daemon/job_telemetry.hpp"
#include "daemon/job_views.hpp"
#include "daemon/launcher.hpp"
#include "daemon/latency_table.hpp"
#include "daemon/metrics.hpp"
#include "daemon/node_manager.hpp"
#include "daemon/observe.hpp"
#include "daemon/pipeline.hpp"
#include "daemon/resize_manager.hpp"
#include "daemon/routing.hpp"
#include "daemon/step_manager.hpp"
#include "daemon/http_tokens.hpp"
#include "daemon/user_limits.hpp"
#include "daemon/job_watchers.hpp"
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
  // Accounts, limits, fair share (aqs.conf; daemon/job_accounting.hpp).
  accounting_options accounting;
  // Values jobs publish: series, points, rate (daemon/job_telemetry.hpp).
  telemetry_limits telemetry;
};

// The wiring of aqsd's parts (docs/architecture.md, "Request handling"):
// the write pipeline (write_pipeline: the strand, the batch, the store's
// writer and readers, the counters), the core scheduler, submission and
// admission with the job table and the partitions (job_intake), the nodes
// (node_manager), running instances on the nodes (launcher), users'
// requests on their jobs (job_control), what clients read (job_views),
// resizes (resize_manager), steps on other nodes (step_manager), watchers
// and change sinks (job_watchers), the Faucets gate (faucets_gate), HTTP
// tokens (http_tokens) and the access view session threads read. It owns
// no job, node or step table and no handler of its own: messages reach the
// parts through one routing table (routes()); the core's decisions become
// the parts' calls here (apply_decisions); a job's end is fanned out to
// every part here (on_final). Its own files: controller.cpp (routing,
// deciding, endings), controller_recover.cpp (the parts filled from the
// store), controller_observe.cpp (snapshots and estimates for the HTTP
// front and the Faucets uplink). Everything that touches the scheduling
// state runs on the pipeline's strand.
class controller final : public dispatcher {
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
  // Logs each stall of the scheduling strand longer than o.threshold, with
  // what held it (daemon_base/loop_watch.hpp). Call before start().
  void watch_strand(loop_watch::options o) { pipe_.watch_strand(o); }

  // dispatcher
  void on_open(const std::shared_ptr<connection>& conn) override;
  void on_message(const std::shared_ptr<connection>& conn, protocol::message m) override;
  void on_close(const std::shared_ptr<connection>& conn) override;
  std::optional<std::string> tcp_key(protocol::peer_role role, std::optional<std::int64_t> job_id) override {
    return view_.tcp_key(role, job_id);
  }
  // The one routing table (controller.cpp): every message aqsd takes, the
  // roles that may send it, any further permission rule, the part that
  // handles it and where it runs.
  static const routing_table<controller>& routes();

  // ---- for read-only fronts (controller_observe.cpp) ----------------------
  // The bearer tokens this daemon issues (ftoken) and the HTTP front checks.
  const token_authority& tokens() const noexcept { return tokens_.authority(); }
  // Dashboard login codes (ftoken --login) exchanged for tokens (thread-safe).
  http_tokens& logins() noexcept { return tokens_; }
  // Counters and latencies for /metrics.
  const metrics& stats() const noexcept { return pipe_.stats(); }
  // The values running jobs publish (thread-safe; job_telemetry.hpp).
  job_telemetry& telemetry() noexcept { return telemetry_; }
  // Takes a snapshot on the strand and calls `done` with it there (keep it
  // short: post elsewhere for anything slow). Never called once stopped.
  void snapshot(std::function<void(cluster_snapshot)> done);
  // Called on the strand with every committed state or map change; add
  // before start(). Must not block. Every sink added is called.
  void on_change(change_sink sink) { watchers_.on_change(std::move(sink)); }
  // The gate of jobs a Faucets server placed here (faucets_gate.hpp): the
  // uplink closes, opens and releases it, and sets its start check.
  faucets_gate& faucets() noexcept { return gate_; }
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
  // After a final transition committed: every part lets the job go.
  void on_final(std::int64_t id, core::job_state state, std::optional<std::int32_t> code = std::nullopt,
                std::optional<std::int32_t> signal = std::nullopt);
  job_table& jobs() noexcept { return intake_.jobs(); }

  std::function<void()> request_stop_;
  clock& clock_;
  // The strand, the store's writer and readers, the batch, the counters
  // (write_pipeline.hpp).
  write_pipeline pipe_;

  // The scheduling state and its parts: touched on the strand only.
  core::scheduler sched_;
  // Accounts, limits, priority and usage (before the intake, which asks it).
  job_accounting accounts_;
  // Advance reservations (they need the view's node names, read only when called).
  job_reservations reservations_;
  // Before the nodes and resize parts, which are handed it as node_jobs and
  // resize_jobs (a base of an object not yet constructed is no reference to
  // take); it only keeps references to the parts after it until it is called.
  launcher launcher_;
  node_manager nodes_;
  job_intake intake_;  // owns the job table: before the parts that read it
  resize_manager resizes_;
  step_manager steps_;  // after intake_ and nodes_
  job_control control_;
  job_views views_;

  // Read from session threads (thread-safe).
  access_view view_;
  http_tokens tokens_;
  job_watchers watchers_;
  faucets_gate gate_;
  job_telemetry telemetry_;  // after view_, which it asks whose a job is
};

}  // namespace aqs::daemon
