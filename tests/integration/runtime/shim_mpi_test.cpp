// The shim under real OpenMPI, driven by scripted maps ($AQS_TEST_MAPS): the
// job grows with MPI_Comm_spawn, shrinks (dropped ranks park), moves between
// processors, and after every MPI_Migrate() every element of every
// registered array, every packed item and the replicated counter must be
// where it belongs, with values the computation changed along the way.
// With $AQS_CPUS_PER_TASK=C each rank holds C processors: every rank must be
// pinned to C cpus, and with SIZES (the ranks expected after each
// MPI_Migrate(), comma-separated) the job must have exactly those ranks.
// Usage: mpirun -np N shim_mpi_test ITERATIONS [SIZES]  (exit 0 = passed)
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sched.h>
#include <unistd.h>
#include <string>
#include <vector>

#include "aqs/adaptive.h"

namespace {

constexpr std::uint64_t k_n = 1001;   // 1-D array of uint64
constexpr std::uint64_t k_rows = 37;  // 2-D array of doubles, by rows
constexpr std::uint64_t k_cols = 5;
constexpr int k_items = 500;          // packed state: item ids owned in blocks

struct items {
  std::vector<int> ids;
  int released = 0;
};

void pack(void* user, int to, int nto, AQS_Buffer out) {
  auto* it = static_cast<items*>(user);
  const int lo = k_items / nto * to + std::min(to, k_items % nto);
  const int hi = lo + k_items / nto + (to < k_items % nto ? 1 : 0);
  for (int id : it->ids) {
    if (id >= lo && id < hi) AQS_Buffer_append(out, &id, sizeof id);
  }
}
void unpack(void* user, int from, int, const void* data, size_t len) {
  auto* it = static_cast<items*>(user);
  if (from == 0) it->ids.clear();  // everything was packed: rebuild from the buffers
  const int* p = static_cast<const int*>(data);
  it->ids.insert(it->ids.end(), p, p + len / sizeof(int));
}
void release(void* user) { std::vector<int>().swap(static_cast<items*>(user)->ids); }

// Live processes running this same executable (zombies excluded).
int processes_of_this_program() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code ec2;
    if (fs::read_symlink(e.path() / "exe", ec2) != self || ec2) continue;
    std::ifstream stat(e.path() / "stat");
    std::string pid, comm, state;
    stat >> pid >> comm >> state;
    if (state != "Z") ++n;
  }
  return n;
}

