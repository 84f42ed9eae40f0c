// md: an adaptive molecular-dynamics-style code for the AQS runtime shim
// (aqs/adaptive.h).
//
// A 1-D chain of N particles joined by Fermi-Pasta-Ulam-beta springs,
//   V(r) = r^2/2 + beta r^4/4   (beta = 1), r = the stretch of a bond,
// held between two fixed walls, with alternating masses 1 and 2, integrated
// with velocity Verlet. Each particle is an element of an AQS array (x, its
// displacement from its lattice site; v; f, the force on it; m) distributed in
// blocks over the ranks, with one ghost element on each side that holds the
// neighbouring rank's boundary particle. The force on a particle depends only
// on its two neighbours, so the trajectory is bit-identical whatever the
// number of ranks and however it changed along the way. The total energy is
// summed with MPI_Allreduce at the start and at the end: its relative drift
// must stay within --tolerance.
//
// The life of the program follows aqs/adaptive.h: MPI_Migrate() first thing in
// the loop, AQS_Comm() and AQS_Array_local() asked again after it, and the
// step counter, the simulated time and the initial energy kept in replicated
// state, so that a rank added by an expansion, which starts from main() again,
// learns them at its first MPI_Migrate().
//
// Usage: md [--mb-per-rank M | --particles N] [--steps S] [--dt DT]
//           [--migrate-every K] [--tolerance T] [--out FILE] [--checksum]
#include "example.hpp"  // first (see there): failing, the safe point, options, --out/--checksum

#include <aqs/adaptive.h>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace {

using example::check;
using example::fail;
using example::migrate;

struct Particle {
  double x;  // displacement from the lattice site
  double v;  // velocity
  double f;  // force, always that of the current x
  double m;  // mass
};

constexpr double kBeta = 1.0;
constexpr int kRefRanks = 8;  // --mb-per-rank counts MiB per rank at this many ranks

constexpr const char* kUsage =
    "usage: md [--mb-per-rank M | --particles N] [--steps S] [--dt DT] [--migrate-every K]\n"
    "          [--tolerance T] [--out FILE] [--checksum]\n"
    "  --mb-per-rank M    MiB of particle state per rank at 8 ranks (default 10): N = M MiB * 8 / 32 B,\n"
    "                     the same N whatever the number of ranks\n"
    "  --particles N      the number of particles instead\n"
    "  --steps S          velocity Verlet steps (default 1000)\n"
    "  --dt DT            time step (default 0.002)\n"
    "  --migrate-every K  call MPI_Migrate() at the top of every K-th step (default 1)\n"
    "  --tolerance T      largest |relative energy drift| accepted (default 1e-6)\n"
    "  --out FILE         rank 0 writes the final displacements x there: N raw doubles, in particle order\n"
    "  --checksum         print 'checksum <hex>', the 64-bit FNV-1a hash of those bytes\n";

struct Options {
  double mb_per_rank = 10.0;
  uint64_t particles = 0;  // 0: from mb_per_rank
  int64_t steps = 1000;
  double dt = 0.002;
  int64_t migrate_every = 1;
  double tolerance = 1e-6;
  std::string out;
  bool checksum = false;
  bool help = false;
};

bool parse_int(std::string_view s, int64_t min, int64_t& v) { return example::parse_int(s, min, INT64_MAX, v); }

bool parse_positive(std::string_view s, double& v) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  return ec == std::errc() && p == end && std::isfinite(v) && v > 0.0;
}

