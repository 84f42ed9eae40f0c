// reconfigure_app: the adaptive MPI program bench_reconfigure runs under aqsd.
// It holds one block-distributed array of --mb-per-rank MiB per rank (at 8
// ranks), calls MPI_Migrate() every --pace-ms while otherwise idle (so that
// the measured changes are not slowed by computation on the shared cores),
// checks every element after each change of map, and first times
// --nochange-calls MPI_Migrate() calls that have no map to apply.
//
// Output (rank 0, one line each, for the benchmark to read):
//   nochange adaptive=0|1 ranks=R calls=N mean_us=X median_us=Y p90_us=Z
//   ready ranks=R                (in its loop, connected to aqsd)
//   map epoch=E ranks=R ok=0|1 pause_ms=P
//                                (P: the longest time a rank that was
//                                running spent in the MPI_Migrate() that
//                                brought the map: the pause the app saw)
//                                other_ms=O (the longest of the other
//                                MPI_Migrate() calls since the previous
//                                map, on any rank: how much a load on the
//                                machine or a background spawn slowed it)
//   done maps=M
// Stops when --stop-file exists (checked by rank 0 at every iteration).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <aqs/adaptive.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int k_reference_ranks = 8;  // --mb-per-rank counts MiB per rank at this many ranks

struct options {
  double mb_per_rank = 10;
  long nochange_calls = 20000;
  long pace_ms = 5;
  std::string stop_file;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "reconfigure_app: %s\nusage: reconfigure_app [--mb-per-rank M] [--nochange-calls N] [--pace-ms D] "
               "--stop-file F\n",
               why);
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    char* end = nullptr;
    if (a == "--mb-per-rank") {
      o.mb_per_rank = std::strtod(v, &end);
      if (*end != '\0' || !(o.mb_per_rank > 0)) usage("--mb-per-rank must be a positive number");
    } else if (a == "--nochange-calls" || a == "--pace-ms") {
      const long n = std::strtol(v, &end, 10);
      if (*end != '\0' || n < 0) usage((a + " must be a non-negative integer").c_str());
      (a == "--pace-ms" ? o.pace_ms : o.nochange_calls) = n;
    } else if (a == "--stop-file") {
      o.stop_file = v;
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  if (o.stop_file.empty()) usage("--stop-file is required");
  return o;
}

// What element i holds: a function of its global index alone, so any rank
// can check any block after any change.
std::uint64_t expected(std::uint64_t i) { return i * 0x9E3779B97F4A7C15ull + 1; }

