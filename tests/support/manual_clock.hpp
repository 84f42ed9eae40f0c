// manual_clock: virtual time for the controller's tests: time moves only when
// the test advances it, and timers that fall due are posted to their executor.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include <boost/asio/post.hpp>

#include "daemon/clock.hpp"

namespace aqs::test {

class manual_clock final : public daemon::clock {
public:
  steady::time_point now() const override {
    std::lock_guard lock(mu_);
    return steady::time_point{} + std::chrono::hours(1) + elapsed_;
  }
  double wall_seconds() const override { return static_cast<double>(wall_us()) / 1e6; }
  std::int64_t wall_us() const override {
    std::lock_guard lock(mu_);
    return k_epoch_us + std::chrono::duration_cast<std::chrono::microseconds>(elapsed_).count();
  }
  std::unique_ptr<daemon::timer_handle> after(boost::asio::any_io_executor executor, std::chrono::milliseconds delay,
                                              std::function<void()> fire) override {
    auto t = std::make_shared<entry>();
    t->executor = std::move(executor);
    t->fire = std::move(fire);
    std::lock_guard lock(mu_);
    due_.emplace(elapsed_ + delay, t);
    return std::make_unique<handle>(t);
  }
  // Moves time forward; every timer due by then is posted to its executor
  // (in order of their due times).
  void advance(std::chrono::milliseconds d) {
    std::multimap<std::chrono::milliseconds, std::shared_ptr<entry>> fired;
    {
      std::lock_guard lock(mu_);
      elapsed_ += d;
      auto end = due_.upper_bound(elapsed_);
      fired.insert(due_.begin(), end);
      due_.erase(due_.begin(), end);
    }
    for (auto& [when, t] : fired) {
      boost::asio::post(t->executor, [t] {
        if (!t->cancelled) t->fire();
      });
    }
  }
  // Timers started and not yet due (cancelled ones included until due).
  std::size_t pending_timers() const {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (const auto& [when, t] : due_) n += t->cancelled ? 0 : 1;
    return n;
  }

private:
  // 2026-11-25T00:00:00Z: any fixed wall time will do.
  static constexpr std::int64_t k_epoch_us = 1'795'564'800'000'000;
  struct entry {
    boost::asio::any_io_executor executor;
    std::function<void()> fire;
    std::atomic<bool> cancelled{false};
  };
  struct handle final : daemon::timer_handle {
    explicit handle(std::shared_ptr<entry> e) : e_(std::move(e)) {}
    ~handle() override { cancel(); }
    void cancel() noexcept override { e_->cancelled = true; }
    std::shared_ptr<entry> e_;
  };
  mutable std::mutex mu_;
  std::chrono::milliseconds elapsed_{0};
  std::multimap<std::chrono::milliseconds, std::shared_ptr<entry>> due_;
};

}  // namespace aqs::test