// Fills `o`; on a bad command line returns false with a one-line reason.
bool parse_options(int argc, char** argv, Options& o, std::string& err) {
  bool saw_mb = false;
  for (int i = 1; i < argc; ++i) {
    example::Option arg;
    if (!example::read_option(argc, argv, i, {"-h", "--help", "--checksum"},
                              {"--mb-per-rank", "--particles", "--steps", "--dt", "--migrate-every", "--tolerance",
                               "--out"},
                              arg, err)) {
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
    auto bad = [&](const char* what) {
      err = "bad value '" + std::string(value) + "' for " + std::string(name) + " (" + what + ")";
      return false;
    };
    int64_t n = 0;
    if (name == "--out") {
      if (value.empty()) return bad("a file name");
      o.out = value;
    } else if (name == "--mb-per-rank") {
      if (!parse_positive(value, o.mb_per_rank) || o.mb_per_rank > 1e9) return bad("a number of MiB > 0");
      saw_mb = true;
    } else if (name == "--particles") {
      if (!parse_int(value, 1, n)) return bad("an integer >= 1");
      o.particles = static_cast<uint64_t>(n);
    } else if (name == "--steps") {
      if (!parse_int(value, 0, n)) return bad("an integer >= 0");
      o.steps = n;
    } else if (name == "--migrate-every") {
      if (!parse_int(value, 1, n)) return bad("an integer >= 1");
      o.migrate_every = n;
    } else if (name == "--dt") {
      if (!parse_positive(value, o.dt)) return bad("a number > 0");
    } else if (name == "--tolerance") {
      if (!parse_positive(value, o.tolerance)) return bad("a number > 0");
    }
  }
  if (saw_mb && o.particles != 0) {
    err = "give --mb-per-rank or --particles, not both";
    return false;
  }
  if (o.particles == 0) {
    double n = std::floor(o.mb_per_rank * 1024.0 * 1024.0 * kRefRanks / sizeof(Particle));
    if (n < 1.0) {
      err = "--mb-per-rank too small: not even one particle";
      return false;
    }
    o.particles = static_cast<uint64_t>(n);
  }
  return true;
}

struct Local {
  Particle* p = nullptr;  // first local particle; ghosts at p[-1] and p[n()]
  uint64_t begin = 0, end = 0;
  size_t n() const { return static_cast<size_t>(end - begin); }
};

Local local_block(AQS_Array chain) {
  void* data = nullptr;
  Local l;
  check(AQS_Array_local(chain, &data, &l.begin, &l.end), "AQS_Array_local");
  l.p = static_cast<Particle*>(data);
  return l;
}

// A counter-based generator: the same numbers for particle i on any rank.
uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
double uniform(uint64_t i, uint64_t stream) {  // in [-1, 1)
  return static_cast<double>(splitmix64(i * 2 + stream) >> 11) * 0x1.0p-52 - 1.0;
}

// The initial state: small random displacements and velocities, a function of
// the particle's global index only.
void initialize(const Local& l) {
  for (size_t k = 0; k < l.n(); ++k) {
    uint64_t i = l.begin + k;
    l.p[k] = Particle{0.3 * uniform(i, 0), 0.5 * uniform(i, 1), 0.0, i % 2 == 0 ? 1.0 : 2.0};
  }
}

// Fills the ghost particles: the neighbouring rank's boundary particle, or a
// wall (x = 0 for ever) at the ends of the chain. Rank i holds the particles
// right after rank i-1's, and empty ranks (more ranks than particles) come
// last, so the neighbours of a non-empty block are rank-1 and rank+1 whenever
// the chain goes on past the block.
void exchange_halo(const Local& l, uint64_t n_total, MPI_Comm comm, int rank) {
  if (l.n() == 0) return;
  int left = l.begin > 0 ? rank - 1 : MPI_PROC_NULL;
  int right = l.end < n_total ? rank + 1 : MPI_PROC_NULL;
  Particle* ghost_left = l.p - 1;
  Particle* ghost_right = l.p + l.n();
  constexpr int bytes = sizeof(Particle);
  if (left == MPI_PROC_NULL) *ghost_left = Particle{0.0, 0.0, 0.0, 0.0};
  if (right == MPI_PROC_NULL) *ghost_right = Particle{0.0, 0.0, 0.0, 0.0};
  MPI_Sendrecv(l.p, bytes, MPI_BYTE, left, 1, ghost_right, bytes, MPI_BYTE, right, 1, comm, MPI_STATUS_IGNORE);
  MPI_Sendrecv(l.p + l.n() - 1, bytes, MPI_BYTE, right, 2, ghost_left, bytes, MPI_BYTE, left, 2, comm,
               MPI_STATUS_IGNORE);
}

// dV/dr and V of one bond of stretch r.
inline double bond_force(double r) { return r + kBeta * (r * r * r); }
inline double bond_energy(double r) { return 0.5 * (r * r) + 0.25 * kBeta * ((r * r) * (r * r)); }

// Forces from the current x (ghosts filled).
void compute_forces(const Local& l) {
  Particle* p = l.p;
  const ptrdiff_t n = static_cast<ptrdiff_t>(l.n());
  for (ptrdiff_t k = 0; k < n; ++k) p[k].f = bond_force(p[k + 1].x - p[k].x) - bond_force(p[k].x - p[k - 1].x);
}

// This rank's share of the total energy (ghosts filled): the kinetic energy of
// its particles and the bonds to their right, plus the left wall's bond.
double local_energy(const Local& l) {
  double e = 0.0;
  if (l.n() == 0) return e;
  if (l.begin == 0) e += bond_energy(l.p[0].x - l.p[-1].x);
  for (size_t k = 0; k < l.n(); ++k) {
    const Particle& q = l.p[k];
    e += 0.5 * q.m * (q.v * q.v) + bond_energy(l.p[k + 1].x - q.x);
  }
  return e;
}

double total_energy(const Local& l, uint64_t n_total, MPI_Comm comm, int rank) {
  exchange_halo(l, n_total, comm, rank);
  double e = local_energy(l);
  MPI_Allreduce(MPI_IN_PLACE, &e, 1, MPI_DOUBLE, MPI_SUM, comm);
  return e;
}

// One velocity Verlet step; f holds the force of the current x on entry and
// on exit.
void step(const Local& l, double dt, uint64_t n_total, MPI_Comm comm, int rank) {
  const double h = 0.5 * dt;
  for (size_t k = 0; k < l.n(); ++k) {
    Particle& q = l.p[k];
    q.v += h * (q.f / q.m);
    q.x += dt * q.v;
  }
  exchange_halo(l, n_total, comm, rank);
  compute_forces(l);
  for (size_t k = 0; k < l.n(); ++k) {
    Particle& q = l.p[k];
    q.v += h * (q.f / q.m);
  }
}

// Rank 0 receives every rank's displacements in rank order (= particle
// order), hashes them and writes them to `path` (if not empty). Returns false
// on rank 0 if the file could not be written (after receiving everything, so
// no rank is left blocked).
bool gather_output(const Local& l, MPI_Comm comm, int rank, int size, const std::string& path, uint64_t& hash) {
  if (l.n() > static_cast<size_t>(INT_MAX)) fail("--out/--checksum", "more than INT_MAX particles on one rank");
  std::vector<double> xs(l.n());
  for (size_t k = 0; k < l.n(); ++k) xs[k] = l.p[k].x;
  if (rank != 0) {
    MPI_Send(xs.data(), static_cast<int>(xs.size()), MPI_DOUBLE, 0, 3, comm);
    return true;
  }
  example::RawOutput out(path);
  for (int r = 0; r < size; ++r) {
    if (r > 0) {
      MPI_Status st;
      int count = 0;
      MPI_Probe(r, 3, comm, &st);
      MPI_Get_count(&st, MPI_DOUBLE, &count);
      xs.resize(static_cast<size_t>(count));
      MPI_Recv(xs.data(), count, MPI_DOUBLE, r, 3, comm, MPI_STATUS_IGNORE);
    }
    out.add(xs.data(), xs.size() * sizeof(double));
  }
  hash = out.hash();
  return out.finish();
}

// Replicated state: every active rank holds the same copy, and a rank added
// by an expansion receives it at its first MPI_Migrate().
struct Clock {
  int64_t step;
  double time;
  double energy_initial;
};

}  // namespace

