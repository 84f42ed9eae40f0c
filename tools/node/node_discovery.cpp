// node_discovery: affinity mask for cores, hwloc for memory and GPUs.
#include "node_discovery.hpp"

#include <hwloc.h>
#include <sched.h>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "core/processor_set.hpp"

namespace aqs::node {

node_resources discover_resources() {
  node_resources r;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (::sched_getaffinity(0, sizeof mask, &mask) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &mask)) r.cpus.push_back(c);
    }
  }
  if (r.cpus.empty()) r.cpus.push_back(0);

  hwloc_topology_t topo = nullptr;
  if (hwloc_topology_init(&topo) != 0) return r;
  // GPUs are OS devices below PCI devices: keep I/O objects.
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topo) == 0) {
    hwloc_obj_t root = hwloc_get_root_obj(topo);
    if (root != nullptr && root->total_memory > 0) {
      r.memory_mb = static_cast<std::int64_t>(root->total_memory >> 20);
    }
    for (hwloc_obj_t os = hwloc_get_next_osdev(topo, nullptr); os != nullptr; os = hwloc_get_next_osdev(topo, os)) {
      if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU || os->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC) ++r.gpus;
    }
  }
  hwloc_topology_destroy(topo);
  return r;
}

std::vector<int> parse_cpu_list(std::string_view text) {
  if (text.empty()) throw std::invalid_argument("--cpus: empty core list");
  const long configured = ::sysconf(_SC_NPROCESSORS_CONF);
  const std::size_t cores = configured > 0 ? static_cast<std::size_t>(configured) : 1;
  core::processor_set s;
  try {
    s = core::processor_set::from_ranges(std::size_t{1} << 20, text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--cpus '" + std::string(text) + "': " + e.what());
  }
  std::vector<int> out;
  s.for_each([&](std::size_t c) { out.push_back(static_cast<int>(c)); });
  if (static_cast<std::size_t>(out.back()) >= cores) {
    throw std::invalid_argument("--cpus '" + std::string(text) + "': core " + std::to_string(out.back()) +
                                " does not exist (this machine has cores 0-" + std::to_string(cores - 1) + ")");
  }
  return out;
}

std::int64_t parse_memory_mb(std::string_view text) {
  std::string_view digits = text;
  std::int64_t kb = 1024;
  if (digits.size() >= 2 && (digits.back() == 'B' || digits.back() == 'b') &&
      std::string_view("KkMmGgTt").find(digits[digits.size() - 2]) != std::string_view::npos) {
    digits.remove_suffix(1);
  }
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K': case 'k': kb = 1; digits.remove_suffix(1); break;
      case 'M': case 'm': digits.remove_suffix(1); break;
      case 'G': case 'g': kb = 1024 * 1024; digits.remove_suffix(1); break;
      case 'T': case 't': kb = std::int64_t{1024} * 1024 * 1024; digits.remove_suffix(1); break;
      default: break;
    }
  }
  std::int64_t n = 0;
  bool ok = !digits.empty() && digits.size() <= 12;
  for (const char c : digits) {
    if (c < '0' || c > '9') ok = false;
    if (ok) n = n * 10 + (c - '0');
  }
  if (!ok || n > (std::int64_t{1} << 40) / kb) {
    throw std::invalid_argument("--memory '" + std::string(text) + "' is not a size such as 16G, 512M or 4000");
  }
  return (n * kb + 1023) / 1024;
}

}  // namespace aqs::node
