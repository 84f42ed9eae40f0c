// Redistribution under real MPI: random sequences of active-rank sets over
// MPI_COMM_WORLD (1..W ranks, any order) with arrays of awkward lengths and
// element sizes; after every step every element must sit where it belongs.
// Run by ctest as `mpirun -np 8`; prints "N passed, N failed" on rank 0.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "block_plan.hpp"
#include "redistribute.hpp"

using namespace aqs::runtime;

namespace {

// The byte every array element g must hold at offset k.
std::byte expected_byte(unsigned array_id, std::uint64_t g, std::size_t k) {
  std::uint64_t x = (g + 1) * 0x9E3779B97F4A7C15ull ^ (k + 1) * 0xC2B2AE3D27D4EB4Full ^ array_id;
  x ^= x >> 29;
  return static_cast<std::byte>(x & 0xff);
}

std::vector<std::byte> fill_block(unsigned id, std::uint64_t n, std::size_t esz, std::size_t parts, int index) {
  if (index < 0) return {};
  index_range r = block_of(n, parts, static_cast<std::uint64_t>(index));
  std::vector<std::byte> b(r.size() * esz);
  for (std::uint64_t g = r.begin; g < r.end; ++g) {
    for (std::size_t k = 0; k < esz; ++k) b[(g - r.begin) * esz + k] = expected_byte(id, g, k);
  }
  return b;
}

int index_of(const std::vector<int>& v, int x) {
  auto it = std::find(v.begin(), v.end(), x);
  return it == v.end() ? -1 : static_cast<int>(it - v.begin());
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  // Every rank draws the same sequence: the owner sets must agree.
  std::mt19937_64 rng(argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 7);
  const std::uint64_t lengths[] = {0, 1, 2, 3, 5, 7, 8, 9, 63, 64, 65, 127, 1000, 4099, 65537};
  const std::size_t elem_sizes[] = {1, 3, 8, 24, 1000};
  long passed = 0, failed = 0;

  for (unsigned seq = 0; seq < 60; ++seq) {
    const std::uint64_t n = seq < 15 ? lengths[seq] : (rng() % 3 == 0 ? rng() % 10 : rng() % 200000);
    const std::size_t esz = elem_sizes[rng() % 5];
    const std::uint64_t n_eff = esz >= 1000 ? n % 5000 : n;  // keep big elements small in count
    std::vector<int> owners(static_cast<std::size_t>(world));
    std::iota(owners.begin(), owners.end(), 0);
    owners.resize(1 + rng() % static_cast<std::uint64_t>(world));
    std::vector<std::byte> mine = fill_block(seq, n_eff, esz, owners.size(), index_of(owners, me));
    for (int step = 0; step < 12; ++step) {
      std::vector<int> next(static_cast<std::size_t>(world));
      std::iota(next.begin(), next.end(), 0);
      std::shuffle(next.begin(), next.end(), rng);
      next.resize(1 + rng() % static_cast<std::uint64_t>(world));
      if (step % 4 == 0) std::sort(next.begin(), next.end());  // the common case: rank order
      mine = redistribute_blocks(MPI_COMM_WORLD, n_eff, esz, owners, next, mine);
      owners = next;
      const int ni = index_of(owners, me);
      bool ok = mine == fill_block(seq, n_eff, esz, owners.size(), ni);
      if (!ok) {
        std::fprintf(stderr, "rank %d: array %u (n=%llu, elem %zu bytes) wrong after step %d\n", me, seq,
                     static_cast<unsigned long long>(n_eff), esz, step);
      }
      int local_fail = ok ? 0 : 1, any_fail = 0;
      MPI_Allreduce(&local_fail, &any_fail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      (any_fail ? failed : passed) += 1;
    }
  }

  // Packed state: each old owner addresses a blob of a pseudo-random size to
  // each new owner; every new owner must receive exactly those blobs.
  for (int step = 0; step < 100; ++step) {
    std::vector<int> old_o(static_cast<std::size_t>(world)), new_o(static_cast<std::size_t>(world));
    std::iota(old_o.begin(), old_o.end(), 0);
    std::iota(new_o.begin(), new_o.end(), 0);
    std::shuffle(old_o.begin(), old_o.end(), rng);
    std::shuffle(new_o.begin(), new_o.end(), rng);
    old_o.resize(1 + rng() % static_cast<std::uint64_t>(world));
    new_o.resize(1 + rng() % static_cast<std::uint64_t>(world));
    auto blob = [&](int from, int to) {
      std::size_t len = static_cast<std::size_t>((from * 7919 + to * 104729 + step * 31) % 3001);
      std::vector<std::byte> b(len);
      for (std::size_t k = 0; k < len; ++k) b[k] = expected_byte(static_cast<unsigned>(step), static_cast<std::uint64_t>(from * 64 + to), k);
      return b;
    };
    std::vector<std::vector<std::byte>> out;
    if (index_of(old_o, me) >= 0) {
      for (int to : new_o) out.push_back(blob(me, to));
    }
    auto in = exchange_blobs(MPI_COMM_WORLD, old_o, new_o, std::move(out));
    bool ok = in.size() == (index_of(new_o, me) >= 0 ? old_o.size() : 0);
    for (std::size_t i = 0; ok && i < in.size(); ++i) ok = in[i] == blob(old_o[i], me);
    int local_fail = ok ? 0 : 1, any_fail = 0;
    MPI_Allreduce(&local_fail, &any_fail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    (any_fail ? failed : passed) += 1;
  }

  if (me == 0) std::printf("redistribution on %d ranks: %ld passed, %ld failed\n", world, passed, failed);
  MPI_Finalize();
  return failed == 0 ? 0 : 1;
}
