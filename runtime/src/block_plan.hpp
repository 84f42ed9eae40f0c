// block_plan: which ranges of a block-distributed array change owner when the
// set of active ranks changes (pure arithmetic, no MPI).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace aqs::runtime {

// Half-open range [begin, end) of global element indices.
struct index_range {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t size() const noexcept { return end - begin; }
  bool empty() const noexcept { return end <= begin; }
  friend bool operator==(const index_range&, const index_range&) = default;
};

// The block of `n` elements owned by the i-th of `parts` owners: n / parts
// elements each, one more for the first n % parts owners, so sizes differ by
// at most one and the blocks tile [0, n) in owner order. parts must be >= 1,
// i < parts.
index_range block_of(std::uint64_t n, std::uint64_t parts, std::uint64_t i) noexcept;

// One piece of data that changes process: elements `range` move from the
// process `from` to the process `to` (ranks in the communicator spanning old
// and new owners).
struct transfer {
  int from = 0;
  int to = 0;
  index_range range;
  friend bool operator==(const transfer&, const transfer&) = default;
};

// The transfers that take an array of n elements from a block distribution
// over `old_owners` (processes, in block order) to one over `new_owners`.
// Overlaps between an old and a new block of the same process stay where they
// are and produce no transfer: only ranges that change owner move. Either
// list may be empty only if n == 0 (nothing to hold and nothing to move).
// Transfers come sorted by (from, range.begin). Throws std::invalid_argument
// if n > 0 and a list is empty, or a process appears twice in one list.
std::vector<transfer> plan_redistribution(std::uint64_t n, const std::vector<int>& old_owners,
                                          const std::vector<int>& new_owners);

}  // namespace aqs::runtime
