// redistribute: moves block-distributed arrays and packed state between the
// old and the new set of active ranks (MPI point-to-point, plan-driven).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <mpi.h>

namespace aqs::runtime {

// Throws std::runtime_error "WHAT failed: <MPI's message>" unless rc is
// MPI_SUCCESS.
void mpi_check(int rc, const char* what);

// Moves this process's share of a block-distributed array of n elements of
// elem_size bytes from the block distribution over old_owners to the one over
// new_owners (ranks of `comm`, which spans every old and new owner; processes
// of comm in neither list just take part in nothing). Collective only over
// the processes that exchange data: every process of comm must call it with
// the same n, elem_size and lists.
//   old_block: this process's old block (empty if not an old owner); its size
//   must be exactly the block's size in bytes.
//   Returns this process's new block (empty if not a new owner).
// Throws std::invalid_argument on a wrong old_block size or bad lists;
// std::runtime_error naming the MPI call if MPI reports an error.
std::vector<std::byte> redistribute_blocks(MPI_Comm comm, std::uint64_t n, std::size_t elem_size,
                                           const std::vector<int>& old_owners,
                                           const std::vector<int>& new_owners,
                                           std::span<const std::byte> old_block);

// The same, writing this process's new block straight into `new_block`
// (exactly its size in bytes; empty if not a new owner): no second copy when
// the caller's storage has room around the block. Also throws
// std::invalid_argument on a wrong new_block size.
void redistribute_blocks_into(MPI_Comm comm, std::uint64_t n, std::size_t elem_size,
                              const std::vector<int>& old_owners, const std::vector<int>& new_owners,
                              std::span<const std::byte> old_block, std::span<std::byte> new_block);

// Arbitrary state: every old owner packs one blob per new owner (outgoing[j]
// is for new_owners[j]; empty vector if this process is no old owner), and
// every new owner receives the blobs addressed to it, indexed like
// old_owners. A blob a process addresses to itself is moved, not sent.
// Same calling rules and errors as redistribute_blocks.
std::vector<std::vector<std::byte>> exchange_blobs(MPI_Comm comm, const std::vector<int>& old_owners,
                                                   const std::vector<int>& new_owners,
                                                   std::vector<std::vector<std::byte>> outgoing);

}  // namespace aqs::runtime
