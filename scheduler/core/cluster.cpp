// cluster: node bookkeeping; processor numbering follows registration order.
#include "core/cluster.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/enum_names.hpp"

namespace aqs::core {

namespace {
constexpr enum_table<node_state, 3> k_node_states = {{
    {node_state::up, "UP"},
    {node_state::drained, "DRAINED"},
    {node_state::down, "DOWN"},
}};
}  // namespace

std::string_view to_string(node_state s) noexcept { return name_in(k_node_states, s, "?"); }

std::optional<node_state> parse_node_state(std::string_view text) noexcept { return value_in(k_node_states, text); }

cluster cluster::uniform(std::size_t nodes, std::size_t procs_per_node) {
  cluster c;
  for (std::size_t i = 0; i < nodes; ++i) c.add_node("node" + std::to_string(i), procs_per_node);
  return c;
}

std::size_t cluster::add_node(std::string name, std::size_t procs) {
  if (procs == 0) throw std::invalid_argument("node '" + name + "' has no processors");
  if (by_name_.count(name) != 0) throw std::invalid_argument("node '" + name + "' is already registered");
  by_name_.emplace(name, nodes_.size());
  nodes_.push_back(node{std::move(name), total_, procs, node_state::up});
  total_ += procs;
  return nodes_.size() - 1;
}

std::optional<std::size_t> cluster::find(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

std::size_t cluster::node_of(std::size_t p) const {
  if (p >= total_) throw std::out_of_range("processor " + std::to_string(p) + " is not in the cluster");
  // Blocks are sorted by first_proc: binary search for the last block starting <= p.
  auto it = std::upper_bound(nodes_.begin(), nodes_.end(), p,
                             [](std::size_t v, const node& n) { return v < n.first_proc; });
  return static_cast<std::size_t>(it - nodes_.begin()) - 1;
}

void cluster::set_state(std::size_t index, node_state s) { nodes_.at(index).state = s; }

processor_set cluster::procs_of(std::size_t index) const {
  const node& n = nodes_.at(index);
  return processor_set::range(total_, n.first_proc, n.first_proc + n.procs);
}

processor_set cluster::procs_in(node_state s) const {
  processor_set out(total_);
  for (const node& n : nodes_) {
    if (n.state == s) out.set_range(n.first_proc, n.first_proc + n.procs);
  }
  return out;
}

}  // namespace aqs::core
