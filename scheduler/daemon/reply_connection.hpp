// reply_connection: a connection made in-process for one request to the
// controller (an HTTP request, a job a Faucets server forwards): it carries
// who asks, catches the one reply (ok or error) and hands it on; pushes are
// dropped.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <variant>

#include "daemon_base/dispatcher.hpp"

namespace aqs::daemon {

class reply_connection final : public connection {
public:
  reply_connection(peer_info p, std::function<void(protocol::message)> deliver)
      : peer_(std::move(p)), deliver_(std::move(deliver)) {
    static std::atomic<std::uint64_t> next{std::uint64_t{1} << 62};  // apart from the socket server's serials
    serial_ = next++;
  }
  void send(protocol::message m) override {
    if (!std::holds_alternative<protocol::ok>(m) && !std::holds_alternative<protocol::error>(m)) return;
    std::function<void(protocol::message)> d;
    {
      std::lock_guard lock(mu_);
      d = std::move(deliver_);
      deliver_ = nullptr;
    }
    if (d) d(std::move(m));
  }
  void close() override {}
  const peer_info& peer() const noexcept override { return peer_; }
  std::uint64_t serial() const noexcept override { return serial_; }

private:
  peer_info peer_;
  std::mutex mu_;
  std::function<void(protocol::message)> deliver_;
  std::uint64_t serial_ = 0;
};

}  // namespace aqs::daemon
