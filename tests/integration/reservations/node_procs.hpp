// node_procs: which global processors a node of a test cluster has (nodes
// register in any order, so node0 is not always processors 0-3), and how
// many of a job's map are on it.
#pragma once

#include <set>
#include <string>

#include "aqs_cluster.hpp"

namespace aqs::test {

// The node's processors, from fnodes' range list ("4-7", "0-1,3").
inline std::set<std::size_t> node_procs(cluster& c, const std::string& name) {
  std::set<std::size_t> out;
  for (const auto& n : c.nodes()) {
    if (n.name != name) continue;
    std::size_t at = 0;
    const std::string& r = n.procs;
    while (at < r.size()) {
      const std::size_t comma = r.find(',', at);
      const std::string item = r.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      const std::size_t dash = item.find('-');
      const std::size_t lo = std::stoul(item.substr(0, dash));
      const std::size_t hi = dash == std::string::npos ? lo : std::stoul(item.substr(dash + 1));
      for (std::size_t p = lo; p <= hi; ++p) out.insert(p);
      at = comma == std::string::npos ? r.size() : comma + 1;
    }
  }
  return out;
}

// How many processors of `map` (0/1 text) are among `procs`.
inline std::size_t count_on(const std::string& map, const std::set<std::size_t>& procs) {
  std::size_t n = 0;
  for (std::size_t p : procs) n += p < map.size() && map[p] == '1';
  return n;
}

}  // namespace aqs::test
