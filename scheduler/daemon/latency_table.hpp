// latency_table: the latest round trips between nodes, as their agents
// measured them: one row per measuring node, replaced whole by each report.
// On the strand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "protocol/latency.hpp"

namespace aqs::daemon {

class latency_table {
public:
  // Replaces what `from` measured with `samples`, keeping those whose node
  // `is_peer` accepts (a node it may probe: known, UP, not itself); a node
  // named twice keeps its last. Returns how many were dropped, so that the
  // caller can warn about an agent that reports nonsense.
  std::size_t set_row(const std::string& from, const std::vector<protocol::latency_sample>& samples,
                      const std::function<bool(const std::string&)>& is_peer);
  // Forgets what `node` measured and what was measured to it (it went DOWN:
  // the numbers no longer describe a path anybody can use).
  void forget(const std::string& node);
  // What `from` measured, by node name; empty when nothing.
  std::vector<protocol::latency_sample> row(const std::string& from) const;
  std::size_t rows() const noexcept { return rows_.size(); }

private:
  std::map<std::string, std::map<std::string, std::int64_t>> rows_;
};

}  // namespace aqs::daemon
