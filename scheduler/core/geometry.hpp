// geometry: a job's shape beyond a processor count (tasks, cpus per task,
// nodes, tasks per node, memory, GPUs, whole nodes) and where such a job fits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/processor_set.hpp"

namespace aqs::core {

// What Slurm calls the job's geometry. A job's processor count (min_pe ==
// max_pe for a rigid job) is ntasks * cpus_per_task; the shape says how
// those processors must be laid out. The default shape is "any processors
// anywhere", the placement every job had before shapes existed.
struct job_shape {
  std::size_t ntasks = 0;          // 0: processors / cpus_per_task
  std::size_t cpus_per_task = 1;   // a task's processors are on one node
  std::size_t tasks_per_node = 0;  // 0: any; else exactly this many on every node used
  std::size_t min_nodes = 0;       // 0: any
  std::size_t max_nodes = 0;       // 0: any
  bool exclusive = false;          // whole nodes: no other job on them, all their processors held
  std::uint64_t mem_per_node_mb = 0;  // on each node used (0: none asked)
  std::uint64_t mem_per_cpu_mb = 0;   // per processor held (0: none asked)
  std::size_t gpus_per_node = 0;      // on each node used

  // The default shape: placement by count alone, no memory or GPUs asked.
  bool plain() const noexcept {
    return cpus_per_task == 1 && tasks_per_node == 0 && min_nodes == 0 && max_nodes == 0 && !exclusive &&
           mem_per_node_mb == 0 && mem_per_cpu_mb == 0 && gpus_per_node == 0;
  }
  // Memory the job takes on a node where it holds `procs` processors.
  std::uint64_t memory_on_node(std::size_t procs) const noexcept {
    return mem_per_node_mb != 0 ? mem_per_node_mb : mem_per_cpu_mb * procs;
  }
  friend bool operator==(const job_shape&, const job_shape&) = default;
};

// What a node has besides processors, and what jobs use of it now.
struct node_resources {
  std::uint64_t memory_mb = 0;  // 0: unknown, no memory can be asked for there
  std::size_t gpus = 0;
  std::uint64_t memory_used_mb = 0;
  std::size_t gpus_used = 0;
  std::size_t jobs = 0;          // jobs holding processors on the node
  bool exclusive_owner = false;  // held by an exclusive job
};

// Where a shaped job goes: its processors, and per node used the tasks, the
// memory and the GPUs it takes there.
struct shaped_allocation {
  processor_set procs;
  struct on_node {
    std::size_t node = 0;  // registration index
    std::size_t tasks = 0;
    std::uint64_t memory_mb = 0;
    std::size_t gpus = 0;
  };
  std::vector<on_node> nodes;  // in node order
};

// Places a job of `procs` processors (ntasks * cpus_per_task) with this
// shape onto UP nodes, out of `free` processors and the nodes' free memory
// and GPUs; nullopt when it does not fit now. Tasks are spread as evenly as
// the nodes allow over the fewest nodes the shape permits (Slurm's block
// distribution), nodes with the least room that still fits first (so whole
// nodes stay whole); on each node the lowest free processors are taken.
std::optional<shaped_allocation> place_shaped(const cluster& c, const processor_set& free,
                                              const std::vector<node_resources>& res, const job_shape& shape,
                                              std::size_t procs);

// Why a job with this shape could never run on these nodes even if they
// were all free and UP (each node counted whatever its state), or nullopt
// when it could: "needs 2 nodes with 48 processors each; the largest has 24".
std::optional<std::string> never_fits(const cluster& c, const std::vector<node_resources>& res,
                                      const std::vector<std::size_t>& nodes, const job_shape& shape,
                                      std::size_t procs);

// How `ntasks` tasks of `cpus_per_task` processors each are laid over nodes
// holding procs[i] processors (in node order): exactly `tasks_per_node` each
// when given, else as evenly as the nodes allow (Slurm's block layout: the
// first nodes take one more when the tasks do not divide). The processors
// of a node that no task uses (a whole node of an exclusive job) stay idle.
// A job without a shape has one task per processor.
std::vector<std::size_t> task_layout(const std::vector<std::size_t>& procs, std::size_t cpus_per_task,
                                     std::size_t ntasks, std::size_t tasks_per_node = 0);

// Slurm's compact form of task counts: {2,2,2,1} -> "2(x3),1".
std::string tasks_per_node_text(const std::vector<std::size_t>& tasks);

}  // namespace aqs::core
