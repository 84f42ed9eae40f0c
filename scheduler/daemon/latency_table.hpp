// latency_table: the latency part of aqsd: which nodes each agent probes
// (the UP ones with a probe socket, at the address their agent connects
// from), and the latest round trips agents report back in their heartbeats
// (fnodes --latency): one row per measuring node, replaced whole by each
// report, forgotten with a node that goes DOWN.
//
// Rule: on the scheduling strand only. node_manager calls it (a heartbeat's
// report and its ok, a node registering or going DOWN); the read views call
// row(). It reads the node table and the core's node states it is given and
// owns nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "daemon/node_registry.hpp"
#include "protocol/latency.hpp"
#include "protocol/replies.hpp"

namespace aqs::daemon {

class latency_table {
public:
  // Replaces what `from` measured with `samples`, keeping those whose node
  // `is_peer` accepts (a node it may probe: known, UP, not itself); a node
  // named twice keeps its last. Returns how many were dropped, so that the
  // caller can warn about an agent that reports nonsense.
  std::size_t set_row(const std::string& from, const std::vector<protocol::latency_sample>& samples,
                      const std::function<bool(const std::string&)>& is_peer);
  // Forgets what `node` measured and what was measured to it (it went DOWN:
  // the numbers no longer describe a path anybody can use).
  void forget(const std::string& node);
  // What `from` measured, by node name; empty when nothing.
  std::vector<protocol::latency_sample> row(const std::string& from) const;
  std::size_t rows() const noexcept { return rows_.size(); }

  // ---- probes -------------------------------------------------------------
  // The peers changed (a node registered or went DOWN): every agent is sent
  // its list again with its next heartbeat's ok.
  void peers_changed() noexcept { ++peers_version_; }
  // The peers node `n` probes: the other UP nodes of `nodes` (states from
  // `machine`) whose agent has a probe socket, at an address reachable from
  // `n`'s agent; at most protocol::k_max_latency_peers.
  static std::vector<protocol::probe_peer> peers_of(const node_entry& n, const node_registry& nodes,
                                                    const core::cluster& machine);
  // The ok to node `n`'s heartbeat `id`, with its peers if they changed
  // since it was last sent them (then `n.peers_sent` records it).
  protocol::ok heartbeat_ok(node_entry& n, std::int64_t id, const node_registry& nodes, const core::cluster& machine);
  // Node `n` reports its round trips: kept for its current peers; samples
  // naming nodes aqsd never had are dropped with one warning per report.
  void take_report(const node_entry& n, const std::vector<protocol::latency_sample>& samples,
                   const node_registry& nodes, const core::cluster& machine);

private:
  std::map<std::string, std::map<std::string, std::int64_t>> rows_;
  std::uint64_t peers_version_ = 1;
};

}  // namespace aqs::daemon
