// bench_faucets: mean response time and utilization against load, adaptive vs rigid, plus malleable KTH.
#include <fmt/core.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "sim/simulator.hpp"
#include "sim/swf.hpp"
#include "sim/workload.hpp"

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

struct variant {
  const char* label;
  const char* policy;
  bool malleable;
  const char* speedup;
  double resize_cost;
};

struct point {
  double response = 0, wait = 0, bsld = 0, util = 0, resizes = 0;
};

point run(const aqs::sim::workload& base, const variant& v) {
  aqs::sim::workload w = base;
  if (v.malleable) aqs::sim::make_malleable(w, 1.0, 1);
  aqs::sim::sim_options o;
  o.policy = v.policy;
  o.speedup = aqs::sim::speedup_model::parse(v.speedup);
  o.resize_cost = v.resize_cost;
  auto r = aqs::sim::simulate(w, o);
  return {r.mean_response, r.mean_wait, r.mean_bsld, r.utilization, static_cast<double>(r.resizes)};
}

}  // namespace

int main() {
  const std::string results = env_or("AQS_BENCH_RESULTS", "bench/results");
  const std::string traces = env_or("AQS_TRACES_DIR", "traces");
  const std::vector<variant> variants = {
      {"fcfs", "fcfs", false, "linear", 0},
      {"easy", "easy", false, "linear", 0},
      {"equipartition", "equipartition", true, "linear", 0},
      {"equip_amdahl95_cost2", "equipartition", true, "amdahl:0.95", 2},
  };
  const std::size_t jobs = 5000, seeds = 5;
  std::ofstream dat(results + "/faucets.dat");
  std::ofstream json(results + "/faucets.json");
  dat << "# load";
  for (const auto& v : variants) dat << " " << v.label << "_response " << v.label << "_util";
  dat << "\n";
  json << "{\"benchmark\":\"faucets\",\"procs\":64,\"mean_runtime_s\":64.5,\"jobs_per_run\":" << jobs
       << ",\"seeds\":" << seeds << ",\"points\":[";
  fmt::print("Faucets experiment: 64 processors, mean run time 64.5 s, {} jobs x {} seeds per point\n", jobs, seeds);
  fmt::print("{:>5}", "load");
  for (const auto& v : variants) fmt::print(" | {:>20} resp s  util", v.label);
  fmt::print("\n");
  bool first = true;
  for (int l = 1; l <= 10; ++l) {
    double load = l / 10.0;
    fmt::print("{:>5.1f}", load);
    dat << load;
    for (const auto& v : variants) {
      point avg;
      for (std::size_t s = 1; s <= seeds; ++s) {
        aqs::sim::generator_params g;
        g.jobs = jobs;
        g.procs = 64;
        g.load = load;
        g.mean_runtime = 64.5;
        g.seed = s;
        point p = run(aqs::sim::generate(g), v);
        avg.response += p.response / seeds;
        avg.wait += p.wait / seeds;
        avg.bsld += p.bsld / seeds;
        avg.util += p.util / seeds;
        avg.resizes += p.resizes / seeds;
      }
      fmt::print(" | {:>27.1f} {:>5.3f}", avg.response, avg.util);
      dat << " " << avg.response << " " << avg.util;
      json << fmt::format(
          "{}{{\"load\":{:.1f},\"variant\":\"{}\",\"mean_response_s\":{:.3f},\"mean_wait_s\":{:.3f},"
          "\"mean_bsld\":{:.4f},\"utilization\":{:.5f},\"resizes\":{:.1f}}}",
          first ? "" : ",", load, v.label, avg.response, avg.wait, avg.bsld, avg.util, avg.resizes);
      first = false;
    }
    fmt::print("\n");
    dat << "\n";
  }
  json << "],\"kth_malleable\":[";

  // KTH with every job malleable against the rigid trace under easy.
  auto t = aqs::sim::read_swf(traces + "/KTH-SP2-1996-2.1-cln.swf.gz");
  auto kth = aqs::sim::filter_trace(t, static_cast<std::size_t>(t.max_procs.value_or(100)));
  const std::vector<variant> kv = {
      {"easy (rigid)", "easy", false, "linear", 0},
      {"equipartition, linear", "equipartition", true, "linear", 0},
      {"equipartition, linear, resize 60 s", "equipartition", true, "linear", 60},
      {"equipartition, amdahl:0.95", "equipartition", true, "amdahl:0.95", 0},
      {"equipartition, amdahl:0.95, resize 60 s", "equipartition", true, "amdahl:0.95", 60},
  };
  fmt::print("\nKTH-SP2, all jobs malleable (min = ceil(size/2), max = min(100, 2 size))\n");
  fmt::print("{:<42} {:>14} {:>12} {:>9} {:>7} {:>9}\n", "run", "mean resp. s", "mean wait s", "AVEbsld", "util",
             "resizes");
  first = true;
  for (const auto& v : kv) {
    point p = run(kth, v);
    fmt::print("{:<42} {:>14.1f} {:>12.1f} {:>9.2f} {:>7.4f} {:>9.0f}\n", v.label, p.response, p.wait, p.bsld, p.util,
               p.resizes);
    json << fmt::format(
        "{}{{\"run\":\"{}\",\"mean_response_s\":{:.3f},\"mean_wait_s\":{:.3f},\"mean_bsld\":{:.4f},"
        "\"utilization\":{:.5f},\"resizes\":{:.0f}}}",
        first ? "" : ",", v.label, p.response, p.wait, p.bsld, p.util, p.resizes);
    first = false;
  }
  json << "]}\n";
  if (!dat || !json) {
    fmt::print(stderr, "bench_faucets: cannot write into {}\n", results);
    return 1;
  }
  return 0;
}
