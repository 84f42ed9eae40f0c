// agent: aqs-node's link to aqsd: registers this node, heartbeats, starts and
// kills jobs on request, and reports how they end, across reconnects.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <utility>  // Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio/awaitable.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "job_output.hpp"
#include "job_script.hpp"
#include "job_stats.hpp"
#include "job_supervisor.hpp"
#include "latency_prober.hpp"
#include "protocol/framing.hpp"
#include "protocol/messages.hpp"

namespace aqs::node {

struct agent_options {
  std::string name;                         // node name, unique in the cluster
  std::optional<std::string> socket_path;   // aqsd's Unix socket (same machine), or
  std::optional<std::string> server;        // aqsd's "HOST:PORT" (TCP, with key)
  std::string key;                          // the cluster key (TCP only)
  std::vector<int> cpus;                    // local cores jobs are pinned to
  std::int64_t procs = 0;                   // processors advertised (>= 1)
  std::int64_t memory_mb = 0;
  std::int64_t gpus = 0;
  std::filesystem::path spool;              // job scripts are written here
  std::string rsh_agent;                    // aqs-rsh, for MPI jobs on several hosts ("": none)
  std::vector<std::string> mpi_interfaces;  // OpenMPI's TCP traffic only on these ("eth1", "10.0.0.0/8"; empty: any)
  std::chrono::milliseconds heartbeat{2000};
  std::chrono::milliseconds reconnect_max{2000};
  std::chrono::milliseconds timeout_grace{5000};  // SIGTERM to SIGKILL at a time limit
  // aqsd's --heartbeat-timeout: how long after the agent's last word aqsd
  // declares the node DOWN (and may start its jobs elsewhere).
  std::chrono::milliseconds node_down_timeout{10000};
  // The latency probe socket (fnodes --latency): opened when the agent
  // holds the cluster key (probes are signed with it), on this UDP port
  // (0: any free one), probing its peers every probe_interval.
  bool probe = true;
  std::uint16_t probe_port = 0;
  std::chrono::milliseconds probe_interval{15000};
  // Containment (--cgroups, --cgroup-root, --pids-limit): probed at start();
  // the node name is filled in from `name`.
  cgroup_options cgroups;
};

// When a job whose agent died kills itself: SIGKILL one heartbeat before
// aqsd can declare the node DOWN (its last heartbeat may have been that
// long before it died), so that a requeued job never runs twice at once;
// SIGTERM up to 2 s before that. A new agent must adopt the job before the
// SIGTERM to keep it.
fencing fencing_for(const agent_options& o);

// aqs-rsh next to this executable (an installation), else the one of the
// build tree aqs-node was built in, else "".
std::string default_rsh_agent();

// Single-threaded: runs on one thread's io_context with its job_supervisor.
// While aqsd is away the jobs keep running; the agent reconnects with
// backoff, registers again with the jobs it still runs, and resends every
// report aqsd has not acknowledged (job_started, job_exited), so no job's
// end is lost. A refusal that retrying cannot fix (wrong key, other protocol
// version, registration refused) is fatal: on_fatal gets the one-line reason.
class agent {
public:
  agent(boost::asio::io_context& io, agent_options options, std::function<void(const std::string&)> on_fatal);
  ~agent();
  agent(const agent&) = delete;
  agent& operator=(const agent&) = delete;

  // Creates the spool directory, opens the latency probe socket and starts
  // connecting. Throws std::runtime_error if the spool directory cannot be
  // created, or exists but is not a directory of this agent's user (a
  // symlink, or another user's: the agent writes scripts there as root),
  // or if the probe port cannot be bound.
  void start();
  // The orderly end (SIGTERM): takes no new jobs, ends the running ones
  // (SIGTERM, grace, SIGKILL; reported CANCELLED), waits until aqsd has
  // acknowledged their ends (bounded), then stops and calls done.
  void shutdown(std::function<void()> done);
  // Disconnects and stops reconnecting at once; running jobs are left alone.
  void stop();

private:
  boost::asio::awaitable<void> run();
  boost::asio::awaitable<bool> serve_once();
  boost::asio::awaitable<bool> converse(const std::string& where);
  boost::asio::awaitable<std::optional<protocol::message>> read_one();
  boost::asio::awaitable<void> heartbeat_loop(std::uint64_t generation);
  boost::asio::awaitable<void> write_loop();
  boost::asio::awaitable<void> drain(std::function<void()> done);

