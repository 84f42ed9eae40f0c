// bench_reservation_cost: the cost of advance reservations per decision.
//
// A cluster of 64 nodes of 32 processors, filled by running rigid jobs of
// 1-64 processors (an hour long), `queued` more waiting; then R
// reservations of one node each, half of them active (their own jobs
// queued too) and half starting later (backfilled around). Each round a
// job ends and decide() runs: with reservations the core makes one
// strategy run per active reservation, one for the rest of the machine and
// one per future reservation (core/reservation.hpp). Timed per decision,
// for easy and equipartition; the rounds keep the queue's length.
#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "bench_requests.hpp"
#include "bench_results.hpp"
#include "core/reservation.hpp"
#include "core/scheduler.hpp"

namespace core = aqs::core;
using clk = std::chrono::steady_clock;

namespace {

constexpr std::size_t k_nodes = 64, k_per_node = 32;

struct row {
  std::string policy;
  std::size_t queued = 0, reservations = 0;
  double p50_ms = 0, max_ms = 0;
};

row measure(const std::string& policy, std::size_t queued, std::size_t nresv, int rounds) {
  core::scheduler s(core::cluster::uniform(k_nodes, k_per_node), core::make_strategy(policy));
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::size_t> size(1, 64);
  core::job_id next = 1;
  double now = 0;
  // Reservations on the last nodes: the first half active from now, the
  // rest starting in an hour.
  std::vector<core::advance_reservation> rs;
  for (std::size_t i = 0; i < nresv; ++i) {
    core::advance_reservation r;
    r.name = "r" + std::to_string(i);
    const std::size_t node = k_nodes - 1 - i;
    r.procs = core::processor_set::range(k_nodes * k_per_node, node * k_per_node, (node + 1) * k_per_node);
    r.start = i % 2 == 0 ? 0 : 3600;
    r.end = r.start + 7200;
    rs.push_back(std::move(r));
  }
  s.set_reservations(rs);
  // Fill, then queue.
  for (std::size_t n = 0; n < queued * 2; ++n) {
    core::job_request r = aqs::bench::rigid_request(next++, size(rng), now);
    if (nresv > 0 && n % 10 == 0) r.reservation = "r" + std::to_string((n / 10) % nresv);
    s.apply(core::event::arrival(r));
  }
  (void)s.decide(now);
  std::vector<double> ms;
  for (int i = 0; i < rounds; ++i) {
    now += 1;
    // A running job ends and one arrives.
    const auto& holding = s.holding_by_end();
    if (!holding.empty()) s.apply(core::event::completion(holding.begin()->second));
    s.apply(core::event::arrival(aqs::bench::rigid_request(next++, size(rng), now)));
    const auto t0 = clk::now();
    (void)s.decide(now);
    ms.push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {policy, s.queue().size(), nresv, ms[ms.size() / 2], ms.back()};
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const char* env = std::getenv("AQS_BENCH_RESULTS");
  const std::string results = env && *env ? env : "bench/results";
  const int rounds = quick ? 20 : 100;
  std::vector<row> rows;
  fmt::print("{:<14} {:>8} {:>13} {:>12} {:>12}\n", "policy", "queued", "reservations", "p50 ms", "max ms");
  for (const std::string policy : {"easy", "equipartition"}) {
    for (std::size_t nresv : {0, 1, 4, 16, 32}) {
      for (std::size_t queued : {1000, 10000}) {
        if (quick && queued > 1000) continue;
        const row r = measure(policy, queued, nresv, rounds);
        fmt::print("{:<14} {:>8} {:>13} {:>12.3f} {:>12.3f}\n", r.policy, r.queued, r.reservations, r.p50_ms, r.max_ms);
        rows.push_back(r);
      }
    }
  }
  std::string json = "{\"rows\":[";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row& r = rows[i];
    json += fmt::format("{}{{\"policy\":\"{}\",\"queued\":{},\"reservations\":{},\"p50_ms\":{:.4f},\"max_ms\":{:.4f}}}",
                        i ? "," : "", r.policy, r.queued, r.reservations, r.p50_ms, r.max_ms);
  }
  json += "]}\n";
  return aqs::bench::write_results(results, "reservation_cost", json);
}
