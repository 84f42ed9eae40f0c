// map_display: a processor map in the compact per-node form "node2:0-3,node3:0-1".
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "core/processor_set.hpp"

namespace aqs::core {

// One node as registered: its processors are the global numbers
// [first_proc, first_proc + nprocs).
struct node_span {
  std::string name;
  std::size_t first_proc = 0;
  std::size_t nprocs = 0;
};

// The members of `procs` grouped by node, in order of global processor
// number, each node as "name:" + its LOCAL processor numbers in range form:
// {node2 at 8, 4 procs; node3 at 12, 4 procs} and processors 8-11,12-13 give
// "node2:0-3,node3:0-1". A node whose processors are not contiguous in the
// map appears once per run ("node2:0-1,node2:3"), so that a comma always
// starts a new name:range item and the text splits without ambiguity.
// Processors that no node covers (a stale map) are shown with their global
// numbers under the name "?" ("?:40-41"), never dropped. Nodes may be given
// in any order; if spans overlap, the one with the lower first_proc wins.
// The empty set gives "".
std::string format_processor_map(std::span<const node_span> nodes, const processor_set& procs);

// The inverse: the processors "node2:0-3,node3:0-1" names, over a cluster of
// `size` processors. Items of nodes not among `nodes` (not registered yet)
// and local numbers beyond a node's processors are left out and their node
// names added to `missing` (when given). Throws std::invalid_argument, one
// line, for text that is not of this form.
processor_set parse_processor_map(std::span<const node_span> nodes, std::string_view text, std::size_t size,
                                  std::vector<std::string>* missing = nullptr);

}  // namespace aqs::core
