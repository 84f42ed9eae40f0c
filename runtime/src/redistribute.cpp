// redistribute: executes a block_plan with nonblocking point-to-point MPI.
#include "redistribute.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "block_plan.hpp"

namespace aqs::runtime {

void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(std::string(what) + " failed: " + std::string(msg, static_cast<std::size_t>(len)));
}

namespace {

// MPI counts are int: larger messages go in chunks, one tag per chunk.
constexpr std::size_t k_chunk_bytes = std::size_t{1} << 30;
constexpr int k_blob_size_tag = 0x5151;
constexpr int k_blob_tag_base = 0x5200;

void check(int rc, const char* what) { mpi_check(rc, what); }

int index_of(const std::vector<int>& owners, int rank) {
  auto it = std::find(owners.begin(), owners.end(), rank);
  return it == owners.end() ? -1 : static_cast<int>(it - owners.begin());
}

// Posts sends (or receives) of `bytes` at `buf` to/from `peer` in chunks.
void post_chunked(bool send, std::byte* buf, std::size_t bytes, int peer, int tag_base, MPI_Comm comm,
                  std::vector<MPI_Request>& reqs) {
  for (std::size_t off = 0, k = 0; off < bytes; off += k_chunk_bytes, ++k) {
    const int count = static_cast<int>(std::min(k_chunk_bytes, bytes - off));
    MPI_Request r;
    if (send) {
      check(MPI_Isend(buf + off, count, MPI_BYTE, peer, tag_base + static_cast<int>(k), comm, &r), "MPI_Isend");
    } else {
      check(MPI_Irecv(buf + off, count, MPI_BYTE, peer, tag_base + static_cast<int>(k), comm, &r), "MPI_Irecv");
    }
    reqs.push_back(r);
  }
}

void wait_all(std::vector<MPI_Request>& reqs) {
  if (reqs.empty()) return;
  check(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  reqs.clear();
}

}  // namespace

void redistribute_blocks_into(MPI_Comm comm, std::uint64_t n, std::size_t elem_size,
                              const std::vector<int>& old_owners, const std::vector<int>& new_owners,
                              std::span<const std::byte> old_block, std::span<std::byte> out) {
  int me = 0;
  check(MPI_Comm_rank(comm, &me), "MPI_Comm_rank");
  const std::vector<transfer> plan = plan_redistribution(n, old_owners, new_owners);
  const int oi = index_of(old_owners, me), ni = index_of(new_owners, me);
  const index_range old_range = oi < 0 ? index_range{} : block_of(n, old_owners.size(), static_cast<std::uint64_t>(oi));
  const index_range new_range = ni < 0 ? index_range{} : block_of(n, new_owners.size(), static_cast<std::uint64_t>(ni));
  if (old_block.size() != old_range.size() * elem_size) {
    throw std::invalid_argument("redistribution: this rank holds " + std::to_string(old_block.size()) +
                                " bytes but its old block is " + std::to_string(old_range.size() * elem_size));
  }
  if (out.size() != new_range.size() * elem_size) {
    throw std::invalid_argument("redistribution: this rank's new block is " +
                                std::to_string(new_range.size() * elem_size) + " bytes but " +
                                std::to_string(out.size()) + " were given");
  }
  // The part this process keeps is copied, never sent.
  const index_range keep{std::max(old_range.begin, new_range.begin), std::min(old_range.end, new_range.end)};
  if (!keep.empty()) {
    std::memcpy(out.data() + (keep.begin - new_range.begin) * elem_size,
                old_block.data() + (keep.begin - old_range.begin) * elem_size, keep.size() * elem_size);
  }
  std::vector<MPI_Request> reqs;
  for (const transfer& t : plan) {
    if (t.to == me) {
      post_chunked(false, out.data() + (t.range.begin - new_range.begin) * elem_size, t.range.size() * elem_size,
                   t.from, 0, comm, reqs);
    }
  }
  for (const transfer& t : plan) {
    if (t.from == me) {
      // MPI_Isend does not write to the buffer; the const_cast only fits the C API.
      auto* src = const_cast<std::byte*>(old_block.data()) + (t.range.begin - old_range.begin) * elem_size;
      post_chunked(true, src, t.range.size() * elem_size, t.to, 0, comm, reqs);
    }
  }
  wait_all(reqs);
}

std::vector<std::byte> redistribute_blocks(MPI_Comm comm, std::uint64_t n, std::size_t elem_size,
                                           const std::vector<int>& old_owners,
                                           const std::vector<int>& new_owners,
                                           std::span<const std::byte> old_block) {
  int me = 0;
  check(MPI_Comm_rank(comm, &me), "MPI_Comm_rank");
  const int ni = index_of(new_owners, me);
  const std::uint64_t size = ni < 0 ? 0 : block_of(n, new_owners.size(), static_cast<std::uint64_t>(ni)).size();
  std::vector<std::byte> out(size * elem_size);
  redistribute_blocks_into(comm, n, elem_size, old_owners, new_owners, old_block, out);
  return out;
}

std::vector<std::vector<std::byte>> exchange_blobs(MPI_Comm comm, const std::vector<int>& old_owners,
                                                   const std::vector<int>& new_owners,
                                                   std::vector<std::vector<std::byte>> outgoing) {
  int me = 0;
  check(MPI_Comm_rank(comm, &me), "MPI_Comm_rank");
  plan_redistribution(0, old_owners, new_owners);  // validates the lists
  const int oi = index_of(old_owners, me), ni = index_of(new_owners, me);
  if (oi >= 0 && outgoing.size() != new_owners.size()) {
    throw std::invalid_argument("redistribution: an old owner must pack one blob per new owner (" +
                                std::to_string(new_owners.size()) + "), got " + std::to_string(outgoing.size()));
  }
  std::vector<std::vector<std::byte>> incoming(ni >= 0 ? old_owners.size() : 0);
  // Round 1: sizes, so receivers can allocate.
  std::vector<std::uint64_t> in_sizes(incoming.size(), 0), out_sizes(oi >= 0 ? new_owners.size() : 0, 0);
  std::vector<MPI_Request> reqs;
  if (ni >= 0) {
    for (std::size_t i = 0; i < old_owners.size(); ++i) {
      if (old_owners[i] == me) continue;
      MPI_Request r;
      check(MPI_Irecv(&in_sizes[i], 1, MPI_UINT64_T, old_owners[i], k_blob_size_tag, comm, &r), "MPI_Irecv");
      reqs.push_back(r);
    }
  }
  if (oi >= 0) {
    for (std::size_t j = 0; j < new_owners.size(); ++j) {
      out_sizes[j] = outgoing[j].size();
      if (new_owners[j] == me) continue;
      MPI_Request r;
      check(MPI_Isend(&out_sizes[j], 1, MPI_UINT64_T, new_owners[j], k_blob_size_tag, comm, &r), "MPI_Isend");
      reqs.push_back(r);
    }
  }
  wait_all(reqs);
  // Round 2: the blobs themselves.
  for (std::size_t i = 0; i < incoming.size(); ++i) {
    if (old_owners[i] == me) {
      incoming[i] = std::move(outgoing[static_cast<std::size_t>(ni)]);
      continue;
    }
    incoming[i].resize(in_sizes[i]);
    post_chunked(false, incoming[i].data(), incoming[i].size(), old_owners[i], k_blob_tag_base, comm, reqs);
  }
  if (oi >= 0) {
    for (std::size_t j = 0; j < new_owners.size(); ++j) {
      if (new_owners[j] == me) continue;
      post_chunked(true, outgoing[j].data(), outgoing[j].size(), new_owners[j], k_blob_tag_base, comm, reqs);
    }
  }
  wait_all(reqs);
  return incoming;
}

}  // namespace aqs::runtime
