// watch_list: delivery to watchers and the early-output buffer.
#include "daemon/watch_list.hpp"

#include <algorithm>

namespace aqs::daemon {

void watch_list::add(std::int64_t job, const std::shared_ptr<connection>& c, std::int64_t request_id) {
  watchers_[job].push_back({c, request_id});
  auto e = early_.find(job);
  if (e == early_.end()) return;
  for (auto& o : e->second.kept) {
    o.id = request_id;
    c->send(std::move(o));
  }
  early_.erase(e);
}

void watch_list::notify(std::int64_t job, core::job_state state, std::optional<std::int32_t> code,
                        std::optional<std::int32_t> signal, const core::processor_set* procs) {
  auto w = watchers_.find(job);
  if (w == watchers_.end()) return;
  for (const auto& x : w->second) {
    auto conn = x.conn.lock();
    if (!conn) continue;
    protocol::job_event ev;
    ev.id = x.request_id;
    ev.job_id = job;
    ev.state = state;
    if (code) ev.exit_code = *code;
    if (signal) ev.signal = *signal;
    if (procs != nullptr && procs->any()) ev.procs = procs->to_string();
    conn->send(std::move(ev));
  }
  if (core::is_final(state)) watchers_.erase(w);
}

void watch_list::output(const protocol::output& m) {
  bool delivered = false;
  if (auto w = watchers_.find(m.job_id); w != watchers_.end()) {
    for (const auto& x : w->second) {
      if (auto conn = x.conn.lock()) {
        protocol::output o = m;
        o.id = x.request_id;
        conn->send(std::move(o));
        delivered = true;
      }
    }
  }
  if (delivered) return;
  early& e = early_[m.job_id];
  e.kept.push_back(m);
  e.bytes += m.data.size();
  while (e.bytes > k_early_output_max && !e.kept.empty()) {
    e.bytes -= e.kept.front().data.size();
    e.kept.pop_front();
  }
}

std::vector<std::int64_t> watch_list::drop(const connection& gone) {
  std::vector<std::int64_t> orphans;
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    auto& list = it->second;
    const auto before = list.size();
    std::erase_if(list, [&](const watcher& w) {
      auto c = w.conn.lock();
      return !c || c->serial() == gone.serial();
    });
    if (list.empty() && before > 0) {
      orphans.push_back(it->first);
      it = watchers_.erase(it);
    } else {
      ++it;
    }
  }
  return orphans;
}

void watch_list::forget(std::int64_t job) {
  watchers_.erase(job);
  early_.erase(job);
}

std::size_t watch_list::watchers_of(std::int64_t job) const {
  auto it = watchers_.find(job);
  return it == watchers_.end() ? 0 : it->second.size();
}

std::size_t watch_list::early_bytes(std::int64_t job) const {
  auto it = early_.find(job);
  return it == early_.end() ? 0 : it->second.bytes;
}

}  // namespace aqs::daemon
