// pg_supervisor: the reap-and-restart loop of the private PostgreSQL.
#include "store/pg_supervisor.hpp"

#include <algorithm>
#include <cstdio>

namespace aqs::store {

using namespace std::chrono_literals;

pg_supervisor::pg_supervisor(pg_server& pg, std::function<void(const std::string&)> log,
                             std::chrono::milliseconds poll)
    : pg_(pg), log_(std::move(log)), poll_(poll) {
  thread_ = std::thread([this] { run(); });
}

pg_supervisor::~pg_supervisor() { stop(); }

void pg_supervisor::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool pg_supervisor::sleep(std::chrono::milliseconds d) {
  std::unique_lock lk(mu_);
  return !cv_.wait_for(lk, d, [this] { return stopping_.load(); });
}

void pg_supervisor::run() {
  while (sleep(poll_)) {
    const std::optional<int> status = pg_.reap_exited();
    if (!status) continue;
    const auto died = std::chrono::steady_clock::now();
    log_("private PostgreSQL " + describe_wait_status(*status) + "; starting it again on " +
         pg_.data_dir().string());
    auto backoff = 100ms;
    for (int attempt = 1; !stopping_; ++attempt) {
      try {
        pg_.start(&stopping_);
        ++restarts_;
        char took[32];
        std::snprintf(took, sizeof took, "%.1f",
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - died).count());
        log_(std::string("private PostgreSQL running again ") + took + " s after it died");
        break;
      } catch (const std::exception& e) {
        if (stopping_) break;
        // Typically: the dead postmaster's backends still hold its shared
        // memory for a moment. Only the first failures are worth a line.
        if (attempt <= 3) log_(std::string("restarting PostgreSQL failed (will retry): ") + e.what());
        if (!sleep(backoff)) break;
        backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
      }
    }
  }
}

}  // namespace aqs::store
