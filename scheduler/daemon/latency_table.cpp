// latency_table: rows replaced per report, and forgotten with their nodes.
#include "daemon/latency_table.hpp"

namespace aqs::daemon {

std::size_t latency_table::set_row(const std::string& from, const std::vector<protocol::latency_sample>& samples,
                                   const std::function<bool(const std::string&)>& is_peer) {
  std::map<std::string, std::int64_t> row;
  std::size_t dropped = 0;
  for (const auto& s : samples) {
    if (s.node == from || s.rtt_us < 0 || !is_peer(s.node)) {
      ++dropped;
      continue;
    }
    row[s.node] = s.rtt_us;
  }
  if (row.empty()) {
    rows_.erase(from);
  } else {
    rows_[from] = std::move(row);
  }
  return dropped;
}

void latency_table::forget(const std::string& node) {
  rows_.erase(node);
  for (auto& [from, row] : rows_) row.erase(node);
}

std::vector<protocol::latency_sample> latency_table::row(const std::string& from) const {
  std::vector<protocol::latency_sample> out;
  const auto it = rows_.find(from);
  if (it == rows_.end()) return out;
  out.reserve(it->second.size());
  for (const auto& [to, rtt] : it->second) out.push_back({to, rtt});
  return out;
}

}  // namespace aqs::daemon
