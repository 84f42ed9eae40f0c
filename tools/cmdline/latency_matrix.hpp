// latency_matrix: fnodes --latency's table of round trips between nodes.
#pragma once

#include <string>
#include <vector>

#include "protocol/results.hpp"

namespace aqs::cmdline {

// A square table, the nodes in the order given: row = the node that
// measured, column = the node measured, each cell the round trip in
// milliseconds with 3 decimals, '-' when not measured (and on the diagonal);
// columns right-aligned, headed by the node names, the first one "FROM\TO".
// Latency entries naming a node not in `nodes` are not shown. "" for no nodes.
std::string format_latency_matrix(const std::vector<protocol::node_info>& nodes);

}  // namespace aqs::cmdline
