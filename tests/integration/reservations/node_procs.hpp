// node_procs: which global processors a node of a test cluster has (nodes
// register in any order, so node0 is not always processors 0-3), and how
// many of a job's map are on it.
#pragma once

#include <set>
#include <string>

#include "aqs_cluster.hpp"
#include "core/processor_set.hpp"

namespace aqs::test {

// The node's processors, from fnodes' range list ("4-7", "0-1,3"), read as
// the core reads ranges.
inline std::set<std::size_t> node_procs(cluster& c, const std::string& name) {
  std::set<std::size_t> out;
  for (const auto& n : c.nodes()) {
    if (n.name != name) continue;
    for (std::size_t p : core::processor_set::from_ranges(std::size_t{1} << 20, n.procs).members()) out.insert(p);
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
