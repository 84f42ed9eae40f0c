// placement: where each processor of a map runs (host and node-local cpu),
// read from the launch environment and from new_map messages (pure, no MPI).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace aqs::runtime {

// One processor of a job's map.
struct slot {
  int proc = 0;      // global processor number
  int cpu = 0;       // cpu of its node to pin to
  std::string host;  // its node's machine, as MPI names it
  friend bool operator==(const slot&, const slot&) = default;
};

// The processor numbers of a map string ("00111" -> 2,3,4). Throws
// std::invalid_argument on a character other than 0/1 or an empty map.
std::vector<int> parse_map(std::string_view map);
// The map string of `procs` over `width` processors (at least as wide as the
// highest processor + 1).
std::string format_map(const std::vector<slot>& slots, std::size_t width);

// "3,0,1" -> {3,0,1}. Throws std::invalid_argument on anything else.
std::vector<int> parse_cpu_list(std::string_view text);
// "a*4,b*2" -> {a,a,a,a,b,b}; a bare "a" counts once. Throws
// std::invalid_argument on a malformed entry.
std::vector<std::string> parse_host_runs(std::string_view text);

// The slots of `map`: cpus and hosts give one entry per processor when known;
// when empty, processor p runs on cpu p % ncpus of `default_host`. Throws
// std::invalid_argument when a non-empty list has the wrong length.
std::vector<slot> make_slots(const std::vector<int>& procs, const std::vector<int>& cpus,
                             const std::vector<std::string>& hosts, const std::string& default_host, int ncpus);

}  // namespace aqs::runtime
