// cluster: the nodes of the machine in registration order and their processors.
#pragma once

#include <cstddef>
#include <string>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/processor_set.hpp"

namespace aqs::core {

enum class node_state : unsigned char {
  up,       // processors may be given to jobs
  drained,  // running jobs keep their processors; nothing new is placed here
  down,     // unusable; jobs holding processors here lose them
};

std::string_view to_string(node_state s) noexcept;
// "UP", "DRAINED", "DOWN" (as the store keeps them); nullopt for anything else.
std::optional<node_state> parse_node_state(std::string_view text) noexcept;

struct node {
  std::string name;
  std::size_t first_proc = 0;  // global number of the node's first processor
  std::size_t procs = 0;       // the node owns [first_proc, first_proc + procs)
  node_state state = node_state::up;
};

// Processors are numbered across the cluster in node registration order, so
// each node owns one contiguous block; that is what lets placement prefer
// whole nodes simply by preferring contiguous ranges.
class cluster {
public:
  cluster() = default;
  // A cluster of `nodes` nodes with `procs_per_node` processors each, named
  // node0, node1, ... (the simulator's and the tests' machine).
  static cluster uniform(std::size_t nodes, std::size_t procs_per_node);

  // Appends a node (registration order) and returns its index. Throws
  // std::invalid_argument for zero processors or a duplicate name.
  std::size_t add_node(std::string name, std::size_t procs);

  std::size_t size() const noexcept { return total_; }  // processors
  const std::vector<node>& nodes() const noexcept { return nodes_; }
  const node& at(std::size_t index) const { return nodes_.at(index); }
  // Index of the node with this name, if registered.
  std::optional<std::size_t> find(const std::string& name) const;
  // Index of the node owning processor p. Throws std::out_of_range.
  std::size_t node_of(std::size_t p) const;
  // Throws std::out_of_range for a bad index.
  void set_state(std::size_t index, node_state s);

  // The processors of one node, and of all nodes in a given state.
  processor_set procs_of(std::size_t index) const;
  processor_set procs_in(node_state s) const;

private:
  std::vector<node> nodes_;
  std::unordered_map<std::string, std::size_t> by_name_;
  std::size_t total_ = 0;
};

}  // namespace aqs::core
