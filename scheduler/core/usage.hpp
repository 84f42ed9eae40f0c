// usage: what a job is charged, the integral of the processors it held over
// time (suspended time excluded), and past usage decayed with a half-life for
// fair share. Pure: the caller hands in the map history and the times.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

namespace aqs::core {

// From `from` until the next segment's `from` (or the job's end), the job
// held `procs` processors, or was suspended (then it holds none, whatever
// procs says). A resize, a suspension, a resume each start a segment.
struct held_segment {
  double from = 0;
  std::size_t procs = 0;
  bool suspended = false;
};

// Processor-seconds of a history up to `end` (the job's end, or now for a
// running job): the sum of procs * duration over the non-suspended segments.
// Segments must be in time order; one that starts after `end` counts
// nothing and a segment's time before its predecessor's counts as zero
// length. Throws std::invalid_argument for a non-finite time.
double processor_seconds(const std::vector<held_segment>& history, double end);

// 2^(-age / half_life): how much a processor-second `age` seconds ago still
// weighs. half_life <= 0 means no decay (1 for any age); a negative age
// (the future) weighs 1.
double decay_weight(double age, double half_life);

// The same history's processor-seconds, each weighted by its decay at
// `now`: the closed form of the integral of procs * 2^(-(now - t)/H) dt.
// Without decay (half_life <= 0) equal to processor_seconds(history, end).
double decayed_processor_seconds(const std::vector<held_segment>& history, double end, double now,
                                 double half_life);

// Decayed usage per key (an association), kept incrementally: each charge
// is decayed to the latest time seen, so reading is O(1) per key and a
// running job can be charged piecewise as it runs.
class usage_ledger {
public:
  explicit usage_ledger(double half_life = 0) : half_life_(half_life) {}
  double half_life() const noexcept { return half_life_; }
  // Charges `procs` held from `from` to `to` (to >= from) to `key`.
  void charge(const std::string& key, double procs, double from, double to);
  // Adds processor-seconds already decayed to time `at`.
  void add(const std::string& key, double amount, double at);
  // The key's usage decayed to `now` (0 for a key never charged).
  double at(const std::string& key, double now) const;
  // Every key's usage decayed to `now`.
  std::unordered_map<std::string, double> all_at(double now) const;

private:
  struct entry {
    double value = 0;
    double when = 0;
  };
  double half_life_;
  std::unordered_map<std::string, entry> entries_;
};

}  // namespace aqs::core
