// loop_watch: says in the log when a daemon's event loop (an executor such
// as aqsd's scheduling strand) ran none of its ready handlers for longer
// than a threshold, and why: the handler that was running (its label), the
// thread that ran it and what that thread did meanwhile (its state and
// kernel wait channel, its time on a CPU and its time waiting for one),
// and whether the whole process went unscheduled (the watch's own thread
// woke late too).
//
// Why: a node agent fences its jobs when aqsd acknowledges none of its
// heartbeats for a while; when that happened (issue 30), aqsd had logged
// nothing, and a blocked handler, a starved process and a stalled network
// could not be told apart afterwards.
//
// Rule: start() once, stop() before the executor's io_context is destroyed
// (the destructor stops). Labels are set by whoever posts work onto the
// watched executor (running_scope); the watch only reads them. Everything
// here is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <boost/asio/any_io_executor.hpp>

namespace aqs::daemon {

class loop_watch {
public:
  using clock = std::chrono::steady_clock;
  struct options {
    // A tick not run after this long is a stall and is logged (then again
    // when the loop runs it).
    std::chrono::milliseconds threshold{2000};
    // How often a tick is posted and the threads are sampled.
    std::chrono::milliseconds period{250};
    // Say when the watch's own thread woke late (the whole process was not
    // run); one watch of a process is enough to say it.
    bool own_lateness = true;
  };
  // Where the lines go (logging::warn by default; tests collect them).
  using sink = std::function<void(const std::string&)>;

  // `name` says which loop ("the scheduling strand").
  loop_watch(std::string name, boost::asio::any_io_executor ex, options o, sink out = {});
  ~loop_watch() { stop(); }
  loop_watch(const loop_watch&) = delete;
  loop_watch& operator=(const loop_watch&) = delete;

  void start();
  void stop();

  // What the watched loop runs now: set for the length of a handler by the
  // code that runs it (labels are static strings: a message type, a timer's
  // name). Nested scopes restore the outer label.
  class running_scope {
  public:
    running_scope(loop_watch* w, const char* label) noexcept;
    ~running_scope();
    running_scope(const running_scope&) = delete;
    running_scope& operator=(const running_scope&) = delete;

  private:
    loop_watch* w_;
    const char* outer_ = nullptr;
    int outer_tid_ = 0;
  };

  // Stalls seen so far (for tests and metrics).
  std::uint64_t stalls() const noexcept { return stalls_.load(); }

private:
  struct thread_sample {
    std::uint64_t run_ns = 0;   // on a CPU
    std::uint64_t wait_ns = 0;  // runnable, waiting for a CPU
    char state = '?';
    std::string comm, wchan;
  };
  void run();
  void tick_ran(std::uint64_t gen);
  std::map<int, thread_sample> sample() const;
  std::string describe(const std::map<int, thread_sample>& before, const std::map<int, thread_sample>& now,
                       int handler_tid, double seconds) const;
  void say(const std::string& line) const;

  std::string name_;
  boost::asio::any_io_executor ex_;
  options o_;
  sink out_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  // Under mu_: the tick in flight (0: none), when it was posted, the
  // threads' sample then, and whether its stall was logged.
  std::uint64_t gen_ = 0;
  std::uint64_t in_flight_ = 0;
  clock::time_point posted_at_{};
  std::map<int, thread_sample> at_post_;
  bool reported_ = false;
  std::atomic<const char*> running_{nullptr};
  std::atomic<int> running_tid_{0};
  std::atomic<int> last_tick_tid_{0};
  std::atomic<std::uint64_t> stalls_{0};
};

}  // namespace aqs::daemon
