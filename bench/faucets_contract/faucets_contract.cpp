// bench_faucets_contract: the contract policy against earliest-start and
// random, end to end (issue 35). For each policy a fresh faucetsd (private
// PostgreSQL, TLS for clusters and users, an owners table so that every job
// is charged at the price it was placed at) and three fresh AQS clusters
// joined to it, each a real aqsd with one real agent:
//   fast    8 processors, --faucets-speed 2.0, --faucets-rate 3.0
//   medium  8 processors, --faucets-speed 1.0, --faucets-rate 1.0, half of
//           it held by a background job submitted there directly (load)
//   slow    4 processors, --faucets-speed 0.5, --faucets-rate 0.4
// The jobs sleep; a job's sleep is its work divided by the speed of the
// cluster it lands on (it reads its node's name, $SLURMD_NODENAME, which
// names the cluster): the speed each cluster reports is the speed its jobs
// see. Each job's time limit is its work at the slowest speed plus 2 s, so
// that no job is killed anywhere.
// A throwaway system user submits the same seeded 100 jobs under every
// policy through POST /api/v1/jobs with "cluster": "auto" and a contract:
//   30 urgent: 1..4 processors, work 2..6 s, value 50..100 (decay 10 s),
//      deadline = submit + work + 1 + 3..8 s, max price 10, refused if late;
//   70 relaxed: 1..2 processors, work 2..4 s, value 5..15 (decay 60 s),
//      deadline = submit + 60..120 s, max price 2, best effort.
// Value earned by a job: 0 unless it COMPLETED at a price within its
// max_price (the price its placement was agreed at, from the ledger);
// else its contract's value at its end time (full by the deadline, then the
// linear decay). Per policy: total value, deadlines missed (ended after the
// deadline, or never ran), refused, over-price placements, mean response
// (end - submit, completed jobs), jobs per cluster. Prints a table and writes
// $AQS_BENCH_RESULTS/faucets_contract.json.
//   bench_faucets_contract [--quick] [--policy NAME]...
// --quick: 20 jobs (a smoke test). Needs root.
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
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_faucets.hpp"

namespace fs = std::filesystem;
namespace fb = aqs::bench::faucets;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

constexpr const char* k_user = "aqsfcontract";
constexpr double k_slowest = 0.5;

struct cluster_spec {
  std::string name;
  int procs;
  double speed, rate;
  int background_procs;  // held by a job submitted there directly, for the whole run
};
const std::vector<cluster_spec> k_clusters{
    {"fast", 8, 2.0, 3.0, 0}, {"medium", 8, 1.0, 1.0, 4}, {"slow", 4, 0.5, 0.4, 0}};

struct job_spec {
  double arrive_s;
  bool urgent;
  int procs;
  double work_s;       // at speed 1.0
  int walltime_s;      // its work at the slowest speed + 2 s
  double deadline_s;   // after its submission
  double value, decay_s, max_price;
  bool best_effort;
};

std::vector<job_spec> workload(int n, double span_s) {
  std::mt19937_64 rng(35);
  std::uniform_real_distribution<double> u01(0, 1);
  std::vector<job_spec> out;
  for (int i = 0; i < n; ++i) {
    job_spec j;
    j.arrive_s = span_s * u01(rng);
    j.urgent = u01(rng) < 0.3;
    if (j.urgent) {
      j.procs = 1 + static_cast<int>(u01(rng) * 4);
      j.work_s = std::round(20 + 40 * u01(rng)) / 10.0;
      j.walltime_s = static_cast<int>(std::ceil(j.work_s / k_slowest)) + 2;
      j.deadline_s = j.walltime_s / 2.0 + std::round(30 + 50 * u01(rng)) / 10.0;
      j.value = std::round(50 + 50 * u01(rng));
      j.decay_s = 10;
      j.max_price = 10;
      j.best_effort = false;
    } else {
      j.procs = 1 + static_cast<int>(u01(rng) * 2);
      j.work_s = std::round(20 + 20 * u01(rng)) / 10.0;
      j.walltime_s = static_cast<int>(std::ceil(j.work_s / k_slowest)) + 2;
      j.deadline_s = std::round(60 + 60 * u01(rng));
      j.value = std::round(5 + 10 * u01(rng));
      j.decay_s = 60;
      j.max_price = 2;
      j.best_effort = true;
    }
    out.push_back(j);
  }
  std::sort(out.begin(), out.end(), [](const job_spec& a, const job_spec& b) { return a.arrive_s < b.arrive_s; });
  return out;
}

