// resize_tracker: shims, epochs and resize timeouts.
#include "daemon/resize_tracker.hpp"

namespace aqs::daemon {

void resize_tracker::detach_shim(std::int64_t job, const connection& c) {
  auto it = state_.find(job);
  if (it == state_.end()) return;
  auto s = it->second.shim.lock();
  if (s && s->serial() == c.serial()) it->second.shim.reset();
}

std::shared_ptr<connection> resize_tracker::shim(std::int64_t job) const {
  auto it = state_.find(job);
  return it == state_.end() ? nullptr : it->second.shim.lock();
}

std::int64_t resize_tracker::epoch(std::int64_t job) const {
  auto it = state_.find(job);
  return it == state_.end() ? 0 : it->second.epoch;
}

bool resize_tracker::had_shim(std::int64_t job) const {
  auto it = state_.find(job);
  return it != state_.end() && it->second.had_shim;
}

bool resize_tracker::claimed(std::int64_t job) const {
  auto it = state_.find(job);
  return it != state_.end() && it->second.claimed;
}

std::int64_t resize_tracker::sent_us(std::int64_t job) const {
  auto it = state_.find(job);
  return it == state_.end() ? 0 : it->second.sent_us;
}

void resize_tracker::arm(std::int64_t job, std::int64_t epoch, std::chrono::milliseconds timeout,
                         std::function<void(std::int64_t, std::int64_t)> expired) {
  state_[job].timer = clock_.after(executor_, timeout, [job, epoch, expired = std::move(expired)] { expired(job, epoch); });
}

void resize_tracker::disarm(std::int64_t job) {
  auto it = state_.find(job);
  if (it != state_.end()) it->second.timer.reset();
}

bool resize_tracker::armed(std::int64_t job) const {
  auto it = state_.find(job);
  return it != state_.end() && it->second.timer != nullptr;
}

}  // namespace aqs::daemon
