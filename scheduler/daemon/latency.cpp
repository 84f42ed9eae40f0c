// latency: which nodes each agent probes (the UP ones with a probe socket,
// at the address their agent connects from), and the round trips agents
// report back in their heartbeats (fnodes --latency).
#include <set>
#include <string>

#include "daemon/controller.hpp"
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

std::vector<protocol::probe_peer> controller::probe_peers_of(const node_entry& n) const {
  std::vector<protocol::probe_peer> out;
  if (!n.conn) return out;
  for (const node_entry& m : nodes_) {
    if (m.index == n.index || !m.conn || m.probe_port <= 0) continue;
    if (sched_.machine().at(m.index).state == core::node_state::down) continue;
    std::string address = probe_address(m.conn->peer(), n.conn->peer());
    if (address.empty()) continue;
    out.push_back({m.name, std::move(address), m.probe_port});
    if (out.size() >= protocol::k_max_latency_peers) break;
  }
  return out;
}

protocol::ok controller::heartbeat_ok(node_entry& n, const protocol::heartbeat& m) {
  // Agents without a probe socket (older ones too) are never sent peers.
  if (n.probe_port <= 0 || n.peers_sent == peers_version_) return protocol::ok{m.id, {}};
  n.peers_sent = peers_version_;
  return protocol::make_ok(m.id, protocol::heartbeat_reply{probe_peers_of(n)});
}

void controller::take_latency_report(const node_entry& n, const std::vector<protocol::latency_sample>& samples) {
  std::set<std::string> peers;
  for (auto& p : probe_peers_of(n)) peers.insert(std::move(p.name));
  // A peer that went DOWN since the agent's round began is routine; a name
  // aqsd never had means a confused or hostile agent.
  std::size_t strange = 0;
  const auto is_peer = [&](const std::string& name) {
    if (peers.count(name) != 0) return true;
    if (nodes_.find(name) == nullptr) ++strange;
    return false;
  };
  latency_.set_row(n.name, samples, is_peer);
  // At most one line per report (one per probe round of that agent).
  if (strange > 0) {
    logging::warn("node {}: ignored {} of {} latency samples naming unknown nodes", n.name, strange,
                  samples.size());
  }
}

}  // namespace aqs::daemon
