// adaptive_placement: where an adaptive job with a shape may hold ranks as it
// starts, grows and shrinks (issue 30). For an adaptive job the shape's
// options are bounds kept at every size:
//   -N MIN[-MAX]       its ranks span at least MIN nodes (as soon as it has
//                      MIN ranks: its minimum is at least MIN ranks) and at
//                      most MAX;
//   --ntasks-per-node  at most that many of its ranks on any node;
//   --exclusive        whole nodes, as for a rigid job: it holds every
//                      processor of each node it is on (a rank each), so
//                      it starts, grows and shrinks by whole nodes that no
//                      other job holds a processor of;
//   --mem, GPUs        that much memory and that many GPUs on every node it
//                      holds a rank on: it grows onto a node only where they
//                      are free, and gives them back when it leaves the node.
// Rigid jobs' shapes are placed by place_shaped (geometry.hpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/geometry.hpp"
#include "core/processor_set.hpp"

namespace aqs::core {

// Whether an adaptive job with this shape is bounded per node (any of the
// options above but -c and a node maximum, which place_ranks keeps alone).
bool node_bound(const job_shape& s) noexcept;

// Whether it takes memory, GPUs or whole nodes where it runs (what the
// scheduler's per-node resources must follow as its map changes).
bool takes_node_resources(const job_shape& s) noexcept;

// The part of `free` a job holding `held` (whole ranks of `per_rank`
// processors) may be given: on a node it holds, up to its ranks per node;
// on another node, only where no job holds the node exclusively and the
// node's free memory and GPUs hold what it asks for a node; there, again at
// most its ranks per node. On each node the lowest free processors. (Not
// for --exclusive, which takes whole nodes.)
processor_set adaptive_room(const cluster& c, const std::vector<node_resources>& res, const job_shape& s,
                            std::size_t per_rank, const processor_set& held, const processor_set& free);

// Up to n more processors (whole ranks) for a job holding `held`, out of
// adaptive_room(): a job that holds nothing and must span at least
// s.min_nodes nodes first gets one rank on each of that many nodes (those
// with the most room, then the lowest index), and nothing at all when fewer
// nodes have room; the rest as place_ranks() lays it, on at most
// `max_nodes` nodes (0: any). For --exclusive: whole nodes all of whose
// processors are in `free`, lowest index first, until it has n more (the
// last node may take it past n, never past `most` more: its maximum), and
// nothing at a start that would span fewer than s.min_nodes. The result
// contains `held`.
processor_set place_adaptive_shaped(const cluster& c, const std::vector<node_resources>& res, const job_shape& s,
                                    std::size_t per_rank, std::size_t max_nodes, const processor_set& held,
                                    const processor_set& free, std::size_t n, std::size_t most);

// The map for a job holding `held` that gives back n processors in whole
// ranks: from the highest node down, each node's highest processors first,
// processors on nodes with a member of `last` (drained ones) only after all
// others, never leaving it on fewer than s.min_nodes nodes. Gives back fewer
// than n only when s.min_nodes forbids more. For --exclusive: whole nodes,
// at least n processors when that leaves it `min_procs` or more, else the
// most whole nodes under n.
processor_set shrink_adaptive_shaped(const cluster& c, const job_shape& s, std::size_t per_rank,
                                     std::size_t min_procs, const processor_set& held, std::size_t n,
                                     const processor_set& last);

// What the job takes on each node of `map`: its ranks there, its memory for
// that node, its GPUs per node.
std::vector<shaped_allocation::on_node> adaptive_allocation(const cluster& c, const job_shape& s,
                                                            std::size_t per_rank, const processor_set& map);

// Why an adaptive job with this shape and min_pe..max_pe processors could
// never run on these nodes even if they were all free (never_fits() of its
// minimum, and for --exclusive a node small enough for its maximum), or
// nullopt when it could.
std::optional<std::string> adaptive_never_fits(const cluster& c, const std::vector<node_resources>& res,
                                               const std::vector<std::size_t>& nodes, const job_shape& s,
                                               std::size_t min_pe, std::size_t max_pe);

}  // namespace aqs::core
