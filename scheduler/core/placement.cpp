// placement: best-fit ranges for new jobs, adjacent growth, tail shrinking.
#include "core/placement.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace aqs::core {

namespace {

struct run {
  std::size_t first;
  std::size_t length;
};

std::vector<run> runs_of(const processor_set& s) {
  std::vector<run> out;
  std::size_t i = s.find_next(0);
  while (i != processor_set::npos) {
    std::size_t end = s.find_next_unset(i);
    if (end == processor_set::npos) end = s.size();
    out.push_back({i, end - i});
    i = s.find_next(end);
  }
  return out;
}

}  // namespace

processor_set place_new(const processor_set& free, std::size_t n) {
  processor_set out(free.size());
  if (n == 0) return out;
  // Best fit first: the smallest run that holds the whole job. The scan stops
  // early at an exact fit, the common case on a busy machine.
  std::size_t best_first = processor_set::npos, best_len = 0;
  std::size_t total = 0;
  std::size_t i = free.find_next(0);
  while (i != processor_set::npos) {
    std::size_t end = free.find_next_unset(i);
    if (end == processor_set::npos) end = free.size();
    std::size_t len = end - i;
    total += len;
    if (len >= n && (best_first == processor_set::npos || len < best_len)) {
      best_first = i;
      best_len = len;
      if (len == n) break;
    }
    i = free.find_next(end);
  }
  if (best_first != processor_set::npos) {
    out.set_range(best_first, best_first + n);
    return out;
  }
  if (total < n) {
    throw std::invalid_argument("placement: " + std::to_string(n) + " processors asked, " +
                                std::to_string(total) + " free");
  }
  // No run is long enough: the longest runs first keep the job in few pieces.
  std::vector<run> runs = runs_of(free);
  std::stable_sort(runs.begin(), runs.end(), [](const run& a, const run& b) { return a.length > b.length; });
  for (const run& r : runs) {
    std::size_t take = std::min(n, r.length);
    out.set_range(r.first, r.first + take);
    n -= take;
    if (n == 0) break;
  }
  return out;
}

processor_set place_grow(const processor_set& held, const processor_set& free, std::size_t n) {
  if (free.intersects(held)) throw std::invalid_argument("placement: a held processor is listed as free");
  if (free.count() < n) {
    throw std::invalid_argument("placement: cannot grow by " + std::to_string(n) + ", " +
                                std::to_string(free.count()) + " free");
  }
  processor_set out = held;
  out.resize(std::max(held.size(), free.size()));
  processor_set avail = free;
  // Extend each of the job's runs upwards, then downwards, while free.
  for (const run& r : runs_of(held)) {
    for (std::size_t p = r.first + r.length; n > 0 && p < avail.size() && avail.test(p); ++p) {
      out.set(p);
      avail.reset(p);
      --n;
    }
    for (std::size_t p = r.first; n > 0 && p > 0 && avail.test(p - 1); --p) {
      out.set(p - 1);
      avail.reset(p - 1);
      --n;
    }
    if (n == 0) return out;
  }
  out |= place_new(avail, n);
  return out;
}

processor_set place_shrink(const processor_set& held, std::size_t n) {
  if (n >= held.count()) {
    throw std::invalid_argument("placement: cannot take " + std::to_string(n) + " of " +
                                std::to_string(held.count()) + " processors from a running job");
  }
  return held - held.highest(n);
}

processor_set place_shrink(const processor_set& held, std::size_t n, const processor_set& keep) {
  processor_set kept = held & keep;
  if (kept.none()) return place_shrink(held, n);
  if (n >= held.count()) return place_shrink(held, n);  // throws
  processor_set others = held - kept;
  std::size_t from_others = std::min(n, others.count());
  processor_set out = held - others.highest(from_others);
  if (n > from_others) out -= kept.highest(n - from_others);
  return out;
}

std::size_t nodes_spanned(const cluster& c, const processor_set& procs) {
  std::size_t n = 0;
  for (const node& nd : c.nodes()) {
    if (procs.count_range(nd.first_proc, nd.first_proc + nd.procs) > 0) ++n;
  }
  return n;
}

processor_set within_nodes(const cluster& c, const processor_set& held, const processor_set& free,
                           std::size_t max_nodes) {
  if (max_nodes == 0) return free;
  processor_set out(free.size());
  struct candidate {
    std::size_t index, free;
  };
  std::vector<candidate> others;
  std::size_t mine = 0;
  for (std::size_t i = 0; i < c.nodes().size(); ++i) {
    const node& nd = c.at(i);
    const processor_set here = processor_set::range(free.size(), nd.first_proc, nd.first_proc + nd.procs);
    if (held.count_range(nd.first_proc, nd.first_proc + nd.procs) > 0) {
      ++mine;
      out |= free & here;
    } else if (const std::size_t n = free.count_range(nd.first_proc, nd.first_proc + nd.procs); n > 0) {
      others.push_back({i, n});
    }
  }
  if (mine >= max_nodes) return out;
  std::stable_sort(others.begin(), others.end(), [](const candidate& a, const candidate& b) { return a.free > b.free; });
  others.resize(std::min(others.size(), max_nodes - mine));
  for (const candidate& k : others) {
    const node& nd = c.at(k.index);
    out |= free & processor_set::range(free.size(), nd.first_proc, nd.first_proc + nd.procs);
  }
  return out;
}

processor_set place_ranks(const cluster& c, const processor_set& held, const processor_set& free, std::size_t n,
                          std::size_t per_rank, std::size_t max_nodes) {
  per_rank = std::max<std::size_t>(per_rank, 1);
  processor_set out = held;
  out.resize(std::max(held.size(), free.size()));
  struct candidate {
    std::size_t index, ranks;
    bool mine;
  };
  std::vector<candidate> nodes;
  std::size_t mine = 0;
  for (std::size_t i = 0; i < c.nodes().size(); ++i) {
    const node& nd = c.at(i);
    const bool holds = held.count_range(nd.first_proc, nd.first_proc + nd.procs) > 0;
    mine += holds ? 1 : 0;
    const std::size_t ranks = free.count_range(nd.first_proc, nd.first_proc + nd.procs) / per_rank;
    if (ranks > 0) nodes.push_back({i, ranks, holds});
  }
  // Its own nodes first (no new node), then the fewest new nodes.
  std::stable_sort(nodes.begin(), nodes.end(), [](const candidate& a, const candidate& b) {
    if (a.mine != b.mine) return a.mine;
    return a.ranks > b.ranks;
  });
  std::size_t ranks = n / per_rank;
  for (const candidate& k : nodes) {
    if (ranks == 0) break;
    if (!k.mine) {
      if (max_nodes > 0 && mine >= max_nodes) break;
      ++mine;
    }
    const node& nd = c.at(k.index);
    std::size_t take = std::min(ranks, k.ranks) * per_rank;
    ranks -= take / per_rank;
    for (std::size_t p = free.find_next(nd.first_proc); take > 0 && p < nd.first_proc + nd.procs; p = free.find_next(p + 1)) {
      out.set(p);
      --take;
    }
  }
  return out;
}

}  // namespace aqs::core
