// node_discovery: what this machine offers to AQS: cores, memory, GPUs.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace aqs::node {

struct node_resources {
  std::vector<int> cpus;      // cores this process may run on, ascending
  std::int64_t memory_mb = 0;
  std::int64_t gpus = 0;
};

// The cores in our affinity mask (so cpusets and taskset are respected),
// total memory and GPU count from hwloc. Never throws: what cannot be found
// is reported as 0 (and cpus falls back to {0}).
node_resources discover_resources();

// Parses a core list "0-3,6". Throws std::invalid_argument with a one-line
// message for bad syntax or a core the machine does not have.
std::vector<int> parse_cpu_list(std::string_view text);

// "16G", "512M", "4000" (MB), "1T", "2048K": a memory size in MB, as
// Slurm writes them (rounded up). Throws std::invalid_argument naming the text.
std::int64_t parse_memory_mb(std::string_view text);

}  // namespace aqs::node