double value_at(const job_spec& j, double submit, double end) {
  const double late = end - (submit + j.deadline_s);
  if (late <= 0) return j.value;
  return std::max(0.0, j.value * (1.0 - late / j.decay_s));
}

// The job's sleep: its work over the speed of the cluster it runs on.
std::string sleeper(double work_s) {
  std::string script = "case \"$SLURMD_NODENAME\" in";
  for (const auto& c : k_clusters) {
    char t[32];
    std::snprintf(t, sizeof t, "%.2f", work_s / c.speed);
    script += " " + c.name + "*) exec /bin/sleep " + t + ";;";
  }
  return script + " esac; exit 3";
}

struct policy_result {
  std::string policy;
  int jobs = 0, completed = 0, refused = 0, missed = 0, over_price = 0, other_end = 0;
  double value = 0, value_max = 0, mean_response_s = 0, setup_s = 0;
  double urgent_value = 0, relaxed_value = 0;
  std::map<std::string, int> per_cluster;
  std::int64_t ledger_total_micro = 0;
  std::size_t ledger_entries = 0;
};

policy_result run_policy(const fb::site& s, const std::string& policy, const std::vector<job_spec>& jobs) {
  policy_result r;
  r.policy = policy;
  const auto t_setup = std::chrono::steady_clock::now();
  fb::broker broker(s, AQS_FAUCETSD_BINARY, policy);
  std::vector<std::unique_ptr<aqs::bench::system>> clusters;
  for (const auto& c : k_clusters) {
    char speed[32], rate[32];
    std::snprintf(speed, sizeof speed, "%.2f", c.speed);
    std::snprintf(rate, sizeof rate, "%.2f", c.rate);
    clusters.push_back(broker.start_cluster(AQS_AQSD_BINARY, AQS_NODE_BINARY, c.name, c.procs,
                                            {"--faucets-speed", speed, "--faucets-rate", rate}, c.name));
    if (c.background_procs > 0) {
      // Load: a long job of the cluster's own users, straight to its aqsd.
      aqs::bench::run_as(s.uid(), s.gid(),
                         {AQS_FSUB_BINARY, "--socket", clusters.back()->socket(), "-n",
                          std::to_string(c.background_procs), "-t", "30:00", "-o", "/dev/null", "-D",
                          s.work().string(), "--wrap", "sleep 1800"});
    }
  }
  auto api = broker.user_client(AQS_FTOKEN_BINARY);
  fb::wait_clusters_up(api, k_clusters.size(), 60s,
                       [](const json& c) { return c.contains("report") && c["report"].value("nodes_up", 0) > 0; });
  std::this_thread::sleep_for(1500ms);  // medium's background job is running and reported
  r.setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_setup).count();

  const std::string work = s.work().string();
  std::map<std::int64_t, std::pair<std::size_t, double>> submitted;  // id -> job index, submit time
  std::set<std::int64_t> ids;
  const double t0 = fb::now_s();
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    fb::sleep_until(t0 + j.arrive_s);
    const json job{{"name", std::string(j.urgent ? "urgent" : "relaxed") + std::to_string(i)},
                   {"argv", {"/bin/sh", "-c", sleeper(j.work_s)}},
                   {"workdir", work},
                   {"stdout", "/dev/null"},
                   {"min_pe", j.procs},
                   {"max_pe", j.procs},
                   {"walltime_s", j.walltime_s}};
    const double at = fb::now_s();
    const json contract{{"deadline", at + j.deadline_s},
                        {"max_price", j.max_price},
                        {"value", j.value},
                        {"decay_s", j.decay_s},
                        {"best_effort", j.best_effort}};
    // No broker plugin (the third argument): the server's policy places it.
    const auto sub = api.submit("auto", job, std::nullopt, contract);
    submitted[sub.id] = {i, at};
    ids.insert(sub.id);
  }
  const json final_jobs = fb::wait_ended(api, ids, 900s);

  // The price each job was placed at: its ledger entry (every cluster has
  // its own owner, and every user's home is a cluster of none of them).
  json ledger;
  ledger = api.call("GET", "/api/v1/ledger?limit=100000");  // root? no: the user's own entries, all of them here
  std::map<std::int64_t, double> price_of;
  for (const auto& e : ledger["entries"]) price_of[e["job_id"].get<std::int64_t>()] = e["price"].get<double>();
  r.ledger_total_micro = ledger.value("total_micro", std::int64_t{-1});
  r.ledger_entries = ledger["entries"].size();

  std::vector<double> response;
  for (const auto& j : final_jobs) {
    const auto it = submitted.find(j.value("id", std::int64_t{0}));
    if (it == submitted.end()) continue;
    const job_spec& spec = jobs[it->second.first];
    const double submit = it->second.second;
    ++r.jobs;
    r.value_max += spec.value;
    const std::string st = j.value("state", "");
    r.per_cluster[j["cluster"].is_string() ? j["cluster"].get<std::string>() : "-"] += 1;
    if (st != "COMPLETED") {
      ++r.missed;
      if (st == "FAILED" && !j["cluster"].is_string()) {
        ++r.refused;
      } else {
        ++r.other_end;
      }
      continue;
    }
    ++r.completed;
    const double end = aqs::bench::iso_seconds(j["end_time"].get<std::string>());
    response.push_back(end - submit);
    if (end > submit + spec.deadline_s) ++r.missed;
    const auto p = price_of.find(j["id"].get<std::int64_t>());
    if (p == price_of.end() || p->second > spec.max_price + 1e-9) {
      ++r.over_price;
      continue;
    }
    const double v = value_at(spec, submit, end);
    r.value += v;
    (spec.urgent ? r.urgent_value : r.relaxed_value) += v;
  }
  r.mean_response_s = aqs::bench::mean(response);
  for (auto& c : clusters) c->stop();
  broker.stop();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  fb::options opts;
  const int usage =
      fb::parse_options(argc, argv, "bench_faucets_contract", {"contract", "earliest-start", "random"}, opts);
  if (usage != 0) return usage;
  const bool quick = opts.quick;
  const auto& policies = opts.policies;
  aqs::bench::stop_on_signals();
  const int n = quick ? 20 : 100;
  const double span = quick ? 15 : 70;
  const auto jobs = workload(n, span);
  int urgent = 0;
  double value_max = 0;
  for (const auto& j : jobs) {
    urgent += j.urgent;
    value_max += j.value;
  }

  int rc = 0;
  json results = json::array();
  try {
    std::vector<std::string> names;
    std::string owners = "cluster portal users\nhome * portal\n";
    for (const auto& c : k_clusters) {
      names.push_back(c.name);
      owners += "cluster " + c.name + " owner-" + c.name + "\n";
    }
    const fb::site s("aqs-fcontract", k_user, names, owners);
    std::printf("Faucets contracts: %zu jobs (seed 35; %d urgent, %zu relaxed), total value %.0f, arriving over %.0f s;\n"
                "clusters fast 8 procs speed 2 rate 3, medium 8 procs speed 1 rate 1 (4 busy), slow 4 procs speed 0.5 "
                "rate 0.4\n\n",
                jobs.size(), urgent, jobs.size() - static_cast<std::size_t>(urgent), value_max, span);
    std::printf("%-15s %5s %6s %8s %7s %7s %9s %12s %9s  %s\n", "policy", "jobs", "value", "urgent", "relaxed",
                "missed", "refused", "over price", "resp s", "jobs on fast/medium/slow (-: none)");
    for (const auto& p : policies) {
      const auto r = run_policy(s, p, jobs);
      auto on = [&](const char* c) { return r.per_cluster.count(c) ? r.per_cluster.at(c) : 0; };
      std::printf("%-15s %5d %6.0f %8.0f %7.0f %7d %9d %12d %9.1f  %d/%d/%d/%d\n", r.policy.c_str(), r.jobs, r.value,
                  r.urgent_value, r.relaxed_value, r.missed, r.refused, r.over_price, r.mean_response_s, on("fast"),
                  on("medium"), on("slow"), on("-"));
      std::fflush(stdout);
      results.push_back({{"policy", r.policy},
                         {"jobs", r.jobs},
                         {"completed", r.completed},
                         {"value_earned", r.value},
                         {"value_urgent", r.urgent_value},
                         {"value_relaxed", r.relaxed_value},
                         {"value_possible", r.value_max},
                         {"deadlines_missed", r.missed},
                         {"refused", r.refused},
                         {"other_end", r.other_end},
                         {"over_price", r.over_price},
                         {"mean_response_s", r.mean_response_s},
                         {"jobs_per_cluster", r.per_cluster},
                         {"ledger_entries", r.ledger_entries},
                         {"ledger_total_micro", r.ledger_total_micro},
                         {"setup_s", r.setup_s},
                         {"workload", {{"jobs", jobs.size()}, {"urgent", urgent}, {"seed", 35}, {"span_s", span}}}});
    }
    aqs::bench::write_results("faucets_contract", results);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_faucets_contract: %s\n", e.what());
    rc = 1;
  }
  return rc;
}
