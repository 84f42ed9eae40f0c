// jacobi2d: adaptive 2-D heat diffusion, Jacobi iteration with a 5-point
// stencil, for the AQS runtime shim (aqs/adaptive.h).
//
// The grid (rows x cols doubles, boundary included) is an AQS 2-D array
// distributed by rows with one ghost row on each side. Boundary conditions are
// fixed: the top row holds 100.0, the other edges 0.0. Each iteration every
// interior cell becomes the mean of its four neighbours, computed in one fixed
// order from the previous iterate only, so the result is bit-identical whatever
// the number of ranks and however it changed along the way.
//
// The life of the program follows aqs/adaptive.h: MPI_Migrate() first thing in
// the loop, AQS_Comm() and AQS_Array_local() asked again after it (the
// communicator and the local block may have changed), the iteration counter in
// replicated state so that a rank added by an expansion, which starts from
// main() again, learns where the others are at its first MPI_Migrate().
//
// It publishes its residual and its rank count (AQS_Publish) for the job's
// live chart in aqsd's dashboard: convergence, and every resize.
//
// Usage: jacobi2d [--rows R] [--cols C] [--iters N] [--migrate-every K]
//                 [--pace-ms D] [--work-ms W] [--out FILE] [--checksum]
//                 [--publish-every P]
#include "example.hpp"  // first (see there): failing, the safe point, options, --out/--checksum

#include <aqs/adaptive.h>

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <chrono>
#include <string_view>
#include <vector>

