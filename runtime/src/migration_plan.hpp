// migration_plan: which running ranks keep, change or give up their
// processor, and which processors need new ranks, when a job moves from one
// map to another (pure, no MPI).
#pragma once

#include <vector>

#include "placement.hpp"

namespace aqs::runtime {

struct migration_plan {
  // For each current active rank (in rank order): the index in `next` of the
  // slot it runs on afterwards, or -1 if it leaves.
  std::vector<int> assigned;
  // Indices in `next` of the slots that new ranks start on, ascending.
  std::vector<int> spawn;
  bool changes_nothing = false;  // every rank keeps its processor, none comes or goes
};

// `current`: the slot of each active rank, in rank order. `next`: the new
// map's slots in processor order (a slot is a rank: with -c C, C processors
// of one node, known by its first). A rank whose processor stays in the map
// keeps it; a rank that lost its processor takes a gained processor on its
// own host if there is one (a re-pin, cheaper than leaving and spawning);
// every other gained processor gets a new rank, every other rank leaves.
// Throws std::invalid_argument if `next` is empty or names a processor twice.
migration_plan plan_migration(const std::vector<slot>& current, const std::vector<slot>& next);

}  // namespace aqs::runtime
