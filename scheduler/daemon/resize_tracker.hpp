// resize_tracker: per adaptive job, the connection of its shim (where maps
// go), the epoch of its newest map and when it was sent, and the timeout of
// a resize under way. On the strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <unordered_map>

#include "daemon/clock.hpp"
#include "daemon_base/dispatcher.hpp"

namespace aqs::daemon {

class resize_tracker {
public:
  // Timers run on `executor` (the strand) through `time`.
  resize_tracker(clock& time, boost::asio::any_io_executor executor) : clock_(time), executor_(std::move(executor)) {}

  // The job's shim connected (a newer connection replaces an older one).
  void attach_shim(std::int64_t job, const std::shared_ptr<connection>& c) {
    state& s = state_[job];
    s.shim = c;
    s.had_shim = true;
  }
  // Whether a shim of the job ever connected to this aqsd.
  bool had_shim(std::int64_t job) const;
  // When this aqsd began to track shims (a job's shim reconnects after an
  // aqsd restart: until then, not having one says nothing).
  clock::steady::time_point since() const noexcept { return since_; }
  // `c` closed: if it was the job's shim, the job has none now.
  void detach_shim(std::int64_t job, const connection& c);
  // The job's shim, if connected.
  std::shared_ptr<connection> shim(std::int64_t job) const;

  // A new map for the job: its epoch (1, 2, ...).
  std::int64_t next_epoch(std::int64_t job) {
    state& s = state_[job];
    s.claimed = false;
    return ++s.epoch;
  }
  // The job's shim has claimed its newest map (resize_begin, stored): the
  // map's number must not change until the job tells how it went.
  void set_claimed(std::int64_t job) { state_[job].claimed = true; }
  bool claimed(std::int64_t job) const;
  // The epoch of the job's newest map, 0 before the first.
  std::int64_t epoch(std::int64_t job) const;
  // The job's maps went up to `seen` before aqsd restarted (a recovered
  // claim, or its shim's hello): its next map is numbered above it, since a
  // shim ignores a map no newer than one it has seen.
  void raise_epoch(std::int64_t job, std::int64_t seen) {
    auto& e = state_[job].epoch;
    if (seen > e) e = seen;
  }
  void map_sent(std::int64_t job, std::int64_t wall_us) { state_[job].sent_us = wall_us; }
  // Wall clock (µs) when the job's newest map went out, 0 if none did.
  std::int64_t sent_us(std::int64_t job) const;

  // Calls expired(job, epoch) after `timeout` unless disarm(job) (or a newer
  // arm) comes first.
  void arm(std::int64_t job, std::int64_t epoch, std::chrono::milliseconds timeout,
           std::function<void(std::int64_t job, std::int64_t epoch)> expired);
  // The resize is over, or under way past the point of timing out.
  void disarm(std::int64_t job);
  bool armed(std::int64_t job) const;
  // The job ended: nothing of it is kept.
  void forget(std::int64_t job) { state_.erase(job); }

  // Expands of the job given up one after the other (the shim could not
  // bring its new ranks in): one more, and how many now.
  int note_abandoned(std::int64_t job) { return ++state_[job].abandoned; }
  // An expand of the job went through: the count starts again.
  void expand_done(std::int64_t job) { state_[job].abandoned = 0; }

  // The job was made rigid for having no shim; its range was [min, max].
  void made_rigid(std::int64_t job, std::size_t min, std::size_t max) { state_[job].range_before = {min, max}; }
  // The range a job made rigid had (and forgets it), if it was.
  std::optional<std::pair<std::size_t, std::size_t>> take_range_before(std::int64_t job) {
    auto it = state_.find(job);
    if (it == state_.end()) return std::nullopt;
    return std::exchange(it->second.range_before, std::nullopt);
  }

private:
  struct state {
    std::weak_ptr<connection> shim;
    std::int64_t epoch = 0;
    bool claimed = false;
    std::int64_t sent_us = 0;
    std::unique_ptr<timer_handle> timer;
    bool had_shim = false;
    int abandoned = 0;
    std::optional<std::pair<std::size_t, std::size_t>> range_before;
  };
  clock& clock_;
  clock::steady::time_point since_ = clock_.now();
  boost::asio::any_io_executor executor_;
  std::unordered_map<std::int64_t, state> state_;
};

}  // namespace aqs::daemon
