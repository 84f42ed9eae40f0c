// placement: which processors a job gets, keeps or gives back.
#pragma once

#include <cstddef>

#include "core/cluster.hpp"
#include "core/processor_set.hpp"

namespace aqs::core {

// Policies decide how many processors; placement decides which. The rules
// (design brief): never give a processor that is not free, keep a resized
// job's processors, and keep free space in whole nodes and contiguous
// ranges. Nodes own contiguous blocks of numbers, so contiguity serves both.
// All functions are word-wise on the sets; the cost is O(words + runs).

// n processors out of `free` for a new job: the smallest run of free
// processors that holds all n (best fit, taken from the run's start so the
// rest stays one range); failing that, the longest runs first. Throws
// std::invalid_argument when free has fewer than n members.
processor_set place_new(const processor_set& free, std::size_t n);

// The map for a job holding `held` that grows by n processors out of `free`:
// first the free processors right above and below its ranges (adjacent, the
// same nodes), then place_new for the rest. The result contains `held`.
// Throws std::invalid_argument when free has fewer than n members or
// intersects held.
processor_set place_grow(const processor_set& held, const processor_set& free, std::size_t n);

// The map for a job holding `held` that gives back n processors: its
// highest-numbered ones, so the job stays in its lowest ranges and what it
// frees is contiguous with the space above it. Only the n released ranks
// move. Throws std::invalid_argument when n >= |held| (a job keeps at least one).
processor_set place_shrink(const processor_set& held, std::size_t n);

// As above, but the processors in `keep` are given back last: first the
// highest of held - keep, then, only if n is larger, the highest of the kept
// ones. The scheduler keeps a job's processors on drained nodes this way,
// since what it gives back there is of no use to any other job. Throws
// std::invalid_argument when n >= |held|.
processor_set place_shrink(const processor_set& held, std::size_t n, const processor_set& keep);

// How many nodes of `c` hold a processor of `procs`.
std::size_t nodes_spanned(const cluster& c, const processor_set& procs);

// The part of `free` a job holding `held` may be given when it may hold
// processors on at most `max_nodes` nodes (an adaptive job in a partition
// with MaxNodes): all of free on the nodes it holds, and all of free on as
// many other nodes as that leaves, those with the most free processors
// first (then the lowest index), so that it grows on the fewest nodes.
// All of `free` when max_nodes is 0; nothing on other nodes when it holds
// max_nodes nodes or more already.
processor_set within_nodes(const cluster& c, const processor_set& held, const processor_set& free,
                           std::size_t max_nodes);

// The map for a job holding `held` (whole ranks of `per_rank` processors
// on each node) that grows by up to n processors out of `free`, in whole
// ranks, each rank's processors on one node: first on the nodes it holds,
// then on those with the most free processors (then the lowest index), at
// most `max_nodes` nodes in all (0: any); on each node its lowest free
// processors. Gives fewer than n when the nodes it may use have no more
// room for a whole rank. The result contains `held`.
processor_set place_ranks(const cluster& c, const processor_set& held, const processor_set& free, std::size_t n,
                          std::size_t per_rank, std::size_t max_nodes);

}  // namespace aqs::core
