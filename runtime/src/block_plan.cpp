// block_plan: block ranges and the minimal set of transfers between two
// block distributions.
#include "block_plan.hpp"

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

namespace aqs::runtime {

namespace {

std::uint64_t block_start(std::uint64_t n, std::uint64_t parts, std::uint64_t i) noexcept {
  // The first n % parts owners get one element more; no product of n and i,
  // so no overflow for any array size.
  return i * (n / parts) + std::min(i, n % parts);
}

void check_distinct(const std::vector<int>& owners, const char* which) {
  std::unordered_set<int> seen;
  for (int p : owners) {
    if (!seen.insert(p).second) {
      throw std::invalid_argument(std::string("redistribution: process ") + std::to_string(p) +
                                  " appears twice among the " + which + " owners");
    }
  }
}

}  // namespace

index_range block_of(std::uint64_t n, std::uint64_t parts, std::uint64_t i) noexcept {
  return {block_start(n, parts, i), block_start(n, parts, i + 1)};
}

std::vector<transfer> plan_redistribution(std::uint64_t n, const std::vector<int>& old_owners,
                                          const std::vector<int>& new_owners) {
  check_distinct(old_owners, "old");
  check_distinct(new_owners, "new");
  if (n == 0) return {};
  if (old_owners.empty() || new_owners.empty()) {
    throw std::invalid_argument("redistribution: a non-empty array needs at least one owner");
  }
  // Both distributions tile [0, n) in order: one merge pass over the two
  // block sequences yields every (old block, new block) overlap.
  std::vector<transfer> out;
  const std::uint64_t po = old_owners.size(), pn = new_owners.size();
  std::uint64_t i = 0, j = 0;
  while (i < po && j < pn) {
    const index_range a = block_of(n, po, i), b = block_of(n, pn, j);
    const index_range overlap{std::max(a.begin, b.begin), std::min(a.end, b.end)};
    if (!overlap.empty() && old_owners[i] != new_owners[j]) {
      out.push_back({old_owners[i], new_owners[j], overlap});
    }
    if (a.end < b.end) {
      ++i;
    } else if (b.end < a.end) {
      ++j;
    } else {
      ++i;
      ++j;
    }
  }
  std::sort(out.begin(), out.end(), [](const transfer& x, const transfer& y) {
    return x.from != y.from ? x.from < y.from : x.range.begin < y.range.begin;
  });
  return out;
}

}  // namespace aqs::runtime