namespace {

using example::check;
using example::migrate;
using example::parse_int;

constexpr const char* kUsage =
    "usage: jacobi2d [--rows R] [--cols C] [--iters N] [--migrate-every K] [--pace-ms D] [--work-ms W]\n"
    "                [--out FILE] [--checksum] [--publish-every P]\n"
    "                [--ask ITER:MIN:MAX]...\n"
    "  --rows R           grid rows, boundary included (default 2048, at least 3)\n"
    "  --cols C           grid columns, boundary included (default 2048, at least 3)\n"
    "  --iters N          Jacobi iterations (default 500)\n"
    "  --migrate-every K  call MPI_Migrate() at the top of every K-th iteration (default 1)\n"
    "  --pace-ms D        sleep D ms per iteration, standing in for a bigger grid (default 0)\n"
    "  --work-ms W        every rank sleeps W ms x ceil(R / ranks) / R per iteration: W ms of\n"
    "                     processor time per iteration, divided among the ranks (default 0)\n"
    "  --ask ITER:MIN:MAX at iteration ITER ask the scheduler for MIN..MAX processors (repeatable)\n"
    "  --publish-every P  publish the residual (the largest change of a sweep) every P iterations\n"
    "                     for the job's live chart, and the rank count at every change (AQS_Publish;\n"
    "                     default 20, 0: never)\n"
    "  --out FILE         rank 0 writes the final grid there: rows*cols raw doubles, row-major\n"
    "  --checksum         print 'checksum <hex>', the 64-bit FNV-1a hash of those bytes\n";

constexpr double kTop = 100.0;  // the top edge; the other edges are 0.0

struct Options {
  uint64_t rows = 2048;
  uint64_t cols = 2048;
  int64_t iters = 500;
  int64_t migrate_every = 1;
  int64_t pace_ms = 0;
  int64_t work_ms = 0;
  int64_t publish_every = 20;
  std::string out;
  bool checksum = false;
  bool help = false;
  // --ask ITER:MIN:MAX (repeatable): at iteration ITER the job asks aqsd for
  // MIN..MAX processors (AQS_Request_range): more for an expensive phase,
  // its old range back after it.
  struct ask {
    int64_t iter;
    int min, max;
  };
  std::vector<ask> asks;
};

// Fills `o`; on a bad command line returns false with a one-line reason.
bool parse_options(int argc, char** argv, Options& o, std::string& err) {
  for (int i = 1; i < argc; ++i) {
    example::Option arg;
    if (!example::read_option(argc, argv, i, {"-h", "--help", "--checksum"},
                              {"--rows", "--cols", "--iters", "--migrate-every", "--out", "--pace-ms", "--work-ms", "--ask", "--publish-every"}, arg,
                              err)) {
      return false;
    }
    const std::string_view name = arg.name, value = arg.value;
    if (name == "-h" || name == "--help") {
      o.help = true;
      continue;
    }
    if (name == "--checksum") {
      o.checksum = true;
      continue;
    }
    if (name == "--out") {
      if (value.empty()) {
        err = "--out needs a file name";
        return false;
      }
      o.out = value;
      continue;
    }
    int64_t v = 0;
    // A row is sent as `cols` doubles in one MPI message: keep it an int.
    if (name == "--rows" || name == "--cols") {
      if (!parse_int(value, 3, name == "--cols" ? INT_MAX : INT64_MAX, v)) {
        err = "bad value '" + std::string(value) + "' for " + std::string(name) + " (an integer >= 3)";
        return false;
      }
      (name == "--rows" ? o.rows : o.cols) = static_cast<uint64_t>(v);
    } else if (name == "--ask") {
      // ITER:MIN:MAX
      const std::string text(value);
      const auto c1 = text.find(':'), c2 = text.rfind(':');
      int64_t at = 0, lo = 0, hi = 0;
      if (c1 == std::string::npos || c1 == c2 || !parse_int(text.substr(0, c1), 0, INT64_MAX, at) ||
          !parse_int(text.substr(c1 + 1, c2 - c1 - 1), 1, 1 << 20, lo) || !parse_int(text.substr(c2 + 1), lo, 1 << 20, hi)) {
        err = "bad value '" + text + "' for --ask (ITER:MIN:MAX, 1 <= MIN <= MAX)";
        return false;
      }
      o.asks.push_back({at, static_cast<int>(lo), static_cast<int>(hi)});
    } else if (name == "--publish-every") {
      if (!parse_int(value, 0, INT64_MAX, v)) {
        err = "bad value '" + std::string(value) + "' for --publish-every (an integer >= 0)";
        return false;
      }
      o.publish_every = v;
    } else if (name == "--pace-ms" || name == "--work-ms") {
      if (!parse_int(value, 0, 3600 * 1000, v)) {
        err = "bad value '" + std::string(value) + "' for " + std::string(name) + " (an integer >= 0)";
        return false;
      }
      (name == "--pace-ms" ? o.pace_ms : o.work_ms) = v;
    } else {
      if (!parse_int(value, name == "--iters" ? 0 : 1, INT64_MAX, v)) {
        err = "bad value '" + std::string(value) + "' for " + std::string(name) +
              (name == "--iters" ? " (an integer >= 0)" : " (an integer >= 1)");
        return false;
      }
      (name == "--iters" ? o.iters : o.migrate_every) = v;
    }
  }
  if (o.rows > UINT64_MAX / o.cols / sizeof(double)) {
    err = "grid too large";
    return false;
  }
  return true;
}

struct Local {
  double* u = nullptr;  // first local row; ghost rows at u - cols and u + n*cols
  uint64_t begin = 0, end = 0;
  size_t n() const { return static_cast<size_t>(end - begin); }
};

Local local_block(AQS_Array grid) {
  void* p = nullptr;
  Local l;
  check(AQS_Array_local(grid, &p, &l.begin, &l.end), "AQS_Array_local");
  l.u = static_cast<double*>(p);
  return l;
}

// The initial condition: top row kTop, everything else 0.
void initialize(const Local& l, size_t cols) {
  for (size_t i = 0; i < l.n(); ++i) std::fill_n(l.u + i * cols, cols, l.begin + i == 0 ? kTop : 0.0);
}

// Fills the ghost rows from the neighbouring ranks. Rank i holds the rows right
// after rank i-1's, and empty ranks (more ranks than rows) come last, so the
// neighbours of a non-empty block are rank-1 and rank+1 whenever the grid goes
// on past the block.
void exchange_halo(const Local& l, size_t cols, uint64_t rows, MPI_Comm comm, int rank) {
  if (l.n() == 0) return;
  int up = l.begin > 0 ? rank - 1 : MPI_PROC_NULL;
  int down = l.end < rows ? rank + 1 : MPI_PROC_NULL;
  int count = static_cast<int>(cols);
  double* first = l.u;
  double* last = l.u + (l.n() - 1) * cols;
  double* ghost_above = l.u - cols;
  double* ghost_below = l.u + l.n() * cols;
  MPI_Sendrecv(first, count, MPI_DOUBLE, up, 1, ghost_below, count, MPI_DOUBLE, down, 1, comm, MPI_STATUS_IGNORE);
  MPI_Sendrecv(last, count, MPI_DOUBLE, down, 2, ghost_above, count, MPI_DOUBLE, up, 2, comm, MPI_STATUS_IGNORE);
}

// One Jacobi sweep of the local block into `next`; returns the largest change.
double sweep(const Local& l, size_t cols, uint64_t rows, std::vector<double>& next) {
  double delta = 0.0;
  for (size_t i = 0; i < l.n(); ++i) {
    const double* c = l.u + i * cols;
    double* nx = next.data() + i * cols;
    uint64_t g = l.begin + i;
    if (g == 0 || g == rows - 1) {
      std::copy_n(c, cols, nx);
      continue;
    }
    const double* above = c - cols;
    const double* below = c + cols;
    nx[0] = c[0];
    nx[cols - 1] = c[cols - 1];
    // One fixed order of operations for every cell (and no multiply-add to
    // fuse), so that no decomposition can change a bit of the result.
    for (size_t j = 1; j + 1 < cols; ++j) {
      nx[j] = 0.25 * ((above[j] + below[j]) + (c[j - 1] + c[j + 1]));
      delta = std::max(delta, std::fabs(nx[j] - c[j]));
    }
  }
  return delta;
}

// Rank 0 receives every block in rank order (= global row order), hashes it
// and writes it to `path` (if not empty). Returns false on rank 0 if the file
// could not be written (after receiving everything, so no rank is left
// blocked).
bool gather_output(const Local& l, size_t cols, MPI_Comm comm, int rank, int size, const std::string& path,
                   uint64_t& hash) {
  MPI_Datatype row;
  MPI_Type_contiguous(static_cast<int>(cols), MPI_DOUBLE, &row);
  MPI_Type_commit(&row);
  bool ok = true;
  if (rank != 0) {
    MPI_Send(l.u, static_cast<int>(l.n()), row, 0, 3, comm);
  } else {
    example::RawOutput out(path);
    std::vector<double> buf;
    for (int r = 0; r < size; ++r) {
      const double* data = l.u;
      size_t n = l.n();
      if (r > 0) {
        MPI_Status st;
        int count = 0;
        MPI_Probe(r, 3, comm, &st);
        MPI_Get_count(&st, row, &count);
        buf.resize(static_cast<size_t>(count) * cols);
        MPI_Recv(buf.data(), count, row, r, 3, comm, MPI_STATUS_IGNORE);
        data = buf.data();
        n = static_cast<size_t>(count);
      }
      out.add(data, n * cols * sizeof(double));
    }
    ok = out.finish();
    hash = out.hash();
  }
  MPI_Type_free(&row);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  example::program_name = "jacobi2d";
  // MPI_THREAD_MULTIPLE lets the runtime start an expansion's new ranks in
  // the background while this program computes (docs/user-guide.md).
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);