  bool connect_endpoint(boost::asio::generic::stream_protocol::endpoint& ep, std::string& where);
  std::optional<protocol::message> take_frame();
  void send(const protocol::message& m);
  void report(protocol::message m);  // a request kept until acknowledged
  void handle(protocol::message m);
  void handle_launch(const protocol::launch& l);
  // An adaptive job's cpus here changed (a resize): its cpuset follows.
  void handle_job_cpus(const protocol::job_cpus& m);
  void refuse_launch(const protocol::launch& l, protocol::error_code code, const std::string& why);
  // The launch's step in the job's cgroup here: "batch" on the job's first
  // node, else the job's steps on this node numbered from 0 in launch order.
  std::string step_of(const protocol::launch& l);
  // What the launch's answer does once the step has started the job or failed to.
  job_supervisor::started_callback on_started(const protocol::launch& l);
  void on_job_end(const job_outcome& o);
  void report_end(const job_outcome& o);
  // After adopting: removes spool files of jobs not running here.
  void remove_stale_job_files();
  // The cluster aqsd named at registration is `cluster_id`: the job records
  // go to its own spool directory, and the jobs found there are adopted;
  // another cluster's are set aside (logged, never adopted or killed).
  // False (after fail()) if its directory cannot be made.
  bool take_cluster(const std::string& cluster_id, const std::string& where);
  // The spool directory of the cluster this agent registered with.
  std::filesystem::path job_spool() const { return supervisor_.spool(); }
  void send_output(protocol::output o);
  void fail(const std::string& why);
  void log(const std::string& line) const;   // aqs::logging, info
  void warn(const std::string& line) const;  // aqs::logging, warning
  std::int64_t next_id() { return next_id_++; }

  boost::asio::io_context& io_;
  agent_options options_;
  std::function<void(const std::string&)> on_fatal_;
  job_supervisor supervisor_;
  std::unique_ptr<boost::asio::generic::stream_protocol::socket> sock_;
  boost::asio::steady_timer backoff_timer_;
  protocol::frame_decoder decoder_;
  std::vector<std::string> frames_;
  std::array<char, 64 * 1024> buf_{};
  std::deque<std::string> out_;  // frames to write, in order (deque: appending keeps the front in place)
  bool writing_ = false;
  bool connected_ = false;
  bool stopping_ = false;
  bool draining_ = false;
  std::uint64_t generation_ = 0;  // connection count: old heartbeat loops stop
  std::int64_t next_id_ = 1;
  // Fencing renewals: when each heartbeat not yet acknowledged went out,
  // and the registration (CLOCK_MONOTONIC ms); an acknowledgement renews
  // the steps' leases with that time (job_supervisor::renew).
  std::map<std::int64_t, std::int64_t> heartbeat_sent_;
  // A slow acknowledgement (or a heartbeat gone out late) is logged once per
  // episode: it is what makes the steps fence their jobs (job_supervisor).
  std::int64_t last_heartbeat_ms_ = 0;
  bool slow_acks_ = false;
  std::map<std::int64_t, protocol::message> outbox_;  // id -> unacknowledged report
  output_forwarder output_;                           // interactive jobs' stdout and stderr
  std::deque<protocol::output> pending_output_;       // while aqsd is away (bounded)
  std::size_t pending_output_bytes_ = 0;
  std::set<std::int64_t> ended_for_leaving_;  // killed by shutdown(): aqsd ends them with the node
  std::optional<std::int64_t> leaving_id_;     // node_leaving sent with this id
  bool left_ = false;                          // ... and acknowledged
  std::unique_ptr<latency_prober> prober_;  // with a key only
  // The last probe round's round trips, for the next heartbeat.
  std::optional<std::vector<protocol::latency_sample>> latency_report_;
  std::unique_ptr<spool_lock> spool_lock_;   // held from start() on
  std::optional<std::string> spool_cluster_;  // the cluster the spool's agent served last (spool/cluster)
  std::string cluster_;                       // the cluster aqsd named at registration ("": not yet)
  std::string last_error_;  // last connection error logged (no log flood while aqsd is down)
  // How jobs are contained here, one line (the cgroup backend, or why the
  // agent falls back to process groups and polling).
  std::string containment_;
  bool cgroups_usable_ = false;  // the probe at start found a backend
  // sstat's measurements, on the node's local stat socket (null: not bound).
  std::unique_ptr<job_stats_server> stats_;
  std::map<std::int64_t, std::int64_t> step_counts_;  // job -> steps launched here (step_of)
};

}  // namespace aqs::node
