// clock: the real clock, over std::chrono and Boost.Asio's steady timers.
#include "daemon/clock.hpp"

#include <atomic>

#include <boost/asio/steady_timer.hpp>

namespace aqs::daemon {

namespace {

class asio_timer final : public timer_handle {
public:
  asio_timer(const boost::asio::any_io_executor& ex, std::chrono::milliseconds delay, std::function<void()> fire)
      : timer_(ex, delay), alive_(std::make_shared<std::atomic<bool>>(true)) {
    // The flag, not the error code, decides: a cancel that races with the
    // expiry leaves the completion queued with success.
    timer_.async_wait([alive = alive_, fire = std::move(fire)](boost::system::error_code ec) {
      if (!ec && *alive) fire();
    });
  }
  ~asio_timer() override { cancel(); }
  void cancel() noexcept override {
    *alive_ = false;
    timer_.cancel();
  }

private:
  boost::asio::steady_timer timer_;
  std::shared_ptr<std::atomic<bool>> alive_;
};

class real_clock final : public clock {
public:
  steady::time_point now() const override { return steady::now(); }
  double wall_seconds() const override {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  std::int64_t wall_us() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  std::unique_ptr<timer_handle> after(boost::asio::any_io_executor executor, std::chrono::milliseconds delay,
                                      std::function<void()> fire) override {
    return std::make_unique<asio_timer>(executor, delay, std::move(fire));
  }
};

}  // namespace

clock& system_clock() {
  static real_clock c;
  return c;
}

}  // namespace aqs::daemon
