// array_table: job arrays' throttles ("--array=0-99%10": at most 10 tasks
// in the core at once). Tasks past the limit wait here, in index order,
// until a running one ends. On the strand.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace aqs::daemon {

class array_table {
public:
  // A task of array `array_id` (the id of its first task) arrives. True:
  // admit it now (counted as admitted); false: it waits here.
  bool arrive(std::int64_t array_id, std::int64_t task_job, std::int64_t max_running);
  // A task ended or was cancelled (admitted or waiting): the next task to
  // admit, if one waited for this one's place.
  std::optional<std::int64_t> ended(std::int64_t task_job);
  bool is_waiting(std::int64_t task_job) const { return waiting_of_.count(task_job) != 0; }
  // The live tasks of an array (empty for an id that is no array's).
  std::vector<std::int64_t> tasks_of(std::int64_t array_id) const;
  std::size_t waiting_count() const noexcept { return waiting_of_.size(); }

private:
  struct entry {
    std::int64_t max_running = 0;
    std::set<std::int64_t> admitted;
    std::set<std::int64_t> waiting;  // by id, which is index order; a set: cancelling each of 100,000 is n log n
  };
  std::map<std::int64_t, entry> arrays_;
  std::map<std::int64_t, std::int64_t> array_of_;    // task job -> array
  std::map<std::int64_t, std::set<std::int64_t>> members_;  // array -> its live tasks
  std::map<std::int64_t, std::int64_t> waiting_of_;  // waiting task job -> array
};

}  // namespace aqs::daemon
