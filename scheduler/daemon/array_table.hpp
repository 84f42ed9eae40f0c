// array_table: job arrays' compact records and throttles. An array's tasks
// not yet split off are one entry here (its pending indices as ranges) and
// one job (the array's id) until they are eligible; then a bounded number at
// a time become jobs of their own (issue 28). A throttle ("--array=0-99%10":
// at most 10 tasks in the core at once) bounds how many are split; tasks
// past it (arrays stored one row per task before compact records) wait
// here, in index order, until a running one ends. On the strand.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/array_spec.hpp"

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
  // The array a task job is of, while it is live.
  std::optional<std::int64_t> array_of(std::int64_t task_job) const;
  std::size_t live_tasks(std::int64_t array_id) const;

  // An array's compact record: its pending indices not yet split off. The
  // record is the array's own job (its id) until the first split, when
  // that job becomes the first task and the indices left move to a new
  // record, which becomes the last task in the end (array_id_NNN in Slurm).
  struct compact {
    std::int64_t record = 0;  // the job that holds `rest`
    core::task_ranges rest;
    std::int64_t max_running = 0;  // %K; 0: none
    bool eligible = false;         // its dependencies allow it: tasks are split off
    bool splitting = false;        // a split is being stored
  };
  void add_compact(std::int64_t array_id, compact c) { compact_[array_id] = std::move(c); }
  compact* find_compact(std::int64_t array_id);
  void drop_compact(std::int64_t array_id) { compact_.erase(array_id); }
  std::size_t compact_count() const noexcept { return compact_.size(); }

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
  std::map<std::int64_t, compact> compact_;          // array -> its unsplit tasks
};

}  // namespace aqs::daemon
