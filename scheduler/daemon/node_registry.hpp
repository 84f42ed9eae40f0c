// node_registry: what aqsd knows of each node beyond the core's processor
// counts: its agent's connection, host, cpus, memory and GPUs, when it was
// last heard from, and what waits for its agent; and where a processor map
// lands on hosts and cpus (placement, spare hosts, local cpus). On the strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/cluster.hpp"
#include "core/map_display.hpp"
#include "core/processor_set.hpp"
#include "daemon_base/dispatcher.hpp"

namespace aqs::daemon {

struct node_entry {
  using time_point = std::chrono::steady_clock::time_point;
  std::string name;
  std::size_t index = 0;  // in the core's cluster
  std::size_t first_proc = 0;
  std::size_t nprocs = 0;
  std::vector<std::int64_t> cpus;  // local cpus; processor i runs on cpus[i % size]
  std::string host;                // the machine, as MPI names it (from register)
  std::int64_t memory_mb = 0;
  std::int64_t gpus = 0;
  std::shared_ptr<connection> conn;  // the agent, when connected
  time_point last_seen{};
  time_point last_stored_heartbeat{};
  std::vector<protocol::message> queued;  // for the agent once it is back
  std::int64_t probe_port = 0;   // its agent's UDP latency probe port (0: none)
  std::string containment;       // how its agent contains jobs (register), for fnodes
  std::uint64_t peers_sent = 0;  // latency_table's peers version its agent was last sent

  // The host, or the name until its agent registered (recovered nodes).
  const std::string& host_or_name() const { return host.empty() ? name : host; }
};

class node_registry {
public:
  // Appends a node; its index must be the next one (the core numbers nodes
  // in registration order). Throws std::logic_error otherwise.
  node_entry& add(node_entry n);
  node_entry* find(const std::string& name);
  const node_entry* find(const std::string& name) const;
  node_entry& at(std::size_t index) { return nodes_.at(index); }
  const node_entry& at(std::size_t index) const { return nodes_.at(index); }
  // The node whose agent is `c`, or null.
  node_entry* of_conn(const connection& c);
  const node_entry* of_conn(const connection& c) const;
  std::size_t size() const noexcept { return nodes_.size(); }
  std::vector<node_entry>::iterator begin() { return nodes_.begin(); }
  std::vector<node_entry>::iterator end() { return nodes_.end(); }
  std::vector<node_entry>::const_iterator begin() const { return nodes_.begin(); }
  std::vector<node_entry>::const_iterator end() const { return nodes_.end(); }

  // Name and processor range of every node (map display).
  std::vector<core::node_span> spans() const;
  // The addresses processes started by the connected agents come from.
  std::set<std::string> agent_addresses() const;

  // The distinct local cpus of node `n` that `procs` covers, in order.
  static std::vector<std::int64_t> local_cpus(const node_entry& n, const core::processor_set& procs);
  // Host and cpu of every processor of `procs` (protocol launch/new_map
  // placement); both empty if a processor is on no known node or the map
  // is too large to list.
  void fill_placement(const core::processor_set& procs, std::vector<std::string>& hosts,
                      std::vector<std::int64_t>& cpus) const;
  // The hosts of the UP, connected nodes that hold none of `procs`, once
  // each in registration order: where an adaptive job may grow (its mpirun
  // starts a daemon on each at launch).
  std::vector<std::string> spare_hosts(const core::processor_set& procs, const core::cluster& machine) const;

private:
  std::vector<node_entry> nodes_;
  std::unordered_map<std::string, std::size_t> by_name_;
};

}  // namespace aqs::daemon
