// placement: where each processor of a map runs (host and node-local cpu),
// read from the launch environment and from new_map messages (pure, no MPI).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace aqs::runtime {

// One rank's place in a job's map: one processor, or C processors of one
// node for a job with -c C (its first here, the others in more_*).
struct slot {
  int proc = 0;      // global processor number (a rank of several: its first)
  int cpu = 0;       // cpu of its node to pin to (a rank of several: its first's)
  std::string host;  // its node's machine, as MPI names it
  std::vector<int> more_procs;  // the rank's other processors, in map order
  std::vector<int> more_cpus;   // their cpus, one per processor
  friend bool operator==(const slot&, const slot&) = default;
};

// Every processor of `s`, first one first.
std::vector<int> procs_of(const slot& s);
// The cpus `s` is pinned to (one per processor; a cpu may repeat when a node
// advertises more processors than it has cpus).
std::vector<int> cpus_of(const slot& s);

// The processor numbers of a map string ("00111" -> 2,3,4). Throws
// std::invalid_argument on a character other than 0/1 or an empty map.
std::vector<int> parse_map(std::string_view map);
// The map string of every processor of `slots` over `width` processors (at least as wide as the
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

// The ranks of a job with `per_rank` processors per rank (-c), from the
// one-processor slots of its map (make_slots, processor order): per host,
// its processors in map order, `per_rank` consecutive ones per rank; ranks
// ordered by their first processor. per_rank 1 returns `procs` unchanged.
// Throws std::invalid_argument with a one-line reason when per_rank < 1 or
// a host holds a number of the map's processors that is not a multiple of
// per_rank (aqsd sends whole ranks per node: such a map is refused, never
// half applied).
std::vector<slot> group_ranks(const std::vector<slot>& procs, int per_rank);

// $AQS_CPUS_PER_TASK as the shim takes it: unset or empty is 1. Throws
// std::invalid_argument on anything but a positive integer.
int parse_cpus_per_task(const char* text);

}  // namespace aqs::runtime
