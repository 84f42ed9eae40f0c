// bench_policies: the scheduling core's decision time per event, for each policy, on a full cluster with a long queue
// (16 nodes with 1,000 queued; 1,024 nodes with 1,000, 10,000 and 100,000 queued).
//
// As bench_scale's decision-time rows (equipartition there): nodes x 16
// processors, full with one 16-processor job per node, `queued` jobs
// waiting; then alternately a running job ends (the head starts in its
// place) and a new job arrives; apply + decide of each event is timed. Two
// mixes: all rigid (bench_scale's), and one job in five adaptive (8..32
// processors, preferred 16, Amdahl 0.95, 10 s per resize), where the
// preferred-size policies shrink, grow and weigh resizes; and the same with
// the adaptive jobs bounded per node (issue 30: at most 8 ranks a node and
// 4 GB on each node of 64 GB, placed by core/adaptive_placement), the cost
// of keeping those bounds as they start, grow and shrink; and all rigid in
// one partition of every node (aqs.conf's PartitionName=), the cost of a
// scoped decision.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_requests.hpp"
#include "bench_results.hpp"
#include "core/partition.hpp"
#include "core/scheduler.hpp"

namespace core = aqs::core;
using clk = std::chrono::steady_clock;

namespace {

constexpr std::size_t k_procs_per_node = 16;

struct cost {
  double mean_us = 0, p50_us = 0, p99_us = 0, max_us = 0;
};

enum class mix { rigid, adaptive, bounded, partitioned };

cost decision_time(const std::string& policy, std::size_t nodes, std::size_t queued, int events, mix kind) {
  const bool mixed = kind == mix::adaptive || kind == mix::bounded;
  core::scheduler s(core::cluster::uniform(nodes, k_procs_per_node), core::make_strategy(policy));
  for (std::size_t n = 0; n < nodes; ++n) s.set_node_resources(n, 64 * 1024, 0);
  if (kind == mix::partitioned) {
    const std::string conf = fmt::format("PartitionName=all Nodes=node[0-{}] Default=YES\n", nodes - 1);
    s.set_partitions(core::parse_config(conf, "bench").partitions);
  }
  core::job_id next = 1;
  double now = 0;
  auto request = [&] {
    core::job_request r = aqs::bench::rigid_request(next++, k_procs_per_node, now);
    if (mixed && r.id % 5 == 0) {
      r.adaptive = true;
      r.min_pe = k_procs_per_node / 2;
      r.max_pe = 2 * k_procs_per_node;
      r.pref_pe = k_procs_per_node;
      r.speedup = core::speedup_model::amdahl(0.95);
      r.resize_cost = 10;
      if (kind == mix::bounded) {
        r.shape.tasks_per_node = k_procs_per_node / 2;
        r.shape.mem_per_node_mb = 4096;
      }
    }
    return r;
  };
  auto settle = [&](std::vector<core::decision> d) {
    // Resizes are acknowledged at once (and timed with the event: aqsd decides again at each ack).
    while (std::any_of(d.begin(), d.end(), [](const core::decision& x) { return x.what == core::decision::kind::resize; })) {
      for (const auto& x : d) {
        if (x.what == core::decision::kind::resize) s.apply(core::event::on_job(core::event::kind::resize_ack, x.job));
      }
      d = s.decide(now);
    }
  };
  for (std::size_t n = 0; n < nodes; ++n) s.apply(core::event::arrival(request()));
  settle(s.decide(now));
  for (std::size_t q = 0; q < queued; ++q) s.apply(core::event::arrival(request()));
  settle(s.decide(now));
  std::vector<double> us;
  for (int e = 0; e < events; ++e) {
    now += 1;
    core::event ev;
    if (e % 2 == 0) {
      // The running job with the earliest estimated end (the oldest start: walltimes are equal) ends.
      ev = core::event::completion(s.holding_by_end().begin()->second);
    } else {
      ev = core::event::arrival(request());
    }
    const auto t0 = clk::now();
    s.apply(ev);
    settle(s.decide(now));
    us.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
  }
  cost out;
  for (double v : us) out.mean_us += v;
  out.mean_us /= static_cast<double>(us.size());
  std::sort(us.begin(), us.end());
  out.p50_us = us[us.size() / 2];
  out.p99_us = us[static_cast<std::size_t>(0.99 * static_cast<double>(us.size() - 1))];
  out.max_us = us.back();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // bench_policies [--quick] [POLICY...]: every policy below unless some are named.
  bool quick = false;
  std::vector<std::string> policies;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") {
      quick = true;
    } else {
      policies.emplace_back(argv[i]);
    }
  }
  if (policies.empty()) policies = {"easy", "equipartition", "pref_common_pool", "payoff", "payoff_lxf"};
  const char* env = std::getenv("AQS_BENCH_RESULTS");
  const std::string results = env && *env ? env : "bench/results";
  // (nodes, queued): a small case, and 1,024 nodes with 1,000, 10,000 and the
  // issue's 100,000 queued (how the cost grows with the queue's length).
  const std::vector<std::pair<std::size_t, std::size_t>> sizes =
      quick ? std::vector<std::pair<std::size_t, std::size_t>>{{16, 1000}}
            : std::vector<std::pair<std::size_t, std::size_t>>{{16, 1000}, {1024, 1000}, {1024, 10000}, {1024, 100000}};
  const int events = quick ? 200 : 2000;
  std::string json = "[";
  fmt::print("{:>17} {:>6} {:>6} {:>8} {:>10} {:>10} {:>10} {:>10}\n", "policy", "mix", "nodes", "queued", "mean us",
             "p50 us", "p99 us", "max us");
  for (const auto& policy : policies) {
    for (const mix kind : {mix::rigid, mix::adaptive, mix::bounded, mix::partitioned}) {
      for (const auto& [nodes, queued] : sizes) {
        {
          const cost c = decision_time(policy, nodes, queued, events, kind);
          const char* name = kind == mix::rigid      ? "rigid"
                             : kind == mix::adaptive ? "20%"
                             : kind == mix::bounded  ? "20%b"
                                                     : "part";
          fmt::print("{:>17} {:>6} {:>6} {:>8} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.1f}\n", policy, name, nodes, queued,
                     c.mean_us, c.p50_us, c.p99_us, c.max_us);
          std::fflush(stdout);
          json += fmt::format("{}{{\"policy\":\"{}\",\"adaptive_fraction\":{},\"bounded\":{},\"partition\":{},\"nodes\":{},\"queued\":{},"
                              "\"events\":{},\"decide_us_mean\":{:.3f},\"decide_us_p50\":{:.3f},\"decide_us_p99\":{:.3f},"
                              "\"decide_us_max\":{:.1f}}}",
                              json.size() > 1 ? "," : "", policy, kind == mix::adaptive || kind == mix::bounded ? 0.2 : 0.0,
                              kind == mix::bounded ? "true" : "false", kind == mix::partitioned ? "true" : "false", nodes, queued, events, c.mean_us, c.p50_us,
                              c.p99_us, c.max_us);
        }
      }
    }
  }
  json += "]\n";
  return aqs::bench::write_results(results, "policies", json);
}
