// step_table: lookups by launch, by launcher and by job.
#include "daemon/step_table.hpp"

namespace aqs::daemon {

std::optional<step_table::key> step_table::by_launch(std::size_t node, std::int64_t launch_id) const {
  for (const auto& [k, s] : steps_) {
    if (k.second == node && s.launch == launch_id) return k;
  }
  return std::nullopt;
}

step_entry* step_table::find(const key& k) {
  auto it = steps_.find(k);
  return it == steps_.end() ? nullptr : &it->second;
}

void step_table::started(const key& k) {
  if (auto* s = find(k)) s->started = true;
  step_nodes_[k.first].insert(k.second);
}

std::optional<step_entry> step_table::take(const key& k) {
  auto it = steps_.find(k);
  if (it == steps_.end()) return std::nullopt;
  step_entry s = std::move(it->second);
  steps_.erase(it);
  return s;
}

std::vector<step_table::key> step_table::take_of(const connection& gone) {
  std::vector<key> out;
  for (auto it = steps_.begin(); it != steps_.end();) {
    auto c = it->second.conn.lock();
    if (!c || c->serial() == gone.serial()) {
      out.push_back(it->first);
      it = steps_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

step_table::job_end step_table::take_job(std::int64_t job) {
  job_end out;
  if (auto sn = step_nodes_.find(job); sn != step_nodes_.end()) {
    out.nodes = std::move(sn->second);
    step_nodes_.erase(sn);
  }
  for (auto it = steps_.lower_bound({job, 0}); it != steps_.end() && it->first.first == job;) {
    out.nodes.insert(it->first.second);
    out.open.emplace_back(it->first.second, it->second.conn);
    it = steps_.erase(it);
  }
  return out;
}

const std::set<std::size_t>* step_table::nodes_of(std::int64_t job) const {
  auto it = step_nodes_.find(job);
  return it == step_nodes_.end() ? nullptr : &it->second;
}

}  // namespace aqs::daemon
