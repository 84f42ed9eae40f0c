// node_manager: the nodes part of aqsd: the node table (node_registry),
// agents registering (new nodes numbered after the last, agreed with the
// store), heartbeats, agents leaving, messages to agents (queued while an
// agent is away), and fencing: a node whose agent falls silent for the
// heartbeat timeout goes DOWN (its agent fences its own jobs one heartbeat
// before, see docs/architecture.md).
//
// Rule: on the scheduling strand only; the controller wires it and the
// routing table sends it `register`, `heartbeat` and `node_leaving`. Other
// parts read the table through the const interface and reach agents
// through send(). What a node's state means for its jobs (adopting or
// killing what a registering agent runs, lost jobs, relaunches) is asked of
// `node_jobs`, which owns no node state; what must be stored goes through
// the `pipeline`.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "core/scheduler.hpp"
#include "daemon/clock.hpp"
#include "daemon/latency_table.hpp"
#include "daemon/node_registry.hpp"
#include "daemon/pipeline.hpp"

namespace aqs::daemon {

// What the nodes part asks of the jobs' side (the controller implements it).
// On the strand.
class node_jobs {
public:
  // Node `index`'s agent registered listing `running` (this cluster's jobs
  // it still runs): those it may keep are adopted; returns those it must
  // kill (they ended here meanwhile).
  virtual std::vector<std::int64_t> adopt_running(std::size_t index, const std::vector<std::int64_t>& running) = 0;
  // Whether `queued` (kept for node `index` while its agent was away) is
  // still to be delivered: a launch of a job that no longer runs there is not.
  virtual bool still_wanted(std::size_t index, const protocol::message& queued) = 0;
  // Node `index`'s heartbeat listed `running`: jobs it never got are
  // launched again, jobs it lost are ended.
  virtual void jobs_reported(std::size_t index, const std::vector<std::int64_t>& running) = 0;
  // The nodes' numbering or resources changed (the read views follow).
  virtual void refresh_spans() = 0;
  // An agent connected or went (job addresses follow).
  virtual void refresh_agent_addresses() = 0;
  // This cluster's id, told to registering agents.
  virtual const std::string& cluster_id() const = 0;

protected:
  ~node_jobs() = default;
};

class node_manager {
public:
  // Heartbeat checks run on `strand` through `time`.
  node_manager(core::scheduler& core, clock& time, boost::asio::any_io_executor strand, pipeline& out,
               node_jobs& jobs, std::chrono::milliseconds heartbeat_timeout);

  // ---- the table ---------------------------------------------------------
  // Recovery: a node from the store (registration order). Throws
  // std::logic_error out of order.
  node_entry& add(node_entry n) { return table_.add(std::move(n)); }
  std::size_t size() const noexcept { return table_.size(); }
  const node_entry& at(std::size_t index) const { return table_.at(index); }
  const node_entry* find(const std::string& name) const { return table_.find(name); }
  // The node whose agent is `c`, or null.
  const node_entry* of_conn(const connection& c) const { return table_.of_conn(c); }
  auto begin() const { return table_.begin(); }
  auto end() const { return table_.end(); }
  std::vector<core::node_span> spans() const { return table_.spans(); }
  // The latencies node `name`'s agent measured to the others (fnodes).
  auto latency_row(const std::string& name) const { return latency_.row(name); }
  // A new id for a request aqsd sends an agent (launch, kill): unique for
  // this daemon's life, so that an agent's answer names its request.
  std::int64_t new_request_id() { return next_request_id_++; }
  // A launch of job `job` went out as request `rid`: the agent's answer
  // names only the request.
  void launch_sent(std::int64_t rid, std::int64_t job) { launches_[rid] = job; }
  // The job launch request `rid` was for, forgotten; nullopt: it was not a
  // launch (a kill's answer).
  std::optional<std::int64_t> launch_answered(std::int64_t rid) {
    auto it = launches_.find(rid);
    if (it == launches_.end()) return std::nullopt;
    const std::int64_t job = it->second;
    launches_.erase(it);
    return job;
  }
  std::set<std::string> agent_addresses() const { return table_.agent_addresses(); }
  void fill_placement(const core::processor_set& procs, std::vector<std::string>& hosts,
                      std::vector<std::int64_t>& cpus) const {
    table_.fill_placement(procs, hosts, cpus);
  }
  std::vector<std::string> spare_hosts(const core::processor_set& procs) const {
    return table_.spare_hosts(procs, core_.machine());
  }
  // Whether node `index` exists and is not DOWN.
  bool is_up(std::size_t index) const {
    return index < table_.size() && core_.machine().at(index).state != core::node_state::down;
  }

  // ---- agents -------------------------------------------------------------
  void handle_register(const std::shared_ptr<connection>& c, const protocol::register_node& m);
  void handle_heartbeat(const std::shared_ptr<connection>& c, const protocol::heartbeat& m);
  // The agent is shutting down (SIGTERM): its node goes DOWN now.
  void handle_node_leaving(const std::shared_ptr<connection>& c, const protocol::node_leaving& m);
  // Any other message from `c`: if it is an agent, it is alive. Its node,
  // or null.
  const node_entry* heard(const connection& c);
  // `c` closed: if it was an agent, its node has none until it comes back
  // (it goes DOWN only after the heartbeat timeout).
  void disconnected(const connection& c);
  // Sends `m` to node `index`'s agent, or keeps it until the agent is back.
  void send(std::size_t index, protocol::message m);

  // Once an agent's registration is answered (and what was kept for it has
  // gone out), each hook gets its node and the jobs it runs that it keeps:
  // what a part must tell an agent again after a restart (on the strand).
  using registered_hook = std::function<void(std::size_t index, const std::vector<std::int64_t>& kept)>;
  void on_registered(registered_hook h) { registered_.push_back(std::move(h)); }

  // Starts the heartbeat checks (every 200 ms of `time`).
  void start() { check_heartbeats(); }

private:
  void finish_register(const std::shared_ptr<connection>& c, const protocol::register_node& m, std::size_t index);
  void check_heartbeats();
  void node_down(std::size_t index, const std::string& why);

  core::scheduler& core_;
  clock& clock_;
  boost::asio::any_io_executor strand_;
  pipeline& out_;
  node_jobs& jobs_;
  latency_table latency_;  // the nodes' measured latencies (the nodes part owns it)
  std::int64_t next_request_id_ = 1;
  std::map<std::int64_t, std::int64_t> launches_;  // launch request id -> job
  std::chrono::milliseconds heartbeat_timeout_;
  node_registry table_;
  std::unique_ptr<timer_handle> heartbeat_timer_;
  std::vector<registered_hook> registered_;
};

}  // namespace aqs::daemon
