// latency_prober: the agent's UDP probe socket. It answers other agents'
// probes signed with the cluster key (and nothing else), and times a few
// probes to each peer aqsd named, each round, for fnodes --latency.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <utility>  // Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "protocol/latency.hpp"
#include "protocol/probe_packet.hpp"

namespace aqs::node {

struct prober_options {
  std::string key;                              // the cluster key: probes are signed with it
  std::uint16_t port = 0;                       // UDP port to answer on; 0: any free one
  std::chrono::milliseconds interval{15000};    // between rounds
  std::chrono::milliseconds first_round{1000};  // after start, and after the peers change
  int probes = 5;                               // per peer and round; the least round trip counts
  std::chrono::milliseconds timeout{500};       // for each probe's answer
};

// Single-threaded, on the agent's io_context. Each round probes the peers
// one after the other (probes one at a time), then hands on_round the least
// round trip to each peer that answered at least once; peers that never
// answered are left out.
class latency_prober {
public:
  using round_callback = std::function<void(std::vector<protocol::latency_sample>)>;
  latency_prober(boost::asio::io_context& io, prober_options o, round_callback on_round);
  ~latency_prober();
  latency_prober(const latency_prober&) = delete;
  latency_prober& operator=(const latency_prober&) = delete;

  // Binds the socket (IPv4, every address) and starts answering and
  // probing. Throws std::runtime_error naming the port when it cannot be
  // bound (in use, not allowed).
  void start();
  // The UDP port bound (after start).
  std::uint16_t port() const noexcept { return port_; }
  // The nodes to probe from now on; a round follows soon when they changed.
  void set_peers(std::vector<protocol::probe_peer> peers);
  // Closes the socket; the loops end.
  void stop();
  // Datagrams refused so far: not a probe signed with the key, or a stale or
  // replayed request.
  std::uint64_t refused() const noexcept { return refused_; }

private:
  struct pending_probe {
    protocol::probe_nonce nonce{};
    std::chrono::steady_clock::time_point sent;
    std::optional<std::int64_t> rtt_us;
    boost::asio::steady_timer* timer = nullptr;
  };
  // The loops hold `alive` and look at it after each wait: a wait that ends
  // after the prober is gone touches nothing of it.
  boost::asio::awaitable<void> answer_loop(std::shared_ptr<bool> alive);
  boost::asio::awaitable<void> round_loop(std::shared_ptr<bool> alive);
  boost::asio::awaitable<std::optional<std::int64_t>> probe_once(std::shared_ptr<bool> alive,
                                                                  boost::asio::ip::udp::endpoint to);
  void on_datagram(std::size_t n, const boost::asio::ip::udp::endpoint& from);
  void refuse(const char* why, const boost::asio::ip::udp::endpoint& from);
  void soon();

  boost::asio::io_context& io_;
  prober_options o_;
  round_callback on_round_;
  boost::asio::ip::udp::socket sock_;
  boost::asio::steady_timer wake_;
  std::uint16_t port_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool stopped_ = false;
  bool in_round_ = false;
  bool again_soon_ = false;  // the peers changed during a round
  std::chrono::steady_clock::time_point next_round_;
  std::vector<protocol::probe_peer> peers_;
  std::optional<pending_probe> pending_;
  protocol::probe_replay_guard replays_;
  std::array<unsigned char, 2 * protocol::k_probe_size> rbuf_{};  // a longer datagram is cut and refused
  std::uint64_t refused_ = 0;
  std::uint64_t refused_logged_ = 0;
  std::chrono::steady_clock::time_point refusal_logged_at_{};
};

}  // namespace aqs::node
