// latency_table: rows replaced per report, and forgotten with their nodes;
// which peers each agent probes.
#include "daemon/latency_table.hpp"

#include <set>

#include "logging/log.hpp"

namespace aqs::daemon {

namespace {

// The address other agents reach node `n`'s probe socket at, seen from an
// agent connected like `from`: the TCP peer address of its agent; for an
// agent on aqsd's Unix socket, the loopback, for agents on this machine
// only. Empty: unreachable from there.
std::string probe_address(const peer_info& of, const peer_info& from) {
  if (of.via == transport::tcp) return of.address;
  if (of.via == transport::unix_socket && from.via == transport::unix_socket) return "127.0.0.1";
  return {};
}

}  // namespace

std::size_t latency_table::set_row(const std::string& from, const std::vector<protocol::latency_sample>& samples,
                                   const std::function<bool(const std::string&)>& is_peer) {
  std::map<std::string, std::int64_t> row;
  std::size_t dropped = 0;
  for (const auto& s : samples) {
    if (s.node == from || s.rtt_us < 0 || !is_peer(s.node)) {
      ++dropped;
      continue;
    }
    row[s.node] = s.rtt_us;
  }
  if (row.empty()) {
    rows_.erase(from);
  } else {
    rows_[from] = std::move(row);
  }
  return dropped;
}

void latency_table::forget(const std::string& node) {
  rows_.erase(node);
  for (auto& [from, row] : rows_) row.erase(node);
}

std::vector<protocol::latency_sample> latency_table::row(const std::string& from) const {
  std::vector<protocol::latency_sample> out;
  const auto it = rows_.find(from);
  if (it == rows_.end()) return out;
  out.reserve(it->second.size());
  for (const auto& [to, rtt] : it->second) out.push_back({to, rtt});
  return out;
}

std::vector<protocol::probe_peer> latency_table::peers_of(const node_entry& n, const node_registry& nodes,
                                                         const core::cluster& machine) {
  std::vector<protocol::probe_peer> out;
  if (!n.conn) return out;
  for (const node_entry& m : nodes) {
    if (m.index == n.index || !m.conn || m.probe_port <= 0) continue;
    if (machine.at(m.index).state == core::node_state::down) continue;
    std::string address = probe_address(m.conn->peer(), n.conn->peer());
    if (address.empty()) continue;
    out.push_back({m.name, std::move(address), m.probe_port});
    if (out.size() >= protocol::k_max_latency_peers) break;
  }
  return out;
}

protocol::ok latency_table::heartbeat_ok(node_entry& n, std::int64_t id, const node_registry& nodes,
                                         const core::cluster& machine) {
  // Agents without a probe socket (older ones too) are never sent peers.
  if (n.probe_port <= 0 || n.peers_sent == peers_version_) return protocol::ok{id, {}};
  n.peers_sent = peers_version_;
  return protocol::make_ok(id, protocol::heartbeat_reply{peers_of(n, nodes, machine)});
}

void latency_table::take_report(const node_entry& n, const std::vector<protocol::latency_sample>& samples,
                                const node_registry& nodes, const core::cluster& machine) {
  std::set<std::string> peers;
  for (auto& p : peers_of(n, nodes, machine)) peers.insert(std::move(p.name));
  // A peer that went DOWN since the agent's round began is routine; a name
  // aqsd never had means a confused or hostile agent.
  std::size_t strange = 0;
  const auto is_peer = [&](const std::string& name) {
    if (peers.count(name) != 0) return true;
    if (nodes.find(name) == nullptr) ++strange;
    return false;
  };
  set_row(n.name, samples, is_peer);
  // At most one line per report (one per probe round of that agent).
  if (strange > 0) {
    logging::warn("node {}: ignored {} of {} latency samples naming unknown nodes", n.name, strange,
                  samples.size());
  }
}

}  // namespace aqs::daemon
