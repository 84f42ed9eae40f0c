// control_channel: blocking sockets; a reader thread keeps the newest map.
#include "control_channel.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdexcept>
#include <unistd.h>

#include "protocol/framing.hpp"
#include "protocol/messages.hpp"

namespace aqs::runtime {

namespace {

std::int64_t wall_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

control_channel::control_channel(const control_address& where, std::int64_t seen)
    : where_(where), job_id_(where.job_id), seen_(seen) {
  job_link link = connect_job(where, false, next_id_++, seen);
  fd_ = link.fd;
  decoder_ = std::move(link.decoder);
  // aqsd may send a map right behind its reply (a resize already under way
  // when the job connects): the reader thread takes those frames first.
  early_ = std::move(link.early);
  if (::pipe2(wake_, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(fd_);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(err));
  }
  reader_ = std::thread([this] { read_loop(); });
}

control_channel::~control_channel() {
  {
    // Values published just before (a new leader takes over, AQS_Finalize)
    // still go out.
    std::lock_guard lock(publish_mu_);
    flush_values_locked(false);
  }
  if (reader_.joinable()) {
    const char c = 0;
    [[maybe_unused]] auto n = ::write(wake_[1], &c, 1);
    reader_.join();
  }
  ::close(fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

std::optional<map_update> control_channel::newest_after(std::int64_t applied) const {
  std::lock_guard lock(map_mu_);
  if (!newest_ || newest_->epoch <= applied) return std::nullopt;
  return newest_;
}

void control_channel::send_frame(const std::string& frame) {
  std::lock_guard lock(send_mu_);
  try {
    send_all(fd_, frame);
  } catch (const std::exception&) {
    alive_ = false;
    throw;
  }
}

control_channel::claim_result control_channel::claim(std::int64_t epoch, std::chrono::milliseconds limit) {
  protocol::resize_begin b;
  {
    std::lock_guard lock(send_mu_);
    b.id = next_id_++;
  }
  b.job_id = job_id_;
  b.epoch = epoch;
  {
    std::lock_guard lock(claim_mu_);
    claim_id_ = b.id;
    claim_answer_.reset();
  }
  try {
    send_frame(protocol::encode(b));
  } catch (const std::exception&) {
    return claim_result::lost;
  }
  std::unique_lock lock(claim_mu_);
  claim_cv_.wait_for(lock, limit, [this] { return claim_answer_.has_value() || !alive(); });
  claim_id_ = 0;
  const claim_result r = claim_answer_.value_or(claim_result::lost);
  lock.unlock();
  if (r == claim_result::go) {
    // Testing aid: hold the job between its claim and the change, as a slow
    // spawn would (the window in which aqsd must not forget the claim).
    if (const char* ms = std::getenv("AQS_TEST_PAUSE_AFTER_CLAIM_MS")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
    }
  }
  return r;
}

void control_channel::send_outcome(std::int64_t id, const std::string& frame) {
  std::lock_guard lock(send_mu_);
  outcome_id_ = id;
  outcome_frame_ = frame;
  try {
    send_all(fd_, frame);
  } catch (const std::exception&) {
    alive_ = false;  // sent again once the reader thread has reconnected
  }
}

bool control_channel::answer_outcome(std::int64_t id) {
  std::lock_guard lock(send_mu_);
  if (id == 0 || id != outcome_id_) return false;
  outcome_id_ = 0;
  outcome_frame_.clear();
  return true;
}

void control_channel::acknowledge(std::int64_t epoch, const std::string& procs, const ack_times& t) {
  protocol::resize_ack a;
  {
    std::lock_guard lock(send_mu_);
    a.id = next_id_++;
  }
  a.job_id = job_id_;
  a.epoch = epoch;
  a.procs = procs;
  a.received_at_us = t.received_at_us;
  a.wait_us = t.wait_us;
  a.spawn_us = t.spawn_us;
  a.data_us = t.data_us;
  a.total_us = t.total_us;
  send_outcome(a.id, protocol::encode(a));
}

void control_channel::refuse(std::int64_t epoch, const std::string& reason) {
  protocol::resize_refused r;
  {
    std::lock_guard lock(send_mu_);
    r.id = next_id_++;
  }
  r.job_id = job_id_;
  r.epoch = epoch;
  r.reason = reason.substr(0, protocol::k_max_text);
  for (char& c : r.reason) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  send_outcome(r.id, protocol::encode(r));
}

void control_channel::take(std::vector<std::string>& frames) {
  for (auto& f : frames) {
    auto m = protocol::parse_message(f);
    if (auto* nm = std::get_if<protocol::new_map>(&m)) {
      if (nm->job_id != job_id_) continue;
      map_update u;
      u.epoch = nm->epoch;
      u.procs = std::move(nm->procs);
      u.hosts = std::move(nm->proc_hosts);
      u.cpus = std::move(nm->proc_cpus);
      u.received_at_us = wall_clock_us();
      std::lock_guard lock(map_mu_);
      if (!newest_ || u.epoch > newest_->epoch) {
        newest_epoch_.store(u.epoch, std::memory_order_release);
        newest_ = std::move(u);
      }
    } else if (auto* ok = std::get_if<protocol::ok>(&m)) {
      if (answer_outcome(ok->id)) continue;
      if (answer_publish(ok->id, nullptr, &ok->result)) continue;
      if (!answer_claim(ok->id, claim_result::go)) {
        // A control reply lists the job under failed when refused.
        std::string why;
        if (ok->result.is_object() && ok->result.contains("failed") && ok->result["failed"].is_array() &&
            !ok->result["failed"].empty() && ok->result["failed"][0].contains("message")) {
          why = ok->result["failed"][0]["message"].get<std::string>();
        }
        answer_range(ok->id, why.empty() ? range_state::accepted : range_state::refused, why);
      }
    } else if (auto* e = std::get_if<protocol::error>(&m)) {
      if (e->id && answer_outcome(*e->id)) {
        std::fprintf(stderr, "aqs: aqsd: %s\n", e->message.c_str());
        continue;
      }
      if (e->id && answer_publish(*e->id, &e->message)) continue;
      if (e->id && answer_range(*e->id, range_state::refused, e->message)) {
        std::fprintf(stderr, "aqs: aqsd refused the range request: %s\n", e->message.c_str());
        continue;
      }
      // An aqsd from before resize_begin does not know it: apply as before.
      if (e->id && answer_claim(*e->id, e->code == protocol::error_code::unknown_type ? claim_result::go
                                                                                       : claim_result::declined)) {
        if (e->code != protocol::error_code::unknown_type) {
          std::fprintf(stderr, "aqs: aqsd declined a map: %s\n", e->message.c_str());
        }
        continue;
      }
      std::fprintf(stderr, "aqs: aqsd: %s\n", e->message.c_str());
    }
  }
  frames.clear();
}

bool control_channel::publish(const std::string& name, double value) {
  std::lock_guard lock(publish_mu_);
  if (!alive()) return false;
  const auto now = std::chrono::steady_clock::now();
  publish_tokens_ = std::min(publish_burst_,
                             publish_tokens_ + std::chrono::duration<double>(now - publish_refilled_).count() * publish_rate_);
  publish_refilled_ = now;
  if (publish_tokens_ < 1.0) {
    ++dropped_at_source_;  // aqsd would drop it: not sent
    return true;
  }
  publish_tokens_ -= 1.0;
  if (pending_values_.size() >= k_max_pending_values) pending_values_.erase(pending_values_.begin());
  pending_values_.push_back({name, value, wall_clock_us()});
  if (pending_values_.size() >= protocol::k_max_publish_batch) {
    flush_values_locked(false);
  } else {
    flush_values_locked(true);
  }
  return true;
}

void control_channel::flush_values_locked(bool due_only) {
  if (pending_values_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (due_only && now - last_batch_ < k_publish_interval) return;
  last_batch_ = now;
  std::size_t from = 0;
  while (from < pending_values_.size()) {
    const std::size_t n = std::min(protocol::k_max_publish_batch, pending_values_.size() - from);
    protocol::publish p;
    {
      std::lock_guard lock(send_mu_);
      p.id = next_id_++;
    }
    p.job_id = job_id_;
    p.values.assign(pending_values_.begin() + static_cast<std::ptrdiff_t>(from),
                    pending_values_.begin() + static_cast<std::ptrdiff_t>(from + n));
    from += n;
    publish_ids_.push_back(p.id);
    while (publish_ids_.size() > 64) publish_ids_.pop_front();
    try {
      send_frame(protocol::encode(p));
    } catch (const std::exception&) {
      break;  // the connection is gone: these values are lost with it
    }
  }
  pending_values_.clear();
}

bool control_channel::answer_publish(std::int64_t id, const std::string* error, const nlohmann::json* result) {
  std::lock_guard lock(publish_mu_);
  const auto it = std::find(publish_ids_.begin(), publish_ids_.end(), id);
  if (it == publish_ids_.end()) return false;
  publish_ids_.erase(it);
  // aqsd's bucket for this job (older aqsd: none said, the defaults stay).
  if (result != nullptr && result->is_object()) {
    const auto rate = result->find("rate"), burst = result->find("burst");
    if (rate != result->end() && rate->is_number() && rate->get<double>() >= 0) publish_rate_ = rate->get<double>();
    if (burst != result->end() && burst->is_number() && burst->get<double>() >= 1) {
      publish_burst_ = burst->get<double>();
      publish_tokens_ = std::min(publish_tokens_, publish_burst_);
    }
  }
  // One line per new reason, not one per batch.
  if (error != nullptr && *error != publish_error_) {
    publish_error_ = *error;
    std::fprintf(stderr, "aqs: aqsd refused published values: %s\n", error->c_str());
  }
  return true;
}

void control_channel::request_range(std::int64_t min, std::int64_t max) {
  protocol::control c;
  {
    std::lock_guard lock(send_mu_);
    c.id = next_id_++;
  }
  c.action = "update";
  c.job_ids = {job_id_};
  c.min_pe = min;
  c.max_pe = max;
  {
    std::lock_guard lock(range_mu_);
    range_id_ = c.id;
    range_ = range_state::pending;
    range_reason_.clear();
  }
  send_frame(protocol::encode(c));
}

std::pair<control_channel::range_state, std::string> control_channel::range_status() const {
  std::lock_guard lock(range_mu_);
  return {range_, range_reason_};
}

bool control_channel::answer_range(std::int64_t id, range_state r, const std::string& reason) {
  std::lock_guard lock(range_mu_);
  if (id == 0 || id != range_id_) return false;
  range_ = r;
  range_reason_ = reason;
  return true;
}

bool control_channel::answer_claim(std::int64_t id, claim_result r) {
  std::lock_guard lock(claim_mu_);
  if (id == 0 || id != claim_id_) return false;
  claim_answer_ = r;
  claim_cv_.notify_all();
  return true;
}

void control_channel::read_loop() {
  std::vector<std::string> frames = std::move(early_);
  for (;;) {
    if (!serve(frames)) return;
    alive_ = false;
    {
      std::lock_guard lock(claim_mu_);
      claim_cv_.notify_all();  // a claim waiting on a dead connection gives up now
    }
    // aqsd restarted (or the connection broke): the job goes on, and its
    // leader hears new maps again once aqsd is back.
    frames.clear();
    if (!reconnect(frames)) return;
  }
}

bool control_channel::serve(std::vector<std::string>& frames) {
  char buf[65536];
  for (;;) {
    try {
      take(frames);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "aqs: unreadable message from aqsd: %s\n", ex.what());
      return true;
    }
    {
      std::lock_guard lock(publish_mu_);
      flush_values_locked(true);
    }
    pollfd p[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    // Waking now and then sends values published since the last batch.
    const int ready = ::poll(p, 2, static_cast<int>(k_publish_interval.count()));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return true;
    }
    if (ready == 0) continue;
    if (p[1].revents != 0) return false;  // the destructor: alive_ stays as it was
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    try {
      decoder_.feed(std::string_view(buf, static_cast<std::size_t>(n)), frames);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "aqs: unreadable message from aqsd: %s\n", ex.what());
      return true;
    }
  }
}

bool control_channel::reconnect(std::vector<std::string>& frames) {
  for (;;) {
    pollfd p{wake_[0], POLLIN, 0};
    const int r = ::poll(&p, 1, 1000);
    if (r > 0) return false;  // the destructor
    if (r < 0 && errno != EINTR) return false;
    std::int64_t id = 0;
    {
      std::lock_guard lock(send_mu_);
      id = next_id_++;
    }
    job_link link;
    try {
      link = connect_job(where_, false, id, std::max(seen_, newest_epoch()));
    } catch (const std::exception&) {
      continue;  // not back yet
    }
    std::lock_guard lock(send_mu_);
    ::close(fd_);
    fd_ = link.fd;
    decoder_ = std::move(link.decoder);
    frames = std::move(link.early);
    alive_ = true;
    if (!outcome_frame_.empty()) {
      try {
        send_all(fd_, outcome_frame_);
      } catch (const std::exception&) {
        alive_ = false;  // serve() sees the end and we come back here
      }
    }
    return true;
  }
}

}  // namespace aqs::runtime