int failures = 0;
void expect(bool ok, const char* what, long long a, long long b) {
  if (!ok) {
    ++failures;
    if (failures < 20) std::fprintf(stderr, "shim_mpi_test: %s (%lld vs %lld)\n", what, a, b);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const long iterations = argc > 1 ? std::atol(argv[1]) : 12;
  std::vector<int> sizes;  // expected ranks per iteration
  for (const char* p = argc > 2 ? argv[2] : ""; *p != '\0';) {
    char* end = nullptr;
    sizes.push_back(static_cast<int>(std::strtol(p, &end, 10)));
    p = *end == ',' ? end + 1 : end;
  }
  const char* c_text = std::getenv("AQS_CPUS_PER_TASK");
  const int per_rank = c_text != nullptr && *c_text != '\0' ? std::atoi(c_text) : 1;
  // Processor p guesses cpu p % online cpus: C consecutive ones are this many cpus.
  const int cpus_per_rank = std::min(per_rank, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  if (AQS_Init() != AQS_SUCCESS) {
    std::fprintf(stderr, "AQS_Init: %s\n", AQS_Error_string());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  AQS_Array a1 = nullptr, a2 = nullptr;
  AQS_Array_create(k_n, sizeof(std::uint64_t), 1, &a1);
  AQS_Array2d_create(k_rows, k_cols, sizeof(double), 1, &a2);
  items mine;
  AQS_Register_state(pack, unpack, release, &mine, nullptr);
  long iter = 0;
  AQS_Register_replicated(&iter, sizeof iter);

  // Initial values (a new rank's registrations are empty: data comes at its
  // first MPI_Migrate).
  {
    void* d = nullptr;
    std::uint64_t b = 0, e = 0;
    AQS_Array_local(a1, &d, &b, &e);
    for (std::uint64_t g = b; g < e; ++g) static_cast<std::uint64_t*>(d)[g - b] = g * 3 + 7;
    AQS_Array_local(a2, &d, &b, &e);
    for (std::uint64_t r = b; r < e; ++r) {
      for (std::uint64_t c = 0; c < k_cols; ++c) static_cast<double*>(d)[(r - b) * k_cols + c] = double(r * 100 + c);
    }
    MPI_Comm parent = MPI_COMM_NULL;
    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) {  // a first rank, not one an expansion started
      int rank = 0, size = 1;
      MPI_Comm_rank(AQS_Comm(), &rank);
      MPI_Comm_size(AQS_Comm(), &size);
      const int lo = k_items / size * rank + std::min(rank, k_items % size);
      const int hi = lo + k_items / size + (rank < k_items % size ? 1 : 0);
      for (int id = lo; id < hi; ++id) mine.ids.push_back(id);
    }
  }

  long checks = 0;
  for (; iter < iterations; ++iter) {
    const int rc = MPI_Migrate();
    if (rc != AQS_SUCCESS && rc != AQS_ERR_SPAWN) {
      std::fprintf(stderr, "MPI_Migrate: %s\n", AQS_Error_string());
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Comm comm = AQS_Comm();
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    long it0 = iter;
    MPI_Bcast(&it0, 1, MPI_LONG, 0, comm);
    expect(it0 == iter, "replicated counter differs from rank 0's", iter, it0);

    void* d = nullptr;
    std::uint64_t b = 0, e = 0;
    AQS_Array_local(a1, &d, &b, &e);
    const std::uint64_t eb = k_n / size * rank + std::min<std::uint64_t>(rank, k_n % size);
    const std::uint64_t ee = eb + k_n / size + (static_cast<std::uint64_t>(rank) < k_n % size ? 1 : 0);
    expect(b == eb && e == ee, "1-D block range", static_cast<long long>(b), static_cast<long long>(eb));
    auto* v = static_cast<std::uint64_t*>(d);
    for (std::uint64_t g = b; g < e; ++g) {
      expect(v[g - b] == g * 3 + 7 + static_cast<std::uint64_t>(iter), "1-D element value", static_cast<long long>(v[g - b]),
             static_cast<long long>(g * 3 + 7 + iter));
      v[g - b] += 1;  // the computation moves on: values must travel with their owner
      ++checks;
    }
    AQS_Array_local(a2, &d, &b, &e);
    auto* m = static_cast<double*>(d);
    for (std::uint64_t r = b; r < e; ++r) {
      for (std::uint64_t c = 0; c < k_cols; ++c) {
        expect(m[(r - b) * k_cols + c] == double(r * 100 + c) + double(iter), "2-D element value",
               static_cast<long long>(m[(r - b) * k_cols + c]), static_cast<long long>(r * 100 + c + iter));
        m[(r - b) * k_cols + c] += 1.0;
        ++checks;
      }
    }
    const int lo = k_items / size * rank + std::min(rank, k_items % size);
    const int hi = lo + k_items / size + (rank < k_items % size ? 1 : 0);
    expect(static_cast<int>(mine.ids.size()) == hi - lo, "packed item count", static_cast<long long>(mine.ids.size()), hi - lo);
    for (int id : mine.ids) expect(id >= lo && id < hi, "packed item owner", id, lo);

    int proc = -1, cpu = -1;
    AQS_Processor(&proc, &cpu);
    if (AQS_Adaptive() && cpu >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      sched_getaffinity(0, sizeof set, &set);
      expect(CPU_COUNT(&set) == cpus_per_rank && CPU_ISSET(cpu, &set), "pinned to its rank's cpus", CPU_COUNT(&set),
             cpu);
    }
    if (static_cast<std::size_t>(iter) < sizes.size()) {
      expect(size == sizes[static_cast<std::size_t>(iter)], "ranks after MPI_Migrate()", size,
             sizes[static_cast<std::size_t>(iter)]);
    }
    // Every rank's processor is distinct.
    std::vector<int> procs(static_cast<std::size_t>(size));
    MPI_Allgather(&proc, 1, MPI_INT, procs.data(), 1, MPI_INT, comm);
    for (int i = 1; i < size; ++i) expect(procs[i] > procs[i - 1], "processors ascend with rank", procs[i], procs[i - 1]);
    if (rank == 0) std::printf("iteration %ld: %d ranks on map epoch %lld\n", iter, size, static_cast<long long>(AQS_Epoch()));
  }
  MPI_Comm comm = AQS_Comm();
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int total_fail = 0;
  long total_checks = 0;
  MPI_Reduce(&failures, &total_fail, 1, MPI_INT, MPI_SUM, 0, comm);
  MPI_Reduce(&checks, &total_checks, 1, MPI_LONG, MPI_SUM, 0, comm);
  if (rank == 0) {
    // Expansions call parked ranks back before they start processes: the job
    // never has more processes than its widest map (8), parked ones included.
    // (Starting new ones each time would have made 4 + 4 + 2 + 5 = 15.) With
    // C processors per rank the widest map is 8 / C ranks, but a rank parked
    // so recently that it has not reached the leader's pool yet is not
    // called back (a new one starts): not a bound to check here.
    const int processes = processes_of_this_program();
    if (processes > 8) {
      ++total_fail;
      std::fprintf(stderr, "shim_mpi_test: %d processes of this program, more than the widest map (8)\n", processes);
    }
    std::printf("%s: %ld checks, %d failed, %d processes in all\n", total_fail ? "FAILED" : "passed", total_checks,
                total_fail, processes);
  }
  AQS_Finalize();
  MPI_Finalize();
  return total_fail ? 1 : 0;
}
