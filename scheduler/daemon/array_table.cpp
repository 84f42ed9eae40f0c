// array_table: how many tasks of each throttled array are admitted.
#include "daemon/array_table.hpp"

#include <algorithm>

namespace aqs::daemon {

bool array_table::arrive(std::int64_t array_id, std::int64_t task_job, std::int64_t max_running) {
  array_of_[task_job] = array_id;
  members_[array_id].insert(task_job);
  if (max_running <= 0) return true;
  entry& e = arrays_[array_id];
  e.max_running = max_running;
  if (static_cast<std::int64_t>(e.admitted.size()) < e.max_running) {
    e.admitted.insert(task_job);
    return true;
  }
  e.waiting.insert(task_job);
  waiting_of_[task_job] = array_id;
  return false;
}

std::optional<std::int64_t> array_table::ended(std::int64_t task_job) {
  const auto it = array_of_.find(task_job);
  if (it == array_of_.end()) return std::nullopt;
  const std::int64_t array_id = it->second;
  array_of_.erase(it);
  if (auto m = members_.find(array_id); m != members_.end()) {
    m->second.erase(task_job);
    if (m->second.empty()) members_.erase(m);
  }
  const auto found = arrays_.find(array_id);
  if (found == arrays_.end()) return std::nullopt;  // not throttled
  entry& e = found->second;
  std::optional<std::int64_t> next;
  if (waiting_of_.erase(task_job) != 0) {
    e.waiting.erase(task_job);
  } else if (e.admitted.erase(task_job) != 0 && !e.waiting.empty()) {
    next = *e.waiting.begin();
    e.waiting.erase(e.waiting.begin());
    waiting_of_.erase(*next);
    e.admitted.insert(*next);
  }
  if (e.admitted.empty() && e.waiting.empty()) arrays_.erase(array_id);
  return next;
}

std::vector<std::int64_t> array_table::tasks_of(std::int64_t array_id) const {
  const auto it = members_.find(array_id);
  if (it == members_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

std::optional<std::int64_t> array_table::array_of(std::int64_t task_job) const {
  const auto it = array_of_.find(task_job);
  if (it == array_of_.end()) return std::nullopt;
  return it->second;
}

std::size_t array_table::live_tasks(std::int64_t array_id) const {
  const auto it = members_.find(array_id);
  return it == members_.end() ? 0 : it->second.size();
}

array_table::compact* array_table::find_compact(std::int64_t array_id) {
  const auto it = compact_.find(array_id);
  return it == compact_.end() ? nullptr : &it->second;
}

}  // namespace aqs::daemon
