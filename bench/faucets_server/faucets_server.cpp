// bench_faucets_server: the Faucets server's broker policies end to end.
// For each policy (random, fastest-cpu, fastest-queue, data, earliest-start)
// a fresh faucetsd (private PostgreSQL, TLS for clusters and users) and three
// fresh AQS clusters joined to it: aqsd + agents of 4, 8 and 16 processors
// (one agent each, speed 1.0 everywhere: the jobs sleep, they do not compute).
// A throwaway system user gets a token from faucetsd's socket (ftoken) and
// submits the same seeded stream of rigid jobs through POST /api/v1/jobs
// with "cluster": "auto": 1..8 processors, `sleep` of 2..10 s, a time limit
// of the run time rounded up plus 2 s, Poisson arrivals over ~30 s, more work
// than the 28 processors do in that time, so queues build up. Polls
// GET /api/v1/jobs?all=1 until every job has ended, then per policy:
// mean response (end - submit), mean wait (start - submit), makespan (last
// end - first submit) and jobs per cluster. Prints a table and writes
// $AQS_BENCH_RESULTS/faucets_server.json.
//   bench_faucets_server [--quick] [--policy NAME]...
// --quick: 12 jobs over ~8 s (a smoke test). Needs root.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_faucets.hpp"

namespace fs = std::filesystem;
namespace fb = aqs::bench::faucets;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

constexpr const char* k_user = "aqsfbench";

struct cluster_spec {
  std::string name;
  int procs;
};
const std::vector<cluster_spec> k_clusters{{"small", 4}, {"medium", 8}, {"large", 16}};

struct job_spec {
  double arrive_s;  // after the first submission
  int procs;
  double run_s;
  int walltime_s;
};

// The fixed workload: seed 42, the same for every policy.
std::vector<job_spec> workload(int n, double mean_gap_s) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> procs(1, 8);
  std::uniform_int_distribution<int> tenths(20, 100);  // 2.0 .. 10.0 s
  std::exponential_distribution<double> gap(1.0 / mean_gap_s);
  std::vector<job_spec> out;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    job_spec j;
    j.arrive_s = t;
    j.procs = procs(rng);
    j.run_s = tenths(rng) / 10.0;
    j.walltime_s = static_cast<int>(std::ceil(j.run_s)) + 2;
    out.push_back(j);
    t += gap(rng);
  }
  return out;
}

struct policy_result {
  std::string policy;
  int jobs = 0, completed = 0, other_end = 0;
  double mean_response_s = 0, mean_wait_s = 0, p90_response_s = 0, makespan_s = 0, setup_s = 0;
  double placement_median_ms = 0, placement_max_ms = 0;  // the server's "submitted" -> "placed" events
  std::map<std::string, int> per_cluster;
  std::map<std::string, int> states;
};

