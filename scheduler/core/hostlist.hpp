// hostlist: Slurm's host list expressions ("node[01-04,7],login"), read and written.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace aqs::core {

// Expands a host list into names, in the order written, duplicates kept out:
//   "node[01-04,7],gpu0" -> node01 node02 node03 node04 node7 gpu0
//   "rack[1-2]-n[1-2]"   -> rack1-n1 rack1-n2 rack2-n1 rack2-n2
// A range keeps the width of its first bound ("[08-10]": 08 09 10). Commas
// inside brackets separate ranges, outside them hosts. Throws
// std::invalid_argument saying what is wrong (an unclosed or empty bracket,
// a descending range "[5-2]", a bound that is not digits, an empty name, or
// more than `max_hosts` names) for anything else.
std::vector<std::string> expand_hostlist(std::string_view text, std::size_t max_hosts = 65536);

// Slurm's order of host names: by prefix, then by the number that ends them
// ("node2" before "node10").
bool host_order(const std::string& a, const std::string& b);

// The compact form, sorted in host_order and without duplicates:
// {node3, node1, node2, gpu0} -> "gpu0,node[1-3]". Zero-padded numbers run
// on only at their own width ("n08,n09,n10" -> "n[08-10]" but "n9,n010" stay
// apart). The inverse of expand_hostlist up to order.
std::string compress_hostlist(const std::vector<std::string>& hosts);

}  // namespace aqs::core
