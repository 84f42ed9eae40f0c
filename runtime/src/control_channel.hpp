// control_channel: the connection between an adaptive job's leader rank and
// aqsd (protocol role "job"): it receives numbered processor maps at any time
// on a reader thread and sends the job's acknowledgements.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "job_link.hpp"
#include "protocol/framing.hpp"
#include "protocol/messages.hpp"

namespace aqs::runtime {

// A processor map as aqsd sent it.
struct map_update {
  std::int64_t epoch = 0;
  std::string procs;  // exactly as received: the ack echoes it
  std::vector<std::string> hosts;
  std::vector<std::int64_t> cpus;
  std::int64_t received_at_us = 0;  // wall clock (Unix epoch) at arrival
};

class control_channel {
public:
  // Connects and says hello as job `job_id`, having seen maps up to `seen`.
  // Throws std::runtime_error with a one-line reason naming the address when
  // aqsd cannot be reached or refuses. When the connection is lost later
  // (aqsd restarted), the reader thread reconnects every second until it
  // succeeds, and repeats the job's last acknowledgement or refusal.
  explicit control_channel(const control_address& where, std::int64_t seen = 0);
  ~control_channel();
  control_channel(const control_channel&) = delete;
  control_channel& operator=(const control_channel&) = delete;

  // The newest epoch received so far (0: none). One atomic load: the fast
  // path of a no-change MPI_Migrate().
  std::int64_t newest_epoch() const noexcept { return newest_epoch_.load(std::memory_order_acquire); }
  // The newest map, if its epoch is above `applied`.
  std::optional<map_update> newest_after(std::int64_t applied) const;

  enum class claim_result { go, declined, lost };
  // Before MPI_Migrate() applies the map of `epoch`: asks aqsd whether it is
  // still current (resize_begin) and waits up to `limit` for the answer.
  // go: apply it (also from an older aqsd that does not know the message);
  // declined: the resize timed out or was replaced: do not apply it; lost:
  // no answer (the connection is gone, or aqsd is silent): do not apply it.
  claim_result claim(std::int64_t epoch, std::chrono::milliseconds limit);

  struct ack_times {
    std::int64_t received_at_us = 0, wait_us = 0, spawn_us = 0, data_us = 0, total_us = 0;
  };
  // Tells aqsd the map of `epoch` is in effect (procs as received). Does not
  // wait for the reply. Kept until aqsd answers it: sent again after a
  // reconnection (aqsd restarted while the job applied a map it had claimed,
  // and is waiting to hear which map the job runs on).
  void acknowledge(std::int64_t epoch, const std::string& procs, const ack_times& t);
  // Tells aqsd the map of `epoch` cannot be applied; the job keeps its
  // processors. Kept and repeated as an acknowledgement is.
  void refuse(std::int64_t epoch, const std::string& reason);

  // Sends a control update {min_pe, max_pe} for this job (the app's
  // AQS_Request_range) without waiting; the answer lands in range_status().
  // Throws std::runtime_error if the connection is gone.
  void request_range(std::int64_t min, std::int64_t max);
  enum class range_state { none, pending, accepted, refused };
  // The newest range request's fate and, when refused, aqsd's reason.
  std::pair<range_state, std::string> range_status() const;

  // Queues a named value (AQS_Publish; the name and value already checked)
  // for aqsd, with the time it is published. Never blocks on aqsd: values
  // go out in batches of up to protocol::k_max_publish_batch, at once when
  // the last batch left k_publish_interval ago or a batch is full, else by
  // the reader thread within k_publish_interval. At most
  // k_max_pending_values wait: past them the oldest are dropped. Values past
  // the job's rate are dropped here, at the source, by the same token
  // bucket aqsd keeps (its rate and burst come back with each answer;
  // aqsd's defaults until the first): a program publishing in a tight loop
  // costs neither itself the sending nor aqsd the reading. False when the
  // connection is gone (dropped).
  bool publish(const std::string& name, double value);
  static constexpr std::chrono::milliseconds k_publish_interval{50};
  static constexpr std::size_t k_max_pending_values = 4096;

  // False once aqsd closed the connection or sent something unreadable.
  bool alive() const noexcept { return alive_.load(std::memory_order_acquire); }

private:
  void send_frame(const std::string& frame);
  // An acknowledgement or refusal (request `id`): sent now if it can be, and
  // kept until answered.
  void send_outcome(std::int64_t id, const std::string& frame);
  // Clears the kept outcome if `id` is its request; true if it was.
  bool answer_outcome(std::int64_t id);
  void read_loop();
  // Reads until the connection ends (true) or the destructor wakes us (false).
  bool serve(std::vector<std::string>& frames);
  // Connects again, every second, until it succeeds (true; `frames` holds
  // what came with the hello's reply) or the destructor wakes us (false).
  bool reconnect(std::vector<std::string>& frames);
  // Hands the answer to request `id` to the claim waiting for it, if any.
  bool answer_claim(std::int64_t id, claim_result r);
  void take(std::vector<std::string>& frames);  // applies received frames; throws on an unreadable one

  int fd_ = -1;  // replaced by the reader thread on reconnection, under send_mu_
  control_address where_;
  std::int64_t job_id_ = 0;
  std::int64_t seen_ = 0;  // the shim's newest map when this channel opened
  protocol::frame_decoder decoder_;  // one stream: the handshake, then the reader thread
  std::vector<std::string> early_;   // frames that arrived with the handshake's reply
  std::int64_t next_id_ = 1;
  std::mutex send_mu_;
  // The last acknowledgement or refusal until aqsd answers it (under send_mu_).
  std::int64_t outcome_id_ = 0;
  std::string outcome_frame_;
  mutable std::mutex map_mu_;
  std::optional<map_update> newest_;
  std::atomic<std::int64_t> newest_epoch_{0};
  std::atomic<bool> alive_{true};
  // The one claim in flight: its request id, and the answer once it came.
  std::mutex claim_mu_;
  std::condition_variable claim_cv_;
  std::int64_t claim_id_ = 0;
  std::optional<claim_result> claim_answer_;
  // The newest range request: its id and what aqsd answered.
  mutable std::mutex range_mu_;
  std::int64_t range_id_ = 0;
  range_state range_ = range_state::none;
  std::string range_reason_;
  bool answer_range(std::int64_t id, range_state r, const std::string& reason);
  // Published values waiting to go out, and when the last batch left.
  std::mutex publish_mu_;
  std::vector<protocol::published_value> pending_values_;
  std::chrono::steady_clock::time_point last_batch_{};
  std::deque<std::int64_t> publish_ids_;  // recent publish requests: their errors are told once
  // The job's token bucket, as aqsd keeps it (publish_mu_).
  double publish_rate_ = 200, publish_burst_ = 1000, publish_tokens_ = 1000;
  std::chrono::steady_clock::time_point publish_refilled_ = std::chrono::steady_clock::now();
  std::uint64_t dropped_at_source_ = 0;
  std::string publish_error_;
  // Sends the waiting values (publish_mu_ held); `due_only`: only if the
  // last batch left k_publish_interval ago.
  void flush_values_locked(bool due_only);
  bool answer_publish(std::int64_t id, const std::string* error, const nlohmann::json* result = nullptr);
  int wake_[2] = {-1, -1};  // the destructor wakes the reader through this pipe
  std::thread reader_;
};

}  // namespace aqs::runtime