  Options opt;
  std::string err;
  if (!parse_options(argc, argv, opt, err) || opt.help) return example::end_at_command_line(kUsage, err);
  const size_t cols = opt.cols;

  check(AQS_Init(), "AQS_Init");
  // Registered state: the grid and the iteration counter. A rank added by an
  // expansion gets both at its first MPI_Migrate().
  AQS_Array grid = nullptr;
  check(AQS_Array2d_create(opt.rows, opt.cols, sizeof(double), 1, &grid), "AQS_Array2d_create");
  int64_t iter = 0;
  check(AQS_Register_replicated(&iter, sizeof iter), "AQS_Register_replicated");

  const int64_t report_every = std::max<int64_t>(1, opt.iters / 10);
  std::vector<double> next;  // scratch for the new iterate, never moved
  double start = MPI_Wtime();
  int rank = 0, size = 1;
  MPI_Comm comm = MPI_COMM_NULL;
  int published_size = 0;  // the rank count last published (live chart)

  while (iter < opt.iters) {
    for (const auto& a : opt.asks) {
      if (a.iter != iter || !AQS_Adaptive()) continue;
      check(AQS_Request_range(a.min, a.max), "AQS_Request_range");
      int st = AQS_RANGE_NONE;
      AQS_Range_status(&st, nullptr);
      if (st != AQS_RANGE_NONE) std::printf("iter %" PRId64 ": asked for %d-%d processors\n", iter, a.min, a.max);
    }
    if (iter % opt.migrate_every == 0) migrate();
    comm = AQS_Comm();
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (opt.publish_every > 0 && size != published_size) {
      // Every resize shows on the job's chart (the rank that speaks for the
      // job sends it; the others' calls only return).
      (void)AQS_Publish("ranks", size);  // a lost connection loses a point, not the run
      published_size = size;
    }
    Local l = local_block(grid);

    // Here, after the first MPI_Migrate(), all ranks (any added at iteration 0
    // included) set the initial condition together.
    if (iter == 0) initialize(l, cols);

    exchange_halo(l, cols, opt.rows, comm, rank);
    next.resize(l.n() * cols);
    double delta = sweep(l, cols, opt.rows, next);
    std::copy(next.begin(), next.end(), l.u);
    if (opt.pace_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(opt.pace_ms));
    // Standing in for a compute-bound sweep, whose time the largest block
    // (ceil(rows / ranks) rows) sets: every rank sleeps that long, so that
    // they reach the next halo exchange together instead of spinning in MPI
    // for the slowest; the job speeds up (nearly) linearly with its ranks.
    if (opt.work_ms > 0) {
      const uint64_t largest = (opt.rows + static_cast<uint64_t>(size) - 1) / static_cast<uint64_t>(size);
      const double us = static_cast<double>(opt.work_ms) * 1000.0 * static_cast<double>(largest) /
                        static_cast<double>(opt.rows);
      std::this_thread::sleep_for(std::chrono::microseconds(std::llround(us)));
    }
    ++iter;

    const bool report = iter % report_every == 0 || iter == opt.iters;
    const bool publish = opt.publish_every > 0 && iter % opt.publish_every == 0;
    if (report || publish) {
      // Progress only: the max is exact whatever the reduction order.
      MPI_Allreduce(MPI_IN_PLACE, &delta, 1, MPI_DOUBLE, MPI_MAX, comm);
      if (publish) (void)AQS_Publish("residual", delta);
    }
    if (report) {
      if (rank == 0)
        std::printf("iter %" PRId64 "/%" PRId64 " ranks %d epoch %" PRId64 " max_change %.6e\n", iter, opt.iters,
                    size, AQS_Epoch(), delta);
      std::fflush(stdout);
    }
  }

  if (comm == MPI_COMM_NULL) {  // --iters 0: never entered the loop
    migrate();
    comm = AQS_Comm();
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    initialize(local_block(grid), cols);
  }
  double elapsed = MPI_Wtime() - start;

  int status = 0;
  if (opt.checksum || !opt.out.empty()) {
    uint64_t hash = 0;
    if (!gather_output(local_block(grid), cols, comm, rank, size, opt.out, hash)) status = 1;
    if (rank == 0 && opt.checksum) std::printf("checksum %016" PRIx64 "\n", hash);
  }
  if (rank == 0) {
    std::printf("done rows %" PRIu64 " cols %" PRIu64 " iters %" PRId64 " ranks %d time %.3f s\n", opt.rows, opt.cols,
                opt.iters, size, elapsed);
    std::fflush(stdout);
  }

  check(AQS_Array_free(&grid), "AQS_Array_free");
  check(AQS_Finalize(), "AQS_Finalize");
  MPI_Finalize();
  return status;
}