void check(int rc, const char* what) {
  if (rc != AQS_SUCCESS && rc != MPI_SUCCESS) {
    std::fprintf(stderr, "reconfigure_app: %s failed: %s\n", what, AQS_Error_string());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

// Times `calls` back-to-back no-change MPI_Migrate() calls on every rank and
// reports the slowest rank's figures (a broadcast returns early at its root).
void time_nochange(long calls) {
  MPI_Comm comm = AQS_Comm();
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<double> each(static_cast<std::size_t>(calls));
  const std::int64_t epoch = AQS_Epoch();
  MPI_Barrier(comm);
  const auto t0 = std::chrono::steady_clock::now();
  for (long c = 0; c < calls; ++c) {
    const auto a = std::chrono::steady_clock::now();
    check(MPI_Migrate(), "MPI_Migrate");
    each[static_cast<std::size_t>(c)] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
  }
  const double mean = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                      static_cast<double>(std::max(1L, calls));
  // A map that arrived meanwhile was applied: then these were not all no-change calls.
  int changed = AQS_Epoch() != epoch ? 1 : 0;
  comm = AQS_Comm();
  std::sort(each.begin(), each.end());
  double mine[3] = {mean, each.empty() ? 0 : each[each.size() / 2], each.empty() ? 0 : each[each.size() * 9 / 10]};
  double worst[3] = {};
  MPI_Allreduce(mine, worst, 3, MPI_DOUBLE, MPI_MAX, comm);
  MPI_Allreduce(MPI_IN_PLACE, &changed, 1, MPI_INT, MPI_MAX, comm);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (rank == 0) {
    std::printf("nochange adaptive=%d ranks=%d calls=%ld mean_us=%.3f median_us=%.3f p90_us=%.3f%s\n", AQS_Adaptive(), size, calls, worst[0],
                worst[1], worst[2], changed ? " (a map arrived during the measurement)" : "");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  // MPI_THREAD_MULTIPLE: an expansion's new ranks are started in the
  // background (unless $AQS_BACKGROUND_SPAWN=0).
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  check(AQS_Init(), "AQS_Init");
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const auto n = static_cast<std::uint64_t>(o.mb_per_rank * 1024 * 1024 * k_reference_ranks / sizeof(std::uint64_t));
  AQS_Array array = nullptr;
  check(AQS_Array_create(n, sizeof(std::uint64_t), 0, &array), "AQS_Array_create");
  // The iteration counter, so that ranks an expansion starts know where the
  // others are (they begin at main() and learn it at their first MPI_Migrate).
  struct {
    std::int64_t iter = 0;
    std::int64_t maps = 0;  // changes of map seen
  } progress;
  check(AQS_Register_replicated(&progress, sizeof progress), "AQS_Register_replicated");
  std::int64_t& iter = progress.iter;
  {
    void* data = nullptr;
    std::uint64_t b = 0, e = 0;
    check(AQS_Array_local(array, &data, &b, &e), "AQS_Array_local");
    auto* x = static_cast<std::uint64_t*>(data);
    for (std::uint64_t i = b; i < e; ++i) x[i - b] = expected(i);
  }
  std::int64_t seen_epoch = -1;
  MPI_Comm parent = MPI_COMM_NULL;
  MPI_Comm_get_parent(&parent);
  bool spawned_first = parent != MPI_COMM_NULL;  // a new rank's first MPI_Migrate() is its join
  double slowest_other_ms = 0;
  for (;;) {
    // The pause counts only on ranks that were running on the map before
    // this one: a new rank's first call and a parked rank's call back (it
    // began at an older map) are not the application waiting.
    const std::int64_t epoch_before = AQS_Epoch();
    const auto call = std::chrono::steady_clock::now();
    check(MPI_Migrate(), "MPI_Migrate");
    double pause_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - call).count();
    if (AQS_Epoch() == epoch_before && !spawned_first) slowest_other_ms = std::max(slowest_other_ms, pause_ms);
    MPI_Comm comm = AQS_Comm();
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (iter == 0) {
      seen_epoch = AQS_Epoch();
      if (o.nochange_calls > 0) time_nochange(o.nochange_calls);
      comm = AQS_Comm();
      MPI_Comm_rank(comm, &rank);
      MPI_Comm_size(comm, &size);
      if (rank == 0) std::printf("ready ranks=%d\n", size);
    } else if (AQS_Epoch() != seen_epoch) {
      // A new map (on a rank the expansion started, its first): check the block.
      seen_epoch = AQS_Epoch();
      void* data = nullptr;
      std::uint64_t b = 0, e = 0;
      check(AQS_Array_local(array, &data, &b, &e), "AQS_Array_local");
      const auto* x = static_cast<const std::uint64_t*>(data);
      int ok = 1;
      for (std::uint64_t i = b; i < e && ok; ++i) ok = x[i - b] == expected(i);
      std::uint64_t held = e - b, total = 0;
      MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
      std::int64_t latest = epoch_before;
      MPI_Allreduce(MPI_IN_PLACE, &latest, 1, MPI_INT64_T, MPI_MAX, comm);
      if (epoch_before != latest || spawned_first) pause_ms = 0;
      MPI_Allreduce(MPI_IN_PLACE, &pause_ms, 1, MPI_DOUBLE, MPI_MAX, comm);
      MPI_Allreduce(MPI_IN_PLACE, &slowest_other_ms, 1, MPI_DOUBLE, MPI_MAX, comm);
      MPI_Allreduce(&held, &total, 1, MPI_UINT64_T, MPI_SUM, comm);
      ok = ok && total == n;
      ++progress.maps;
      if (rank == 0) {
        std::printf("map epoch=%lld ranks=%d ok=%d pause_ms=%.3f other_ms=%.3f\n", static_cast<long long>(seen_epoch),
                    size, ok, pause_ms, slowest_other_ms);
      }
      slowest_other_ms = 0;
    }
    spawned_first = false;
    ++iter;
    int stop = 0;
    if (rank == 0) stop = ::access(o.stop_file.c_str(), F_OK) == 0 ? 1 : 0;
    MPI_Bcast(&stop, 1, MPI_INT, 0, comm);
    if (stop) {
      if (rank == 0) std::printf("done maps=%lld\n", static_cast<long long>(progress.maps));
      break;
    }
    if (o.pace_ms > 0) ::usleep(static_cast<useconds_t>(o.pace_ms * 1000));
  }
  check(AQS_Array_free(&array), "AQS_Array_free");
  check(AQS_Finalize(), "AQS_Finalize");
  MPI_Finalize();
  return 0;
}