int main(int argc, char** argv) {
  example::program_name = "md";
  MPI_Init(&argc, &argv);

  Options opt;
  std::string err;
  if (!parse_options(argc, argv, opt, err) || opt.help) return example::end_at_command_line(kUsage, err);
  const uint64_t n_total = opt.particles;

  check(AQS_Init(), "AQS_Init");
  AQS_Array chain = nullptr;
  check(AQS_Array_create(n_total, sizeof(Particle), 1, &chain), "AQS_Array_create");
  Clock clock{0, 0.0, 0.0};
  check(AQS_Register_replicated(&clock, sizeof clock), "AQS_Register_replicated");

  const int64_t report_every = std::max<int64_t>(1, opt.steps / 10);
  double start = MPI_Wtime();
  int rank = 0, size = 1;
  MPI_Comm comm = MPI_COMM_NULL;
  Local l;

  // Step 0 runs the loop body too (with --steps 0, only its first half), so
  // that the initial state is set up after the first MPI_Migrate(), by the
  // ranks active then.
  for (bool first = true; first || clock.step < opt.steps; first = false) {
    if (clock.step % opt.migrate_every == 0) migrate();
    comm = AQS_Comm();
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    l = local_block(chain);

    if (clock.step == 0) {
      initialize(l);
      exchange_halo(l, n_total, comm, rank);
      compute_forces(l);
      clock.energy_initial = total_energy(l, n_total, comm, rank);
      if (rank == 0) {
        std::printf("particles %" PRIu64 " (%.1f MiB) steps %" PRId64 " dt %g ranks %d\n", n_total,
                    static_cast<double>(n_total * sizeof(Particle)) / (1024.0 * 1024.0), opt.steps, opt.dt, size);
        std::printf("energy_initial %.17g\n", clock.energy_initial);
        std::fflush(stdout);
      }
    }
    if (clock.step >= opt.steps) break;

    step(l, opt.dt, n_total, comm, rank);
    ++clock.step;
    clock.time += opt.dt;

    if (clock.step % report_every == 0 && clock.step < opt.steps) {
      double e = total_energy(l, n_total, comm, rank);
      if (rank == 0) {
        std::printf("step %" PRId64 "/%" PRId64 " t %.6g ranks %d epoch %" PRId64 " energy %.17g\n", clock.step,
                    opt.steps, clock.time, size, AQS_Epoch(), e);
        std::fflush(stdout);
      }
    }
  }
  double elapsed = MPI_Wtime() - start;

  double energy_final = total_energy(l, n_total, comm, rank);
  double drift = (energy_final - clock.energy_initial) / std::fabs(clock.energy_initial);
  int status = 0;
  if (rank == 0) {
    std::printf("energy_final %.17g\n", energy_final);
    std::printf("relative_drift %.3e\n", drift);
  }
  if (!(std::fabs(drift) <= opt.tolerance)) {
    if (rank == 0) std::fprintf(stderr, "md: relative energy drift %.3e exceeds the tolerance %.3e\n", drift, opt.tolerance);
    status = 1;
  }
  if (opt.checksum || !opt.out.empty()) {
    uint64_t hash = 0;
    if (!gather_output(l, comm, rank, size, opt.out, hash)) status = 1;
    if (rank == 0 && opt.checksum) std::printf("checksum %016" PRIx64 "\n", hash);
  }
  if (rank == 0) {
    std::printf("done particles %" PRIu64 " steps %" PRId64 " t %.6g ranks %d time %.3f s\n", n_total, clock.step,
                clock.time, size, elapsed);
    std::fflush(stdout);
  }

  check(AQS_Array_free(&chain), "AQS_Array_free");
  check(AQS_Finalize(), "AQS_Finalize");
  MPI_Finalize();
  return status;
}
