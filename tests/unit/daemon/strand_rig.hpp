// strand_rig: what a part of aqsd that runs on the scheduling strand needs
// around it in a unit test: the real write_pipeline (its strand on an
// io_context the test runs, its writer thread) over an in-memory store, and
// virtual time. No sockets, no PostgreSQL.
#pragma once

#include <chrono>
#include <functional>
#include <optional>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "daemon/metrics.hpp"
#include "daemon/write_pipeline.hpp"
#include "manual_clock.hpp"
#include "store/memory_job_store.hpp"

namespace aqs::test {

struct strand_rig {
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  manual_clock clock;
  store::memory_job_store store;
  daemon::write_pipeline pipe{io, store};
  daemon::metrics& stats = pipe.stats();  // the pipeline holds aqsd's counters
  std::size_t decisions = 0;
  std::vector<std::string> fatal_errors;

  strand_rig() { pipe.set_hooks({[this] { ++decisions; }, nullptr, [this](const std::string& why) { fatal_errors.push_back(why); }}); }
  ~strand_rig() { pipe.stop(); }

  // Runs `f` on the strand and what it posts, until nothing is ready.
  void on_strand(std::function<void()> f) {
    pipe.post(std::move(f));
    io.poll();
  }
  // Runs the strand until `done` holds; the writer thread works meanwhile
  // (a real thread: this waits for it, up to a bound far above any need).
  bool until(const std::function<bool()>& done, std::chrono::milliseconds bound = std::chrono::seconds(10)) {
    const auto end = std::chrono::steady_clock::now() + bound;
    while (!done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      io.run_one_for(std::chrono::milliseconds(20));
    }
    io.poll();
    return true;
  }
  // Runs the strand until a queued batch is written and acted on: an
  // after_commit marker posted now runs once everything before it did.
  bool committed() {
    bool seen = false;
    pipe.post([&] {
      pipe.after_commit([&] { seen = true; });
      pipe.kick();
    });
    return until([&] { return seen; });
  }
  // Lets virtual time pass and runs the timers that fell due.
  void pass(std::chrono::milliseconds d) {
    for (auto step = std::chrono::milliseconds(100); d > std::chrono::milliseconds(0); d -= step) {
      clock.advance(std::min(step, d));
      io.poll();
    }
  }
};

}  // namespace aqs::test
