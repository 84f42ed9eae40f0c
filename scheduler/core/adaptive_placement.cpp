// adaptive_placement: an adaptive job's shape kept as it starts, grows and shrinks.
#include "core/adaptive_placement.hpp"

#include <algorithm>

#include "core/placement.hpp"

namespace aqs::core {

bool node_bound(const job_shape& s) noexcept {
  return s.tasks_per_node != 0 || s.min_nodes > 1 || takes_node_resources(s);
}

bool takes_node_resources(const job_shape& s) noexcept {
  return s.exclusive || s.mem_per_node_mb != 0 || s.mem_per_cpu_mb != 0 || s.gpus_per_node != 0;
}

namespace {

const node_resources& resources_of(const std::vector<node_resources>& res, std::size_t i) {
  static const node_resources none{};
  return i < res.size() ? res[i] : none;
}

// Whether a job may enter node i for its memory and GPUs (and no job holds
// it exclusively).
bool may_enter(const node_resources& r, const job_shape& s) {
  if (r.exclusive_owner) return false;
  const std::uint64_t mem_left = r.memory_mb > r.memory_used_mb ? r.memory_mb - r.memory_used_mb : 0;
  if (s.mem_per_node_mb != 0 && mem_left < s.mem_per_node_mb) return false;
  if (s.gpus_per_node != 0 && (r.gpus < r.gpus_used || r.gpus - r.gpus_used < s.gpus_per_node)) return false;
  return true;
}

bool holds_on(const processor_set& set, const node& nd) {
  return set.count_range(nd.first_proc, nd.first_proc + nd.procs) != 0;
}

// Adds to `out` the lowest n members of `from` in [lo, hi) (no set of the
// cluster's size is made per node: this runs for every node).
void take_lowest(processor_set& out, const processor_set& from, std::size_t lo, std::size_t hi, std::size_t n) {
  for (std::size_t p = from.find_next(lo); n > 0 && p < hi; p = from.find_next(p + 1)) {
    out.set(p);
    --n;
  }
}

// Removes from `set` its highest n members in [lo, hi).
void drop_highest(processor_set& set, std::size_t lo, std::size_t hi, std::size_t n) {
  std::vector<std::size_t> members;
  for (std::size_t p = set.find_next(lo); p < hi; p = set.find_next(p + 1)) members.push_back(p);
  for (std::size_t k = 0; k < n && !members.empty(); ++k) {
    set.reset(members.back());
    members.pop_back();
  }
}

// --exclusive: whole free nodes it may enter, lowest index first, until it
// has n more (the last node may take it past n), never past `most` more.
processor_set place_whole_nodes(const cluster& c, const std::vector<node_resources>& res, const job_shape& s,
                                std::size_t max_nodes, const processor_set& held, const processor_set& free,
                                std::size_t n, std::size_t most) {
  processor_set out = held;
  out.resize(std::max(held.size(), free.size()));
  std::size_t spanned = nodes_spanned(c, held);
  const std::size_t before = spanned;
  for (std::size_t i = 0; i < c.nodes().size() && n > 0; ++i) {
    const node& nd = c.at(i);
    if (nd.procs == 0 || nd.procs > most || holds_on(held, nd)) continue;
    if (free.count_range(nd.first_proc, nd.first_proc + nd.procs) != nd.procs) continue;
    if (!may_enter(resources_of(res, i), s)) continue;
    if (max_nodes > 0 && spanned >= max_nodes) break;
    out.set_range(nd.first_proc, nd.first_proc + nd.procs);
    n -= std::min(n, nd.procs);
    most -= nd.procs;
    ++spanned;
  }
  if (before == 0 && spanned < s.min_nodes) return held;  // it cannot start spread enough now
  return out;
}

}  // namespace

processor_set adaptive_room(const cluster& c, const std::vector<node_resources>& res, const job_shape& s,
                            std::size_t per_rank, const processor_set& held, const processor_set& free) {
  per_rank = std::max<std::size_t>(per_rank, 1);
  processor_set out(free.size());
  for (std::size_t i = 0; i < c.nodes().size(); ++i) {
    const node& nd = c.at(i);
    const std::size_t lo = nd.first_proc, hi = nd.first_proc + nd.procs;
    const std::size_t here_free = free.count_range(lo, hi);
    if (here_free == 0) continue;
    const node_resources& r = resources_of(res, i);
    const std::size_t mine = held.count_range(lo, hi);
    if (mine == 0 && !may_enter(r, s)) continue;  // a node it would enter
    std::size_t most = here_free;
    // Memory per processor: what is left on the node (its own share there
    // is already counted as used).
    if (s.mem_per_cpu_mb != 0) {
      const std::uint64_t mem_left = r.memory_mb > r.memory_used_mb ? r.memory_mb - r.memory_used_mb : 0;
      most = std::min<std::size_t>(most, static_cast<std::size_t>(mem_left / s.mem_per_cpu_mb));
    }
    if (s.tasks_per_node != 0) {
      const std::size_t cap = s.tasks_per_node * per_rank;
      most = std::min(most, cap > mine ? cap - mine : 0);
    }
    most = most / per_rank * per_rank;
    if (most == 0) continue;
    take_lowest(out, free, lo, hi, most);
  }
  return out;
}

processor_set place_adaptive_shaped(const cluster& c, const std::vector<node_resources>& res, const job_shape& s,
                                    std::size_t per_rank, std::size_t max_nodes, const processor_set& held,
                                    const processor_set& free, std::size_t n, std::size_t most) {
  if (s.exclusive) return place_whole_nodes(c, res, s, max_nodes, held, free, n, std::max(most, n));
  per_rank = std::max<std::size_t>(per_rank, 1);
  const processor_set room = adaptive_room(c, res, s, per_rank, held, free);
  processor_set seed = held;
  seed.resize(std::max(held.size(), free.size()));
  std::size_t want = n;
  if (held.none() && s.min_nodes > 1) {
    struct candidate {
      std::size_t index, ranks;
    };
    std::vector<candidate> nodes;
    for (std::size_t i = 0; i < c.nodes().size(); ++i) {
      const node& nd = c.at(i);
      const std::size_t ranks = room.count_range(nd.first_proc, nd.first_proc + nd.procs) / per_rank;
      if (ranks > 0) nodes.push_back({i, ranks});
    }
    if (nodes.size() < s.min_nodes || n < s.min_nodes * per_rank) return seed;  // nothing: it cannot start now
    std::stable_sort(nodes.begin(), nodes.end(), [](const candidate& a, const candidate& b) { return a.ranks > b.ranks; });
    for (std::size_t k = 0; k < s.min_nodes; ++k) {
      const node& nd = c.at(nodes[k].index);
      take_lowest(seed, room, nd.first_proc, nd.first_proc + nd.procs, per_rank);
    }
    want = n - s.min_nodes * per_rank;
    if (want == 0) return seed;
  }
  return place_ranks(c, seed, room - seed, want, per_rank, max_nodes);
}

processor_set shrink_adaptive_shaped(const cluster& c, const job_shape& s, std::size_t per_rank,
                                     std::size_t min_procs, const processor_set& held, std::size_t n,
                                     const processor_set& last) {
  per_rank = std::max<std::size_t>(per_rank, 1);
  processor_set out = held;
  std::size_t spanned = nodes_spanned(c, held);
  std::size_t size = held.count();
  std::size_t ranks = n / per_rank;
  std::size_t given = 0;
  // Two passes, highest node first: nodes with nothing in `last`, then the others.
  for (int pass = 0; pass < 2 && given < n; ++pass) {
    for (std::size_t k = c.nodes().size(); k-- > 0 && given < n;) {
      const node& nd = c.at(k);
      const std::size_t lo = nd.first_proc, hi = nd.first_proc + nd.procs;
      if (holds_on(last, nd) != (pass == 1)) continue;
      const std::size_t here = out.count_range(lo, hi);
      if (here == 0) continue;
      if (s.exclusive) {
        // A whole node: past n only while it keeps its minimum.
        if (spanned <= s.min_nodes || (here > n - given && size - here < min_procs)) continue;
        drop_highest(out, lo, hi, here);
        given += here;
        size -= here;
        --spanned;
        continue;
      }
      const std::size_t here_ranks = here / per_rank;
      std::size_t take = std::min(ranks, here_ranks);
      if (take == here_ranks && spanned <= s.min_nodes) --take;  // its last rank there keeps the node
      if (take == 0) continue;
      drop_highest(out, lo, hi, take * per_rank);
      ranks -= take;
      given += take * per_rank;
      if (take == here_ranks) --spanned;
    }
  }
  return out;
}
std::optional<std::string> adaptive_never_fits(const cluster& c, const std::vector<node_resources>& res,
                                               const std::vector<std::size_t>& nodes, const job_shape& s,
                                               std::size_t min_pe, std::size_t max_pe) {
  if (s.exclusive) {
    std::size_t smallest = 0;
    for (const std::size_t i : nodes) {
      const std::size_t p = i < c.nodes().size() ? c.at(i).procs : 0;
      if (p != 0 && (smallest == 0 || p < smallest)) smallest = p;
    }
    if (smallest > max_pe) {
      return "an --exclusive adaptive job holds whole nodes; the smallest has " + std::to_string(smallest) +
             " processors, more than its maximum of " + std::to_string(max_pe);
    }
  }
  return never_fits(c, res, nodes, s, min_pe);
}

std::vector<shaped_allocation::on_node> adaptive_allocation(const cluster& c, const job_shape& s,
                                                            std::size_t per_rank, const processor_set& map) {
  per_rank = std::max<std::size_t>(per_rank, 1);
  std::vector<shaped_allocation::on_node> out;
  for (std::size_t i = 0; i < c.nodes().size(); ++i) {
    const node& nd = c.at(i);
    const std::size_t here = map.count_range(nd.first_proc, nd.first_proc + nd.procs);
    if (here == 0) continue;
    out.push_back({i, here / per_rank, s.memory_on_node(here), s.gpus_per_node});
  }
  return out;
}

}  // namespace aqs::core
