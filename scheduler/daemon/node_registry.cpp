// node_registry: lookups and the placement of maps on hosts and cpus.
#include "daemon/node_registry.hpp"

#include <algorithm>
#include <stdexcept>

#include "daemon/access_view.hpp"

namespace aqs::daemon {

node_entry& node_registry::add(node_entry n) {
  if (n.index != nodes_.size() || by_name_.count(n.name) != 0) {
    throw std::logic_error("node " + n.name + " registered out of order or twice");
  }
  by_name_[n.name] = n.index;
  nodes_.push_back(std::move(n));
  return nodes_.back();
}

node_entry* node_registry::find(const std::string& name) {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &nodes_[it->second];
}

const node_entry* node_registry::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &nodes_[it->second];
}

const node_entry* node_registry::of_conn(const connection& c) const {
  for (const auto& n : nodes_) {
    if (n.conn && n.conn->serial() == c.serial()) return &n;
  }
  return nullptr;
}

node_entry* node_registry::of_conn(const connection& c) {
  for (auto& n : nodes_) {
    if (n.conn && n.conn->serial() == c.serial()) return &n;
  }
  return nullptr;
}

std::vector<core::node_span> node_registry::spans() const {
  std::vector<core::node_span> s;
  s.reserve(nodes_.size());
  for (const auto& n : nodes_) s.push_back({n.name, n.first_proc, n.nprocs});
  return s;
}

std::set<std::string> node_registry::agent_addresses() const {
  std::set<std::string> addrs;
  for (const auto& n : nodes_) {
    if (n.conn) add_agent_address(n.conn->peer(), addrs);
  }
  return addrs;
}

std::vector<std::int64_t> node_registry::local_cpus(const node_entry& n, const core::processor_set& procs) {
  std::vector<std::int64_t> out;
  if (n.cpus.empty()) return out;
  for (std::size_t p = procs.find_next(n.first_proc); p != core::processor_set::npos && p < n.first_proc + n.nprocs;
       p = procs.find_next(p + 1)) {
    const std::int64_t cpu = n.cpus[(p - n.first_proc) % n.cpus.size()];
    if (std::find(out.begin(), out.end(), cpu) == out.end()) out.push_back(cpu);
  }
  return out;
}

void node_registry::fill_placement(const core::processor_set& procs, std::vector<std::string>& hosts,
                                   std::vector<std::int64_t>& cpus) const {
  hosts.clear();
  cpus.clear();
  if (procs.count() > protocol::k_max_placement) return;  // too big to list: the shim guesses
  std::size_t node = 0;
  for (std::size_t p = procs.first(); p != core::processor_set::npos; p = procs.find_next(p + 1)) {
    while (node < nodes_.size() && p >= nodes_[node].first_proc + nodes_[node].nprocs) ++node;
    if (node == nodes_.size()) break;
    const node_entry& n = nodes_[node];
    hosts.push_back(n.host_or_name());
    cpus.push_back(n.cpus.empty() ? 0 : n.cpus[(p - n.first_proc) % n.cpus.size()]);
  }
  if (hosts.size() != procs.count()) {
    hosts.clear();
    cpus.clear();
  }
}

std::vector<std::string> node_registry::spare_hosts(const core::processor_set& procs,
                                                    const core::cluster& machine) const {
  std::vector<std::string> used, out;
  for (const node_entry& n : nodes_) {
    if (procs.count_range(n.first_proc, n.first_proc + n.nprocs) > 0) used.push_back(n.host_or_name());
  }
  for (const node_entry& n : nodes_) {
    const std::string& h = n.host_or_name();
    // A host whose agent cannot start mpirun's daemon would fail the job.
    if (!n.conn || machine.at(n.index).state != core::node_state::up) continue;
    if (std::find(used.begin(), used.end(), h) != used.end() || std::find(out.begin(), out.end(), h) != out.end()) {
      continue;
    }
    out.push_back(h);
  }
  return out;
}

}  // namespace aqs::daemon
