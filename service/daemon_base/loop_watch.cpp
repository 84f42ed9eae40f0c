// loop_watch: a stall of an event loop, logged with its cause (loop_watch.hpp).
#include "daemon_base/loop_watch.hpp"

#include <dirent.h>
#include <fstream>
#include <sstream>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "logging/log.hpp"

namespace aqs::daemon {

namespace {

int this_tid() noexcept { return static_cast<int>(::syscall(SYS_gettid)); }

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

double secs(std::uint64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace

loop_watch::loop_watch(std::string name, boost::asio::any_io_executor ex, options o, sink out)
    : name_(std::move(name)), ex_(std::move(ex)), o_(o), out_(std::move(out)) {}

void loop_watch::start() {
  if (thread_.joinable() || o_.threshold.count() <= 0) return;
  thread_ = std::thread([this] { run(); });
}

void loop_watch::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

loop_watch::running_scope::running_scope(loop_watch* w, const char* label) noexcept : w_(w) {
  if (w_ == nullptr) return;
  outer_ = w_->running_.exchange(label);
  outer_tid_ = w_->running_tid_.exchange(this_tid());
}

loop_watch::running_scope::~running_scope() {
  if (w_ == nullptr) return;
  w_->running_.store(outer_);
  w_->running_tid_.store(outer_tid_);
}

void loop_watch::say(const std::string& line) const {
  if (out_) {
    out_(line);
  } else {
    logging::warn("{}", line);
  }
}

// Each thread of this process: its state and wait channel
// (/proc/self/task/TID/stat, wchan) and its time on a CPU and waiting for one
// (schedstat: run_ns wait_ns slices).
std::map<int, loop_watch::thread_sample> loop_watch::sample() const {
  std::map<int, thread_sample> all;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return all;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int tid = std::atoi(e->d_name);
    const std::string dir = std::string("/proc/self/task/") + e->d_name + "/";
    thread_sample s;
    std::istringstream(first_line(dir + "schedstat")) >> s.run_ns >> s.wait_ns;
    const std::string stat = first_line(dir + "stat");
    if (const auto close = stat.rfind(')'); close != std::string::npos && close + 2 < stat.size()) {
      s.state = stat[close + 2];
    }
    s.comm = first_line(dir + "comm");
    s.wchan = first_line(dir + "wchan");
    if (s.wchan == "0") s.wchan.clear();
    all.emplace(tid, std::move(s));
  }
  ::closedir(d);
  return all;
}

std::string loop_watch::describe(const std::map<int, thread_sample>& before, const std::map<int, thread_sample>& now,
                                 int handler_tid, double seconds) const {
  std::string text;
  std::uint64_t ran = 0, waited = 0;
  for (const auto& [tid, s] : now) {
    const auto b = before.find(tid);
    const std::uint64_t r = b == before.end() ? s.run_ns : s.run_ns - std::min(s.run_ns, b->second.run_ns);
    const std::uint64_t w = b == before.end() ? s.wait_ns : s.wait_ns - std::min(s.wait_ns, b->second.wait_ns);
    ran += r;
    waited += w;
    if (tid != handler_tid) continue;
    // The verdict for the thread that runs the loop's handler now: asleep
    // (a lock, a reply, a full pipe) if it is asleep and spent most of the
    // window so; else on a CPU or waiting for one, whichever took longer.
    const char* verdict = "busy (on a CPU)";
    if ((s.state == 'S' || s.state == 'D') && secs(r + w) < seconds / 2) {
      verdict = "blocked (sleeping, neither on a CPU nor waiting for one)";
    } else if (w > r) {
      verdict = "not scheduled (runnable, waiting for a CPU)";
    }
    text += fmt::format("; its thread {} ({}) is {}: state {}{}, {:.2f} s on a CPU and {:.2f} s waiting for one", tid,
                        s.comm, verdict, s.state, s.wchan.empty() ? "" : " in " + s.wchan, secs(r), secs(w));
  }
  text += fmt::format("; the process's {} threads: {:.2f} s on a CPU, {:.2f} s waiting for one", now.size(),
                      secs(ran), secs(waited));
  return text;
}

void loop_watch::tick_ran(std::uint64_t gen) {
  last_tick_tid_.store(this_tid());
  std::unique_lock lock(mu_);
  if (gen != in_flight_) return;
  in_flight_ = 0;
  if (!reported_) return;
  const double s = std::chrono::duration<double>(clock::now() - posted_at_).count();
  lock.unlock();
  say(fmt::format("event loop ({}) runs again after {:.1f} s", name_, s));
}

void loop_watch::run() {
  std::unique_lock lock(mu_);
  auto due = clock::now() + o_.period;
  while (!stopping_) {
    cv_.wait_until(lock, due, [this] { return stopping_; });
    if (stopping_) break;
    const auto now = clock::now();
    // The watch's own lateness: nothing of this process ran then.
    if (o_.own_lateness && now - due > o_.threshold) {
      const double late = std::chrono::duration<double>(now - due).count();
      lock.unlock();
      say(fmt::format("this process was not scheduled for {:.1f} s (the loop watch's own thread woke that late)", late));
      lock.lock();
      if (stopping_) break;
    }
    due = now + o_.period;
    if (in_flight_ == 0) {
      in_flight_ = ++gen_;
      posted_at_ = now;
      reported_ = false;
      lock.unlock();
      auto before = sample();
      lock.lock();
      if (in_flight_ == gen_) at_post_ = std::move(before);
      boost::asio::post(ex_, [this, g = gen_] { tick_ran(g); });
      continue;
    }
    if (reported_ || now - posted_at_ < o_.threshold) continue;
    reported_ = true;
    stalls_.fetch_add(1);
    const double s = std::chrono::duration<double>(now - posted_at_).count();
    const auto before = at_post_;
    lock.unlock();
    const char* label = running_.load();
    const int tid = label != nullptr ? running_tid_.load() : last_tick_tid_.load();
    const std::string what = label != nullptr ? fmt::format("in the handler of {}", label)
                                              : std::string("in a handler with no label (a timer or an internal task)");
    say(fmt::format("event loop ({}) blocked for {:.1f} s so far, {}{}", name_, s, what, describe(before, sample(), tid, s)));
    lock.lock();
  }
}

}  // namespace aqs::daemon
