// clock: the controller's seam over time: what time it is and timers that
// fire on the scheduling strand. Real time in aqsd; virtual time in tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include <boost/asio/any_io_executor.hpp>

namespace aqs::daemon {

// A timer that is running. Destroying it (or cancel()) means its callback
// never runs; both are safe from the executor the timer runs on.
class timer_handle {
public:
  virtual ~timer_handle() = default;
  virtual void cancel() noexcept = 0;
};

// Thread-safe. The controller reads steady time for silences and timeouts
// (heartbeats), wall time for what it stores and shows (decisions, resize
// phase times), and starts its timers through it.
class clock {
public:
  using steady = std::chrono::steady_clock;
  virtual ~clock() = default;
  virtual steady::time_point now() const = 0;
  // Seconds since the Unix epoch (the scheduling core's time).
  virtual double wall_seconds() const = 0;
  // Microseconds since the Unix epoch.
  virtual std::int64_t wall_us() const = 0;
  // Runs `fire` once, on `executor`, after `delay` (or never, once the
  // handle is cancelled or destroyed).
  virtual std::unique_ptr<timer_handle> after(boost::asio::any_io_executor executor, std::chrono::milliseconds delay,
                                              std::function<void()> fire) = 0;
};

// The machine's clocks and Boost.Asio steady timers.
clock& system_clock();

}  // namespace aqs::daemon
