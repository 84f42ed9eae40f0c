// workload: the trace filter, malleable conversion, Poisson generator and speedup models.
#include "sim/workload.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

namespace aqs::sim {

namespace {

void sort_jobs(workload& w) {
  std::stable_sort(w.jobs.begin(), w.jobs.end(), [](const sim_job& a, const sim_job& b) {
    return a.submit != b.submit ? a.submit < b.submit : a.id < b.id;
  });
}

}  // namespace

workload filter_trace(const swf_trace& trace, std::size_t procs) {
  workload w;
  w.procs = procs;
  auto skip = [&](const char* why) {
    ++w.skipped;
    ++w.skipped_by_reason[why];
  };
  for (const swf_record& r : trace.jobs) {
    if (r.run <= 0) { skip("run_time<=0"); continue; }
    if (r.req_time <= 0) { skip("requested_time<=0"); continue; }
    if (r.req_procs <= 0) { skip("requested_procs<=0"); continue; }
    if (static_cast<std::size_t>(r.req_procs) > procs) { skip("larger_than_machine"); continue; }
    sim_job j;
    j.id = static_cast<std::uint64_t>(r.id > 0 ? r.id : static_cast<long long>(r.line));
    j.submit = r.submit;
    j.estimate = r.req_time;
    j.runtime = std::min(r.run, r.req_time);
    j.size = static_cast<std::size_t>(r.req_procs);
    j.min_pe = j.max_pe = j.size;
    j.user = r.user;
    w.jobs.push_back(j);
  }
  sort_jobs(w);
  return w;
}

void make_malleable(workload& w, double fraction, std::uint64_t seed, bool draw_speedup) {
  std::mt19937_64 rng(seed);
  std::mt19937_64 shape(seed ^ 0x9e3779b97f4a7c15ULL);  // preferred sizes and speedups: their own stream
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (sim_job& j : w.jobs) {
    bool pick = fraction >= 1.0 || (fraction > 0 && u(rng) < fraction);
    // Three draws per job whatever it becomes, so one job's draws do not
    // depend on the others'.
    const double keep = u(shape), where = u(shape), serial = u(shape);
    if (!pick) continue;
    j.adaptive = true;
    j.min_pe = std::max<std::size_t>(1, (j.size + 1) / 2);
    j.max_pe = std::max(j.min_pe, std::min(w.procs, 2 * j.size));
    if (keep < 0.5) {
      j.pref_pe = std::clamp(j.size, j.min_pe, j.max_pe);
    } else {
      const double lo = std::log(static_cast<double>(j.min_pe)), hi = std::log(static_cast<double>(j.max_pe));
      j.pref_pe = std::clamp(static_cast<std::size_t>(std::lround(std::exp(lo + where * (hi - lo)))), j.min_pe, j.max_pe);
    }
    if (draw_speedup) j.parallel_fraction = 1.0 - std::pow(10.0, -3.0 + 2.0 * serial);
  }
}

workload generate(const generator_params& p) {
  if (p.procs < 1 || p.jobs < 1 || p.load <= 0 || p.mean_runtime <= 0) {
    throw std::invalid_argument("generator: procs, jobs, load and mean runtime must be positive");
  }
  workload w;
  w.procs = p.procs;
  std::mt19937_64 rng(p.seed);
  std::size_t levels = 1;
  while ((std::size_t{1} << levels) < p.procs) ++levels;  // sizes 1 .. 2^(levels-1) < procs
  if (p.procs == 1) levels = 1;
  std::uniform_int_distribution<std::size_t> level(0, levels - 1);
  std::exponential_distribution<double> runtime(1.0 / p.mean_runtime);
  std::uniform_real_distribution<double> over(1.0, 3.0);
  double mean_size = 0;
  for (std::size_t k = 0; k < levels; ++k) mean_size += static_cast<double>(std::size_t{1} << k);
  mean_size /= static_cast<double>(levels);
  // Exponential run times are cut below at 1 s; E[max(1, X)] = mean + e^(-1/mean).
  double mean_rt = p.mean_runtime + std::exp(-1.0 / p.mean_runtime);
  double rate = p.load * static_cast<double>(p.procs) / (mean_size * mean_rt);
  std::exponential_distribution<double> gap(rate);
  double t = 0;
  for (std::size_t i = 0; i < p.jobs; ++i) {
    sim_job j;
    j.id = i + 1;
    j.submit = std::round(t);
    j.size = std::size_t{1} << level(rng);
    j.runtime = std::max(1.0, std::round(runtime(rng)));
    j.estimate = std::ceil(j.runtime * over(rng));
    j.min_pe = j.max_pe = j.size;
    j.user = static_cast<long long>(i % 16);
    w.jobs.push_back(j);
    t += gap(rng);
  }
  sort_jobs(w);
  return w;
}

speedup_model speedup_model::parse(const std::string& text) {
  speedup_model m;
  if (text == "linear") return m;
  if (text.rfind("amdahl:", 0) == 0) {
    std::string f = text.substr(7);
    char* end = nullptr;
    double v = std::strtod(f.c_str(), &end);
    if (f.empty() || end != f.c_str() + f.size() || !(v >= 0 && v <= 1)) {
      throw std::invalid_argument("speedup model '" + text + "': the parallel fraction must be in [0, 1]");
    }
    m.name_ = text;
    m.parallel_ = v;
    m.linear_ = false;
    return m;
  }
  throw std::invalid_argument("unknown speedup model '" + text + "' (known: linear, amdahl:F)");
}

double speedup_model::speedup(double p) const {
  if (linear_) return p;
  return 1.0 / ((1.0 - parallel_) + parallel_ / p);
}

}  // namespace aqs::sim
