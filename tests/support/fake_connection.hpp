// fake_connection: a daemon::connection that records what is sent to it, for
// tests of the controller and its parts without sockets.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

#include "daemon_base/dispatcher.hpp"

namespace aqs::test {

class fake_connection final : public daemon::connection {
public:
  explicit fake_connection(protocol::peer_role role = protocol::peer_role::client, std::optional<uid_t> uid = 1000)
      : serial_(next_serial()) {
    peer_.role = role;
    peer_.uid = uid;
    peer_.gid = uid;
    peer_.remote = "test";
  }
  void send(protocol::message m) override {
    std::lock_guard lock(mu_);
    got_.push_back(std::move(m));
    cv_.notify_all();
  }
  void close() override { closed_ = true; }
  const daemon::peer_info& peer() const noexcept override { return peer_; }
  std::uint64_t serial() const noexcept override { return serial_; }
  daemon::peer_info& mutable_peer() { return peer_; }
  // Speak for a job, as its shim or (launcher) its aqs-rsh; before on_open.
  void speak_for(std::int64_t job, bool launcher) {
    peer_.job_id = job;
    peer_.launcher = launcher;
  }
  bool closed() const { return closed_; }

  // Waits up to `timeout` (default 10 s) for a message of type T matching pred, and removes it.
  template <class T>
  std::optional<T> take(const std::function<bool(const T&)>& pred = [](const T&) { return true; },
                        std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    std::optional<T> out;
    cv_.wait_for(lock, timeout, [&] {
      for (auto it = got_.begin(); it != got_.end(); ++it) {
        if (const T* t = std::get_if<T>(&*it); t != nullptr && pred(*t)) {
          out = *t;
          got_.erase(it);
          return true;
        }
      }
      return false;
    });
    return out;
  }
  // The reply (ok or error) to request `id`.
  std::optional<protocol::message> reply(std::int64_t id, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    std::optional<protocol::message> out;
    cv_.wait_for(lock, timeout, [&] {
      for (auto it = got_.begin(); it != got_.end(); ++it) {
        const auto* ok = std::get_if<protocol::ok>(&*it);
        const auto* err = std::get_if<protocol::error>(&*it);
        if ((ok && ok->id == id) || (err && err->id == id)) {
          out = *it;
          got_.erase(it);
          return true;
        }
      }
      return false;
    });
    return out;
  }
  std::size_t count() const {
    std::lock_guard lock(mu_);
    return got_.size();
  }

private:
  static std::uint64_t next_serial() {
    static std::atomic<std::uint64_t> n{1};
    return n++;
  }
  daemon::peer_info peer_;
  std::uint64_t serial_;
  std::atomic<bool> closed_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<protocol::message> got_;
};

}  // namespace aqs::test
