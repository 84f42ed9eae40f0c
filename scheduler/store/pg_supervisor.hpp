// pg_supervisor: keeps aqsd's private PostgreSQL alive: reaps the postmaster
// when it dies and starts it again on the same data directory.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "store/pg_server.hpp"

namespace aqs::store {

// One thread that polls the server's postmaster (a child of this process).
// When it has exited (crash, kill -9, OOM killer) it is reaped at once, so
// no zombie holds its pid, and started again with backoff (a restart fails
// while the dead postmaster's backends still hold its shared memory; they go
// within moments). PostgreSQL replays its WAL at the restart, so every
// committed transaction is there. The job store reconnects by itself.
class pg_supervisor {
public:
  // `log` receives one line per event, on the supervisor's thread. `pg` must
  // have been started and outlive this object; while the supervisor runs,
  // nobody else calls pg's methods.
  pg_supervisor(pg_server& pg, std::function<void(const std::string&)> log,
                std::chrono::milliseconds poll = std::chrono::milliseconds(100));
  ~pg_supervisor();
  pg_supervisor(const pg_supervisor&) = delete;
  pg_supervisor& operator=(const pg_supervisor&) = delete;

  // Stops supervising, promptly even in the middle of a restart (the server
  // is then left as it is, for pg_server::stop()). Idempotent.
  void stop();
  // Restarts that succeeded so far.
  std::uint64_t restarts() const noexcept { return restarts_; }

private:
  void run();
  // Waits up to `d`; false if stop() was called meanwhile.
  bool sleep(std::chrono::milliseconds d);

  pg_server& pg_;
  std::function<void(const std::string&)> log_;
  std::chrono::milliseconds poll_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> restarts_{0};
  std::thread thread_;
};

}  // namespace aqs::store
