// latency_prober: the probe socket's answering loop, the probe rounds, and
// the quiet refusal of anything not signed with the cluster key.
#include "latency_prober.hpp"

#include <algorithm>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "logging/log.hpp"

namespace aqs::node {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::udp;
using clock = std::chrono::steady_clock;

namespace {

// Probe stamps are wall-clock time: the responder compares them with its
// own clock (freshness), which a monotonic clock of another machine is not.
std::int64_t realtime_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

latency_prober::latency_prober(asio::io_context& io, prober_options o, round_callback on_round)
    : io_(io), o_(std::move(o)), on_round_(std::move(on_round)), sock_(io), wake_(io) {}

latency_prober::~latency_prober() {
  *alive_ = false;
  stop();
}

void latency_prober::start() {
  boost::system::error_code ec;
  sock_.open(udp::v4(), ec);
  if (!ec) sock_.bind(udp::endpoint(udp::v4(), o_.port), ec);
  if (ec) {
    throw std::runtime_error("cannot open the latency probe socket on UDP port " + std::to_string(o_.port) + ": " +
                             ec.message());
  }
  port_ = sock_.local_endpoint(ec).port();
  next_round_ = clock::now() + o_.first_round;
  asio::co_spawn(io_, answer_loop(alive_), asio::detached);
  asio::co_spawn(io_, round_loop(alive_), asio::detached);
}

void latency_prober::stop() {
  stopped_ = true;
  boost::system::error_code ec;
  sock_.close(ec);
  wake_.cancel();
  if (pending_ && pending_->timer != nullptr) pending_->timer->cancel();
}

void latency_prober::set_peers(std::vector<protocol::probe_peer> peers) {
  if (peers == peers_) return;
  peers_ = std::move(peers);
  soon();
}

void latency_prober::soon() {
  if (in_round_) {
    again_soon_ = true;
    return;
  }
  next_round_ = std::min(next_round_, clock::now() + o_.first_round);
  wake_.cancel();
}

awaitable<void> latency_prober::round_loop(std::shared_ptr<bool> alive) {
  while (*alive && !stopped_) {
    wake_.expires_at(next_round_);
    boost::system::error_code ec;
    co_await wake_.async_wait(asio::redirect_error(use_awaitable, ec));
    if (!*alive || stopped_) co_return;
    if (clock::now() < next_round_) continue;  // woken to look at a new time
    in_round_ = true;
    again_soon_ = false;
    const std::vector<protocol::probe_peer> peers = peers_;
    std::vector<protocol::latency_sample> samples;
    for (const auto& p : peers) {
      const auto address = asio::ip::make_address(p.address, ec);
      if (ec || !address.is_v4() || p.port <= 0 || p.port > 65535) continue;  // IPv4 only: the socket is
      const udp::endpoint to(address, static_cast<std::uint16_t>(p.port));
      std::optional<std::int64_t> best;
      for (int i = 0; i < o_.probes; ++i) {
        const auto rtt = co_await probe_once(alive, to);
        if (!*alive || stopped_) co_return;
        if (rtt && (!best || *rtt < *best)) best = rtt;
      }
      if (best) samples.push_back({p.name, std::min(*best, protocol::k_max_rtt_us)});
    }
    in_round_ = false;
    next_round_ = clock::now() + (again_soon_ ? o_.first_round : o_.interval);
    if (on_round_) on_round_(std::move(samples));
  }
}

awaitable<std::optional<std::int64_t>> latency_prober::probe_once(std::shared_ptr<bool> alive, udp::endpoint to) {
  const protocol::probe_packet req = protocol::make_probe_request(realtime_us());
  const auto bytes = protocol::encode_probe(o_.key, req);
  asio::steady_timer timer(io_);
  timer.expires_after(o_.timeout);
  pending_ = pending_probe{req.nonce, clock::now(), std::nullopt, &timer};
  boost::system::error_code ec;
  co_await sock_.async_send_to(asio::buffer(bytes), to, asio::redirect_error(use_awaitable, ec));
  if (!*alive) co_return std::nullopt;
  // The answer may have come while the send completed; else wait for it
  // (on_datagram cancels the timer) or for the timeout.
  if (!ec && !pending_->rtt_us) co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
  if (!*alive) co_return std::nullopt;
  const std::optional<std::int64_t> rtt = pending_ ? pending_->rtt_us : std::nullopt;
  pending_.reset();
  co_return rtt;
}

awaitable<void> latency_prober::answer_loop(std::shared_ptr<bool> alive) {
  while (*alive && !stopped_) {
    udp::endpoint from;
    boost::system::error_code ec;
    const std::size_t n =
        co_await sock_.async_receive_from(asio::buffer(rbuf_), from, asio::redirect_error(use_awaitable, ec));
    if (!*alive || stopped_ || ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) co_return;
    if (ec) continue;  // an ICMP error of an earlier send: nothing to do with this socket's health
    on_datagram(n, from);
  }
}

void latency_prober::on_datagram(std::size_t n, const udp::endpoint& from) {
  const auto p = protocol::verify_probe(o_.key, std::span<const unsigned char>(rbuf_.data(), n));
  if (!p) return refuse("not a probe signed with the cluster key", from);
  if (p->kind == protocol::probe_kind::reply) {
    // The answer to the probe under way; a late one (after its timeout) or
    // a copy of one is ignored.
    if (pending_ && !pending_->rtt_us && pending_->nonce == p->nonce) {
      pending_->rtt_us = std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - pending_->sent).count();
      if (pending_->timer != nullptr) pending_->timer->cancel();
    }
    return;
  }
  if (!replays_.first_use(*p, realtime_us())) return refuse("a stale or replayed probe", from);
  // The reply is as long as the request: nothing to gain by forging one.
  auto out = std::make_shared<std::array<unsigned char, protocol::k_probe_size>>(
      protocol::encode_probe(o_.key, protocol::reply_to(*p)));
  sock_.async_send_to(asio::buffer(*out), from, [out](boost::system::error_code, std::size_t) {});
}

void latency_prober::refuse(const char* why, const udp::endpoint& from) {
  ++refused_;
  // Refused silently to the sender; in the log at debug level, at most once
  // a minute, so that a flood cannot fill the disk.
  const auto t = clock::now();
  if (t - refusal_logged_at_ < std::chrono::minutes(1)) return;
  logging::debug("latency probe socket: refused {} datagram(s) since the last note; the last from {}:{}: {}",
                 refused_ - refused_logged_, from.address().to_string(), from.port(), why);
  refused_logged_ = refused_;
  refusal_logged_at_ = t;
}

}  // namespace aqs::node
