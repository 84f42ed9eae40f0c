// job_table: the live table and the bounded record of ended jobs.
#include "daemon/job_table.hpp"

#include <algorithm>

namespace aqs::daemon {

job_entry* job_table::find(std::int64_t id) {
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : &it->second;
}

const job_entry* job_table::find(std::int64_t id) const {
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : &it->second;
}

bool job_table::add(std::int64_t id, job_entry e) {
  if (is_known(id)) return false;
  live_.emplace(id, std::move(e));
  return true;
}

void job_table::finish(std::int64_t id, core::job_state state, std::optional<std::int32_t> code,
                       std::optional<std::int32_t> signal) {
  std::int32_t uid = 0;
  if (auto live = live_.find(id); live != live_.end()) {
    uid = live->second.uid;
    live_.erase(live);
  }
  if (finished_.insert_or_assign(id, final_info{state, uid, code, signal}).second) finished_order_.push_back(id);
  while (finished_order_.size() > finished_kept_) {
    finished_.erase(finished_order_.front());
    finished_order_.pop_front();
  }
}

const final_info* job_table::finished(std::int64_t id) const {
  auto it = finished_.find(id);
  return it == finished_.end() ? nullptr : &it->second;
}

std::vector<std::int64_t> job_table::of_user(const std::string& user) const {
  std::vector<std::int64_t> out;
  for (const auto& [id, e] : live_) {
    if (e.user == user) out.push_back(id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace aqs::daemon
