// bench_sim_speed: wall time of whole-trace simulations (KTH under each policy, LLNL-Atlas under easy).
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "sim/simulator.hpp"
#include "sim/swf.hpp"

namespace {

struct row {
  std::string trace, policy;
  double malleable;
  std::size_t jobs, procs;
  double read_s, sim_s;  // best of the repetitions
  double mean_wait, mean_bsld, utilization;
};

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace

int main() {
  const std::string traces = env_or("AQS_TRACES_DIR", "traces");
  const std::string results = env_or("AQS_BENCH_RESULTS", "bench/results");
  struct cfg {
    const char* file;
    const char* policy;
    double malleable;
  };
  const std::vector<cfg> cfgs = {
      {"KTH-SP2-1996-2.1-cln.swf.gz", "fcfs", 0},
      {"KTH-SP2-1996-2.1-cln.swf.gz", "easy", 0},
      {"KTH-SP2-1996-2.1-cln.swf.gz", "equipartition", 0},
      {"KTH-SP2-1996-2.1-cln.swf.gz", "equipartition", 1.0},
      {"LLNL-Atlas-2006-2.1-cln.swf.gz", "easy", 0},
      {"LLNL-Atlas-2006-2.1-cln.swf.gz", "equipartition", 1.0},
  };
  const int reps = 3;
  std::vector<row> rows;
  for (const cfg& c : cfgs) {
    using clock = std::chrono::steady_clock;
    double best_read = 1e9, best_sim = 1e9;
    aqs::sim::sim_result r;
    aqs::sim::workload w;
    for (int i = 0; i < reps; ++i) {
      auto t0 = clock::now();
      auto t = aqs::sim::read_swf(traces + "/" + c.file);
      w = aqs::sim::filter_trace(t, static_cast<std::size_t>(t.max_procs.value_or(0)));
      if (c.malleable > 0) aqs::sim::make_malleable(w, c.malleable, 1);
      auto t1 = clock::now();
      aqs::sim::sim_options o;
      o.policy = c.policy;
      r = aqs::sim::simulate(w, o);
      auto t2 = clock::now();
      best_read = std::min(best_read, std::chrono::duration<double>(t1 - t0).count());
      best_sim = std::min(best_sim, std::chrono::duration<double>(t2 - t1).count());
    }
    rows.push_back({c.file, c.policy, c.malleable, r.jobs.size(), r.procs, best_read, best_sim, r.mean_wait,
                    r.mean_bsld, r.utilization});
  }
  fmt::print("{:<32} {:<14} {:>5} {:>7} {:>6} {:>8} {:>8} {:>8} {:>12} {:>9} {:>6}\n", "trace", "policy", "mall.",
             "jobs", "procs", "read s", "sim s", "total s", "mean wait s", "AVEbsld", "util");
  for (const row& x : rows) {
    fmt::print("{:<32} {:<14} {:>5.1f} {:>7} {:>6} {:>8.3f} {:>8.3f} {:>8.3f} {:>12.1f} {:>9.2f} {:>6.4f}\n", x.trace,
               x.policy, x.malleable, x.jobs, x.procs, x.read_s, x.sim_s, x.read_s + x.sim_s, x.mean_wait,
               x.mean_bsld, x.utilization);
  }
  std::ofstream out(results + "/sim_speed.json");
  out << "{\"benchmark\":\"sim_speed\",\"repetitions\":" << reps << ",\"runs\":[";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row& x = rows[i];
    out << fmt::format(
        "{}{{\"trace\":\"{}\",\"policy\":\"{}\",\"malleable\":{},\"jobs\":{},\"procs\":{},\"read_s\":{:.6f},"
        "\"sim_s\":{:.6f},\"total_s\":{:.6f},\"mean_wait_s\":{:.3f},\"mean_bsld\":{:.4f},\"utilization\":{:.6f}}}",
        i ? "," : "", x.trace, x.policy, x.malleable, x.jobs, x.procs, x.read_s, x.sim_s, x.read_s + x.sim_s,
        x.mean_wait, x.mean_bsld, x.utilization);
  }
  out << "]}\n";
  if (!out) {
    fmt::print(stderr, "bench_sim_speed: cannot write {}/sim_speed.json\n", results);
    return 1;
  }
  return 0;
}
