// latency: the node-to-node round-trip times agents measure and report, and
// the peers aqsd tells each agent to probe (heartbeat, its ok, list_nodes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace aqs::protocol {

// At most this many peers in a heartbeat's ok, and this many samples in a
// heartbeat or in a listed node: probing is all pairs, meant for clusters of
// hundreds of nodes, not tens of thousands.
inline constexpr std::size_t k_max_latency_peers = 4096;
// A round trip longer than a minute is not a measurement.
inline constexpr std::int64_t k_max_rtt_us = 60'000'000;
// An IPv4 or IPv6 address as text ("10.0.0.2", "fe80::1%eth0").
inline constexpr std::size_t k_max_address = 64;

// One measured pair, seen from the node that measured it: the round trip to
// `node` in microseconds (the least of a few probes).
struct latency_sample {
  std::string node;
  std::int64_t rtt_us = 0;
  friend bool operator==(const latency_sample&, const latency_sample&) = default;
};

// A node an agent should probe: its name, the address its agent connects to
// aqsd from, and the UDP port of its probe socket.
struct probe_peer {
  std::string name;
  std::string address;
  std::int64_t port = 0;
  friend bool operator==(const probe_peer&, const probe_peer&) = default;
};

}  // namespace aqs::protocol
