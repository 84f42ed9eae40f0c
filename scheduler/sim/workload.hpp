// workload: the jobs a simulation replays, from an SWF trace or a synthetic generator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/swf.hpp"

namespace aqs::sim {

struct sim_job {
  std::uint64_t id = 0;
  double submit = 0;
  double runtime = 0;   // at `size` processors
  double estimate = 0;  // requested time (the walltime the scheduler sees)
  std::size_t size = 1;  // requested processors
  long long user = -1;
  bool adaptive = false;
  std::size_t min_pe = 1, max_pe = 1;  // == size for rigid jobs
  std::size_t pref_pe = 0;             // adaptive: preferred size (0: none declared)
  double parallel_fraction = -1;       // adaptive: its own Amdahl fraction (< 0: the run's --speedup)
};

struct workload {
  std::size_t procs = 0;  // machine size
  std::vector<sim_job> jobs;  // by submit time, then id
  std::size_t skipped = 0;
  std::map<std::string, std::size_t> skipped_by_reason;
};

// The default job filter (CQSim's, see docs/simulator.md): skip jobs whose run
// time, requested time or requested processors is <= 0, or that ask for more
// than `procs`; a run time beyond the requested time is cut to it (the job is
// killed at its limit); the size is the requested processor count.
workload filter_trace(const swf_trace& trace, std::size_t procs);

// Makes `fraction` of the jobs adaptive (chosen with `seed`; all of them for
// 1.0): min = ceil(size / 2), max = min(procs, 2 * size). The logged size is
// where the job's logged run time holds (see speedup). Each adaptive job
// also gets a preferred size, from a second stream of `seed` (so the choice
// of jobs is the same as without it): its logged size with probability 1/2
// (the size its user picked for the rigid run), else log-uniform in
// min..max (users who tuned for speed or for efficiency), rounded. With
// draw_speedup, each adaptive job gets its own Amdahl parallel fraction
// F = 1 - 10^U(-3, -1) (serial fractions log-uniform between 0.1 % and 10 %)
// instead of the run's model. docs/simulator.md gives the reasons.
void make_malleable(workload& w, double fraction, std::uint64_t seed, bool draw_speedup = false);

// Synthetic workload in the style of the Faucets experiments: Poisson
// arrivals whose rate gives the asked load factor
//   load = rate * E[size * runtime] / procs,
// sizes 2^k with k uniform in 0..log2(procs)-1, run times exponential with
// the given mean (at least 1 s), estimates = run time * U(1, 3).
struct generator_params {
  std::size_t jobs = 1000;
  std::size_t procs = 64;
  double load = 0.5;
  double mean_runtime = 64.5;
  std::uint64_t seed = 1;
};
workload generate(const generator_params& p);

// How fast an adaptive job progresses on p processors, relative to its logged
// size s: rate(p) = S(p) / S(s), where S is "linear" (S(p) = p) or
// "amdahl:F" (S(p) = 1 / ((1 - F) + F / p), F the parallel fraction).
class speedup_model {
public:
  // Throws std::invalid_argument for an unknown model or F outside [0, 1].
  static speedup_model parse(const std::string& text);
  double speedup(double p) const;
  double relative_rate(std::size_t p, std::size_t logged) const {
    return speedup(static_cast<double>(p)) / speedup(static_cast<double>(logged));
  }
  const std::string& name() const noexcept { return name_; }

private:
  std::string name_ = "linear";
  double parallel_ = 1.0;
  bool linear_ = true;
};

}  // namespace aqs::sim
