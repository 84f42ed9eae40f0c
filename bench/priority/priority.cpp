// bench_priority: accounting's cost per scheduling decision with a long queue and many associations.
//
// A tree of accounts (root, then `accounts` accounts of `users_per_account`
// user associations each) with random decayed usage and a few limits; a
// cluster of 1,024 16-processor nodes, full, with `queued` jobs waiting, each
// of a random association. Each round, as aqsd would before a decision:
// usage moves on, fair share is computed over the tree, every queued job's
// multifactor priority is computed and given to the scheduler (most change:
// the age factor moves every second), then every queued job's limits are
// checked against a tally of the running jobs. Each step is timed alone.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_requests.hpp"
#include "bench_results.hpp"
#include "core/accounts.hpp"
#include "core/fairshare.hpp"
#include "core/limits.hpp"
#include "core/priority.hpp"
#include "core/scheduler.hpp"

namespace core = aqs::core;
using clk = std::chrono::steady_clock;

namespace {

struct stats {
  double mean = 0, p50 = 0, max = 0;
};

stats summarise(std::vector<double> v) {
  stats s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  std::sort(v.begin(), v.end());
  s.p50 = v[v.size() / 2];
  s.max = v.back();
  return s;
}

double ms_since(clk::time_point t0) { return std::chrono::duration<double, std::milli>(clk::now() - t0).count(); }

struct row {
  std::size_t queued, associations;
  stats fair, gather, prio, apply, limits, total;
  double one_job_us;  // a new job's priority, its place in the queue and its limit check
};

row measure(std::size_t queued, std::size_t accounts, std::size_t users_per_account, int rounds) {
  std::mt19937_64 rng(42);
  core::account_tree t;
  core::account root;
  root.name = "root";
  t.accounts.push_back(root);
  for (std::size_t a = 0; a < accounts; ++a) {
    core::account acc;
    acc.name = "acct" + std::to_string(a);
    acc.parent = "root";
    acc.shares = 1 + static_cast<std::uint32_t>(rng() % 100);
    if (a % 10 == 0) acc.lim.grp_cpus = 4096;
    t.accounts.push_back(acc);
    for (std::size_t u = 0; u < users_per_account; ++u) {
      core::user_association ua;
      ua.user = "user" + std::to_string(a * users_per_account + u);
      ua.account = acc.name;
      ua.shares = 1 + static_cast<std::uint32_t>(rng() % 10);
      if (u % 4 == 0) ua.lim.max_jobs = 50;
      t.associations.push_back(ua);
    }
  }
  core::qos normal;
  normal.name = "normal";
  normal.lim.max_cpus_per_user = 1024;
  t.qos_list.push_back(normal);
  const core::account_index idx(t);
  const std::size_t nassoc = t.associations.size();

  constexpr std::size_t k_nodes = 1024, k_per_node = 16;
  core::scheduler s(core::cluster::uniform(k_nodes, k_per_node), core::make_strategy("easy"));
  double now = 0;
  core::job_id next = 1;
  std::vector<std::size_t> assoc_of_job(1, 0);
  std::uniform_int_distribution<std::size_t> pick(0, nassoc - 1);
  core::limit_tally tally(idx);
  for (std::size_t n = 0; n < k_nodes; ++n) {
    s.apply(core::event::arrival(aqs::bench::rigid_request(next++, k_per_node, now)));
    assoc_of_job.push_back(pick(rng));
  }
  s.decide(now);
  for (const auto& [end, id] : s.holding_by_end()) {
    const std::size_t a = assoc_of_job[id];
    tally.add_running({t.associations[a].user, a, 0, s.get(id).size(), 3600});
  }
  for (std::size_t q = 0; q < queued; ++q) {
    now += 0.01;
    s.apply(core::event::arrival(aqs::bench::rigid_request(next++, k_per_node, now)));
    assoc_of_job.push_back(pick(rng));
  }
  std::vector<double> usage(nassoc);
  std::exponential_distribution<double> use(1e-6);
  for (double& u : usage) u = use(rng);

  core::priority_weights w;
  w.age = 1000;
  w.fairshare = 10000;
  w.job_size = 100;
  w.qos = 1000;
  const core::priority_context ctx{k_nodes * k_per_node, 0, 1};

  std::vector<double> fair_ms, gather_ms, prio_ms, apply_ms, limits_ms, total_ms;
  std::vector<core::priority_input> in;
  in.reserve(queued);
  for (int r = 0; r < rounds; ++r) {
    now += 60;
    for (std::size_t k = 0; k < 20; ++k) usage[pick(rng)] += 1e5;  // some associations ran meanwhile
    const auto t0 = clk::now();
    const core::fair_share_result fs = core::fair_share(idx, usage);
    fair_ms.push_back(ms_since(t0));

    const auto tg = clk::now();
    in.clear();
    for (const core::queue_key& k : s.queue()) {
      core::priority_input p = core::priority_input_of(k.id, s.get(k.id).req, fs.assoc_factor[assoc_of_job[k.id]]);
      p.qos_priority = 1;
      in.push_back(p);
    }
    gather_ms.push_back(ms_since(tg));
    const auto t1 = clk::now();
    const std::vector<core::job_priority> prio = core::compute_priorities(in, ctx, w, now);
    prio_ms.push_back(ms_since(t1));

    const auto t2 = clk::now();
    core::apply_priorities(s, prio);
    apply_ms.push_back(ms_since(t2));

    const auto t3 = clk::now();
    std::size_t held = 0;
    for (const core::queue_key& k : s.queue()) {
      const std::size_t a = assoc_of_job[k.id];
      const core::limit_job lj{t.associations[a].user, a, 0, s.get(k.id).req.min_pe, 3600};
      held += core::check_start(tally, lj) != core::limit_reason::none;
    }
    limits_ms.push_back(ms_since(t3));
    total_ms.push_back(fair_ms.back() + gather_ms.back() + prio_ms.back() + apply_ms.back() + limits_ms.back());
    if (held == static_cast<std::size_t>(-1)) std::abort();  // keeps the loop's work observable
  }
  // What aqsd does per arriving job between full recomputations: its own
  // factors (fair share of its association as last computed), its place in
  // the queue, its limit check.
  const core::fair_share_result fs = core::fair_share(idx, usage);
  constexpr int k_arrivals = 2000;
  std::size_t held = 0;
  const auto ta = clk::now();
  for (int k = 0; k < k_arrivals; ++k) {
    now += 0.01;
    const core::job_id id = next++;
    const std::size_t a = pick(rng);
    s.apply(core::event::arrival(aqs::bench::rigid_request(id, k_per_node, now)));
    core::priority_input p;
    p.id = id;
    p.submit_time = now;
    p.size = k_per_node;
    p.fairshare = fs.assoc_factor[a];
    p.qos_priority = 1;
    s.set_priority(id, core::priority_value(core::factors_of(p, ctx, w, now), w, 0));
    held += core::check_start(tally, core::limit_job{t.associations[a].user, a, 0, k_per_node, 3600}) !=
            core::limit_reason::none;
  }
  const double one_job_us = std::chrono::duration<double, std::micro>(clk::now() - ta).count() / k_arrivals;
  if (held == static_cast<std::size_t>(-1)) std::abort();
  return {queued,
          nassoc,
          summarise(fair_ms),
          summarise(gather_ms),
          summarise(prio_ms),
          summarise(apply_ms),
          summarise(limits_ms),
          summarise(total_ms),
          one_job_us};
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const char* env = std::getenv("AQS_BENCH_RESULTS");
  const std::string results = env && *env ? env : "bench/results";
  struct size {
    std::size_t queued, accounts, users;
  };
  const std::vector<size> sizes = quick ? std::vector<size>{{10000, 10, 10}}
                                        : std::vector<size>{{10000, 10, 10}, {100000, 50, 20}};
  const int rounds = quick ? 5 : 20;
  fmt::print("{:>8} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "queued", "assocs", "fshare ms",
             "gather ms", "prio ms", "requeue ms", "limits ms", "full ms", "full max", "1 job us");
  std::string json = "[";
  for (const size& z : sizes) {
    const row r = measure(z.queued, z.accounts, z.users, rounds);
    fmt::print("{:>8} {:>6} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.2f}\n", r.queued,
               r.associations, r.fair.mean, r.gather.mean, r.prio.mean, r.apply.mean, r.limits.mean, r.total.mean,
               r.total.max, r.one_job_us);
    std::fflush(stdout);
    json += fmt::format(
        "{}{{\"queued\":{},\"associations\":{},\"rounds\":{},\"fairshare_ms_mean\":{:.4f},\"gather_ms_mean\":{:.4f},"
        "\"priority_ms_mean\":{:.4f},\"requeue_ms_mean\":{:.4f},\"limits_ms_mean\":{:.4f},\"full_ms_mean\":{:.4f},"
        "\"full_ms_p50\":{:.4f},\"full_ms_max\":{:.4f},\"one_job_us\":{:.3f}}}",
        json.size() > 1 ? "," : "", r.queued, r.associations, rounds, r.fair.mean, r.gather.mean, r.prio.mean,
        r.apply.mean, r.limits.mean, r.total.mean, r.total.p50, r.total.max, r.one_job_us);
  }
  json += "]\n";
  return aqs::bench::write_results(results, "priority", json);
}