policy_result run_policy(const fb::site& s, const std::string& policy, const std::vector<job_spec>& jobs) {
  policy_result r;
  r.policy = policy;
  const auto t_setup = std::chrono::steady_clock::now();
  fb::broker broker(s, AQS_FAUCETSD_BINARY, policy);
  std::vector<std::unique_ptr<aqs::bench::system>> clusters;
  for (const auto& c : k_clusters) {
    clusters.push_back(broker.start_cluster(AQS_AQSD_BINARY, AQS_NODE_BINARY, c.name, c.procs));
  }
  auto api = broker.user_client(AQS_FTOKEN_BINARY);
  fb::wait_clusters_up(api, k_clusters.size(), 60s);
  r.setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_setup).count();

  // Submit on schedule.
  const std::string work = s.work().string();
  std::map<std::int64_t, double> submitted;  // server id -> our submit time
  std::set<std::int64_t> ids;
  const double t0 = fb::now_s();
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    fb::sleep_until(t0 + j.arrive_s);
    char run[32];
    std::snprintf(run, sizeof run, "%.1f", j.run_s);
    const json job{{"name", "fb" + std::to_string(i)},
                   {"argv", {"/bin/sleep", run}},
                   {"workdir", work},
                   {"stdout", "/dev/null"},
                   {"min_pe", j.procs},
                   {"max_pe", j.procs},
                   {"walltime_s", j.walltime_s}};
    const double at = fb::now_s();
    const auto sub = api.submit("auto", job);
    submitted[sub.id] = at;
    ids.insert(sub.id);
  }
  const double submit_end = fb::now_s();
  const json final_jobs = fb::wait_ended(api, ids, 600s);

  std::vector<double> response, wait;
  double last_end = 0;
  for (const auto& j : final_jobs) {
    const auto it = submitted.find(j.value("id", std::int64_t{0}));
    if (it == submitted.end()) continue;
    ++r.jobs;
    const std::string st = j.value("state", "");
    ++r.states[st];
    (st == "COMPLETED" ? r.completed : r.other_end) += 1;
    r.per_cluster[j["cluster"].is_string() ? j["cluster"].get<std::string>() : "-"] += 1;
    if (!j["end_time"].is_string()) continue;  // never placed
    const double end = aqs::bench::iso_seconds(j["end_time"].get<std::string>());
    last_end = std::max(last_end, end);
    response.push_back(end - it->second);
    if (j["start_time"].is_string()) wait.push_back(aqs::bench::iso_seconds(j["start_time"].get<std::string>()) - it->second);
  }
  // How long the server took to place each job (its own events, ms apart):
  // the broker's questions (earliest-start: one estimate per cluster) and
  // the cluster's answer to the forward, one job at a time.
  std::vector<double> placement;
  for (const auto& [id, at] : submitted) {
    double sub = -1, placed = -1;
    for (const auto& e : api.history(id)) {
      const std::string ev = e.value("event", "");
      if (ev == "submitted" && sub < 0) sub = aqs::bench::iso_seconds(e.value("time", ""));
      if (ev == "placed" && placed < 0) placed = aqs::bench::iso_seconds(e.value("time", ""));
    }
    if (sub >= 0 && placed >= 0) placement.push_back((placed - sub) * 1000.0);
  }
  r.placement_median_ms = aqs::bench::median(placement);
  r.placement_max_ms = aqs::bench::pct(placement, 1.0);
  r.mean_response_s = aqs::bench::mean(response);
  r.mean_wait_s = aqs::bench::mean(wait);
  r.p90_response_s = aqs::bench::pct(response, 0.9);
  r.makespan_s = last_end - t0;
  std::fprintf(stderr, "  %s: submitted over %.1f s, setup %.1f s\n", policy.c_str(), submit_end - t0, r.setup_s);

  for (auto& c : clusters) c->stop();
  broker.stop();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  fb::options opts;
  const int usage = fb::parse_options(argc, argv, "bench_faucets_server",
                                      {"random", "fastest-cpu", "fastest-queue", "data", "earliest-start"}, opts);
  if (usage != 0) return usage;
  const bool quick = opts.quick;
  const auto& policies = opts.policies;
  aqs::bench::stop_on_signals();
  const int n = quick ? 12 : 48;
  const double gap = quick ? 0.7 : 0.65;
  const auto jobs = workload(n, gap);
  double work = 0;
  for (const auto& j : jobs) work += j.procs * j.run_s;

  int rc = 0;
  nlohmann::json results = nlohmann::json::array();
  try {
    std::vector<std::string> names;
    for (const auto& c : k_clusters) names.push_back(c.name);
    const fb::site s("aqs-fbench", k_user, names);
    std::printf("Faucets server: %zu rigid sleep jobs (seed 42, 1..8 processors, 2..10 s, limit +2 s), %.0f "
                "processor-seconds, arriving over %.1f s; clusters small 4, medium 8, large 16 processors\n\n",
                jobs.size(), work, jobs.back().arrive_s);
    std::printf("%-15s %5s %5s %12s %10s %12s %10s %12s  %s\n", "policy", "jobs", "done", "response s", "wait s",
                "p90 resp s", "makespan s", "place ms p50", "jobs on small/medium/large");
    for (const auto& p : policies) {
      const auto r = run_policy(s, p, jobs);
      std::printf("%-15s %5d %5d %12.1f %10.1f %12.1f %10.1f %12.0f  %d/%d/%d\n", r.policy.c_str(), r.jobs,
                  r.completed, r.mean_response_s, r.mean_wait_s, r.p90_response_s, r.makespan_s, r.placement_median_ms,
                  r.per_cluster.count("small") ? r.per_cluster.at("small") : 0,
                  r.per_cluster.count("medium") ? r.per_cluster.at("medium") : 0,
                  r.per_cluster.count("large") ? r.per_cluster.at("large") : 0);
      std::fflush(stdout);
      results.push_back({{"policy", r.policy},
                         {"jobs", r.jobs},
                         {"completed", r.completed},
                         {"states", r.states},
                         {"mean_response_s", r.mean_response_s},
                         {"mean_wait_s", r.mean_wait_s},
                         {"p90_response_s", r.p90_response_s},
                         {"makespan_s", r.makespan_s},
                         {"jobs_per_cluster", r.per_cluster},
                         {"setup_s", r.setup_s},
                         {"placement_median_ms", r.placement_median_ms},
                         {"placement_max_ms", r.placement_max_ms},
                         {"workload", {{"jobs", jobs.size()}, {"processor_seconds", work}, {"seed", 42}}}});
    }
    aqs::bench::write_results("faucets_server", results);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_faucets_server: %s\n", e.what());
    rc = 1;
  }
  return rc;
}
