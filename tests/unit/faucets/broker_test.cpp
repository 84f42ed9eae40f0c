// Unit tests of the broker policies: each one's choice and tie-breaks, eligibility and the registry.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "broker/broker.hpp"

using namespace aqs::faucets;

namespace {

cluster_view cluster(std::string name, std::int64_t procs, std::int64_t free = 0) {
  cluster_view c;
  c.name = std::move(name);
  c.procs_total = c.max_job_procs = procs;
  c.procs_free = free;
  return c;
}

job_ask job(std::int64_t min_pe, std::int64_t max_pe = 0) {
  job_ask j;
  j.min_pe = min_pe;
  j.max_pe = max_pe == 0 ? min_pe : max_pe;
  j.adaptive = max_pe > min_pe;
  return j;
}

std::string chosen(broker& b, const job_ask& j, const std::vector<cluster_view>& cs) {
  auto c = b.choose(j, cs);
  REQUIRE(c.has_value());
  CHECK_FALSE(c->reason.empty());
  CHECK(c->reason.find('\n') == std::string::npos);
  return c->cluster;
}

}  // namespace

TEST_CASE("broker registry: the six policies by name, in order, and an unknown name's error") {
  const std::vector<std::string_view> expected = {"random",         "fastest-cpu", "fastest-queue", "data",
                                                  "earliest-start", "contract"};
  CHECK(broker_names() == expected);
  for (std::string_view n : broker_names()) {
    auto b = make_broker(n);
    REQUIRE(b);
    CHECK(b->name() == n);
    CHECK(b->needs_start_estimates() == (n == "earliest-start" || n == "contract"));
  }
  CHECK_THROWS_WITH_AS(make_broker("cheapest"),
                       "unknown broker policy 'cheapest' (known: random, fastest-cpu, fastest-queue, data, earliest-start, "
                       "contract)",
                       std::invalid_argument);
  CHECK_THROWS_AS(make_broker(""), std::invalid_argument);
  CHECK_THROWS_AS(make_broker("Random"), std::invalid_argument);
}

TEST_CASE("can_ever_run: down, too small and too few GPUs are ineligible") {
  cluster_view c = cluster("a", 64, 64);
  CHECK(can_ever_run(job(64), c));
  CHECK_FALSE(can_ever_run(job(65), c));
  // An adaptive job needs only its minimum.
  CHECK(can_ever_run(job(32, 128), c));
  c.up = false;
  CHECK_FALSE(can_ever_run(job(1), c));
  c.up = true;
  job_ask g = job(4);
  g.gpus = 2;
  CHECK_FALSE(can_ever_run(g, c));  // no GPUs
  c.gpus_total = c.max_job_gpus = 2;
  CHECK(can_ever_run(g, c));
  g.gpus = 3;
  CHECK_FALSE(can_ever_run(g, c));
  // The largest job it could run, not its total, decides.
  c.max_job_procs = 16;
  CHECK_FALSE(can_ever_run(job(32), c));
}

TEST_CASE("every policy passes over ineligible clusters and gives nullopt when none is left") {
  cluster_view down = cluster("a-down", 1024, 1024);
  down.up = false;
  down.speed = 10;
  down.start_in_s = 0;
  cluster_view small = cluster("b-small", 8, 8);
  small.speed = 10;
  small.start_in_s = 0;
  cluster_view no_gpu = cluster("c-nogpu", 1024, 1024);
  no_gpu.speed = 10;
  no_gpu.start_in_s = 0;
  no_gpu.datasets = {"d"};
  cluster_view ok = cluster("z-ok", 64, 0);
  ok.pending_procs = 1000;
  ok.speed = 0.5;
  ok.start_in_s = 5000;
  ok.max_job_gpus = ok.gpus_total = 4;
  job_ask j = job(16);
  j.gpus = 1;
  j.datasets = {"d"};
  for (std::string_view n : broker_names()) {
    CAPTURE(n);
    auto b = make_broker(n, 7);
    for (int i = 0; i < 20; ++i) CHECK(chosen(*b, j, {down, small, no_gpu, ok}) == "z-ok");
    CHECK_FALSE(b->choose(j, std::vector<cluster_view>{down, small, no_gpu}).has_value());
    CHECK_FALSE(b->choose(j, std::vector<cluster_view>{}).has_value());
  }
}

TEST_CASE("random: uniform over the eligible clusters, reproducible from its seed") {
  std::vector<cluster_view> cs = {cluster("a", 64), cluster("b", 64), cluster("c", 64), cluster("d", 8)};
  auto b = make_broker("random", 42);
  std::map<std::string, int> seen;
  const int draws = 3000;
  for (int i = 0; i < draws; ++i) ++seen[chosen(*b, job(16), cs)];
  CHECK(seen.count("d") == 0);
  REQUIRE(seen.size() == 3);
  for (const auto& [name, n] : seen) {
    CAPTURE(name);
    CHECK(n > draws / 3 - 200);
    CHECK(n < draws / 3 + 200);
  }
  // The same seed draws the same sequence.
  auto x = make_broker("random", 9), y = make_broker("random", 9);
  for (int i = 0; i < 50; ++i) CHECK(chosen(*x, job(1), cs) == chosen(*y, job(1), cs));
}

TEST_CASE("fastest-cpu: highest speed; tie: most free processors, then name") {
  cluster_view a = cluster("a", 64, 60), b = cluster("b", 64, 10), c = cluster("c", 64, 30);
  a.speed = 1.0;
  b.speed = 2.0;
  c.speed = 2.0;
  auto p = make_broker("fastest-cpu");
  CHECK(chosen(*p, job(1), {a, b, c}) == "c");  // b and c are fastest; c has more free
  c.procs_free = 10;
  CHECK(chosen(*p, job(1), {c, a, b}) == "b");  // all tied: by name
  b.speed = 1.5;
  CHECK(chosen(*p, job(1), {a, b, c}) == "c");  // speed before free processors
  auto r = p->choose(job(1), std::vector<cluster_view>{a, b, c});
  REQUIRE(r);
  CHECK(r->reason.find("fastest-cpu") == 0);
  CHECK(r->reason.find("speed 2") != std::string::npos);
}

TEST_CASE("fastest-queue: least queued processors per processor; tie: most free + shrinkable, then name") {
  cluster_view a = cluster("a", 100, 0), b = cluster("b", 1000, 0), c = cluster("c", 10, 0);
  a.pending_procs = 50;   // 0.5 per processor
  b.pending_procs = 200;  // 0.2
  c.pending_procs = 1;    // 0.1
  auto p = make_broker("fastest-queue");
  CHECK(chosen(*p, job(1), {a, b, c}) == "c");
  c.pending_procs = 2;  // 0.2: tied with b exactly
  b.procs_free = 5;
  c.procs_free = 3;
  c.shrinkable = 3;  // 6 > 5
  CHECK(chosen(*p, job(1), {a, b, c}) == "c");
  c.shrinkable = 2;  // 5 == 5: by name
  CHECK(chosen(*p, job(1), {c, b, a}) == "b");
  // An empty queue beats any other, whatever the free processors.
  a.pending_procs = 0;
  CHECK(chosen(*p, job(1), {a, b, c}) == "a");
  // A cluster reporting no processors at all counts as the longest queue.
  cluster_view z = cluster("0-none", 0, 0);
  z.max_job_procs = 64;
  CHECK(chosen(*p, job(1), {z, b}) == "b");
}

TEST_CASE("data: most of the job's data sets held; tie: fastest-queue") {
  cluster_view a = cluster("a", 100, 0), b = cluster("b", 100, 0), c = cluster("c", 100, 100);
  a.datasets = {"genome", "climate"};
  b.datasets = {"genome", "climate", "images"};
  c.datasets = {};
  a.pending_procs = 10;
  b.pending_procs = 500;
  job_ask j = job(4);
  j.datasets = {"genome", "climate", "genome"};  // a duplicate counts once
  auto p = make_broker("data");
  CHECK(chosen(*p, j, {a, b, c}) == "a");  // a and b hold both; a's queue is shorter
  j.datasets = {"images", "genome"};
  CHECK(chosen(*p, j, {a, b, c}) == "b");  // only b holds both, despite its queue
  j.datasets = {};
  CHECK(chosen(*p, j, {a, b, c}) == "c");  // nothing to hold: fastest-queue
  auto r = p->choose(j, std::vector<cluster_view>{a, b, c});
  REQUIRE(r);
  CHECK(r->reason.find("data: holds 0 of the job's 0 data sets") == 0);
}

TEST_CASE("earliest-start: least start + walltime / speed, so a busy fast cluster can beat an idle slow one") {
  auto p = make_broker("earliest-start");
  cluster_view fast = cluster("fast", 64, 0), slow = cluster("slow", 64, 64);
  fast.speed = 4.0;
  fast.start_in_s = 1000;  // busy: done at 1000 + 3600 / 4 = 1900
  slow.speed = 1.0;
  slow.start_in_s = 0;  // idle: done at 3600
  job_ask j = job(8);
  j.walltime_s = 3600;
  CHECK(chosen(*p, j, {slow, fast}) == "fast");
  // When the fast one's wait outweighs its speed, the idle slow one wins.
  fast.start_in_s = 3000;  // 3900 > 3600
  CHECK(chosen(*p, j, {fast, slow}) == "slow");
  // A short job: the wait dominates.
  j.walltime_s = 60;
  fast.start_in_s = 100;  // 115 > 60
  CHECK(chosen(*p, j, {fast, slow}) == "slow");
  auto r = p->choose(j, std::vector<cluster_view>{fast, slow});
  REQUIRE(r);
  CHECK(r->reason.find("earliest-start: starts in 0 s") == 0);
}

TEST_CASE("earliest-start: clusters with no estimate are last; tie: start_in_s, then name") {
  auto p = make_broker("earliest-start");
  job_ask j = job(1);
  j.walltime_s = 100;
  cluster_view none = cluster("a-none", 64, 64);
  none.speed = 100;  // fastest and idle, but it gave no estimate
  cluster_view x = cluster("x", 64, 0), y = cluster("y", 64, 0);
  x.start_in_s = 100;  // 100 + 100 / 2 = 150
  x.speed = 2;
  y.start_in_s = 50;  // 50 + 100 / 1 = 150: a tie, y starts first
  y.speed = 1;
  CHECK(chosen(*p, j, {none, x, y}) == "y");
  y.start_in_s = 100;
  y.speed = 2;  // a full tie: by name
  CHECK(chosen(*p, j, {y, none, x}) == "x");
  // With no estimate anywhere: by name, and it says so.
  cluster_view b = cluster("b-none", 64, 64);
  CHECK(chosen(*p, j, {b, none}) == "a-none");
  auto r = p->choose(j, std::vector<cluster_view>{b, none});
  REQUIRE(r);
  CHECK(r->reason.find("no cluster gave a start estimate") != std::string::npos);
}

// ---- contract ---------------------------------------------------------

namespace {

cluster_view bidder(std::string name, double completion, double price) {
  cluster_view c = cluster(std::move(name), 16, 16);
  c.start_in_s = 0;
  c.completion_in_s = completion;
  c.price = price;
  return c;
}

job_ask with_contract(double deadline, double max_price, double value, double decay = 0, bool best_effort = false) {
  job_ask j = job(4);
  j.walltime_s = 60;
  j.contract = contract_terms{deadline, max_price, value, decay, best_effort};
  return j;
}

}  // namespace

TEST_CASE("contract_value: full by the deadline, linear decay after it, never below zero") {
  const contract_terms t{100, 1, 50, 20, false};
  CHECK(contract_value(t, 0) == 50);
  CHECK(contract_value(t, 100) == 50);
  CHECK(contract_value(t, 110) == doctest::Approx(25));
  CHECK(contract_value(t, 120) == 0);
  CHECK(contract_value(t, 500) == 0);
  const contract_terms cliff{100, 1, 50, 0, false};
  CHECK(contract_value(cliff, 100) == 50);
  CHECK(contract_value(cliff, 100.001) == 0);
}

TEST_CASE("contract: among bids that meet the deadline within the price, the cheapest wins; then the earliest") {
  auto b = make_broker("contract");
  const std::vector<cluster_view> cs = {bidder("fast", 30, 3.0), bidder("mid", 60, 1.5), bidder("slow", 90, 0.5)};
  // All three meet a 100 s deadline: the cheapest (slow) earns the same value for less.
  auto c = b->choose(with_contract(100, 5, 10), cs);
  REQUIRE(c);
  CHECK_FALSE(c->refused);
  CHECK(c->cluster == "slow");
  CHECK(c->reason.find("by the deadline") != std::string::npos);
  // A 70 s deadline leaves fast and mid: mid is cheaper.
  CHECK(chosen(*b, with_contract(70, 5, 10), cs) == "mid");
  // A 40 s deadline: only fast.
  CHECK(chosen(*b, with_contract(40, 5, 10), cs) == "fast");
  // The same price: the earlier completion.
  CHECK(chosen(*b, with_contract(100, 5, 10), {bidder("a", 80, 1), bidder("b", 50, 1)}) == "b");
  // Everything equal: by name.
  CHECK(chosen(*b, with_contract(100, 5, 10), {bidder("b", 50, 1), bidder("a", 50, 1)}) == "a");
}

TEST_CASE("contract: a bid over the maximum price is never taken, even when only it meets the deadline") {
  auto b = make_broker("contract");
  const std::vector<cluster_view> cs = {bidder("fast", 30, 3.0), bidder("slow", 90, 0.5)};
  // fast would meet a 40 s deadline but costs 3 > 2: refused (no best effort).
  auto c = b->choose(with_contract(40, 2, 10), cs);
  REQUIRE(c);
  CHECK(c->refused);
  CHECK(c->cluster.empty());
  CHECK(c->reason == "contract: no cluster can finish it by its deadline (in 40 s); the earliest within the price is "
                     "slow, done in about 90 s");
  // Nothing within the price at all.
  c = b->choose(with_contract(100, 0.1, 10), cs);
  REQUIRE(c);
  CHECK(c->refused);
  CHECK(c->reason == "contract: no cluster bids within the maximum price 0.1 credits per processor-second (cheapest: "
                     "slow at 0.5)");
}

TEST_CASE("contract: best effort takes the most value left after the deadline, else the earliest completion") {
  auto b = make_broker("contract");
  const std::vector<cluster_view> cs = {bidder("mid", 60, 1.0), bidder("slow", 90, 0.5)};
  // Deadline 40, decay 100: mid keeps 80 %, slow 50 %.
  auto c = b->choose(with_contract(40, 5, 10, 100, true), cs);
  REQUIRE(c);
  CHECK_FALSE(c->refused);
  CHECK(c->cluster == "mid");
  CHECK(c->reason.find("best effort") != std::string::npos);
  // No decay: every late bid is worth 0, so the earliest.
  CHECK(chosen(*b, with_contract(40, 5, 10, 0, true), cs) == "mid");
  // Best effort does not lift the price: over it, still refused.
  c = b->choose(with_contract(40, 0.1, 10, 100, true), cs);
  REQUIRE(c);
  CHECK(c->refused);
}

TEST_CASE("contract: without bids it waits (nullopt); a job without a contract is placed as earliest-start") {
  auto b = make_broker("contract");
  cluster_view silent = cluster("silent", 16, 16);  // no estimate, no price
  CHECK_FALSE(b->choose(with_contract(100, 5, 10), std::vector<cluster_view>{silent}).has_value());
  // Without a contract: earliest-start's choice, with its reason after "contract: ".
  cluster_view early = bidder("early", 10, 9), late = bidder("late", 10, 0.1);
  late.start_in_s = 50;
  early.start_in_s = 0;
  auto c = b->choose(job(4), std::vector<cluster_view>{late, early});
  REQUIRE(c);
  CHECK(c->cluster == "early");
  CHECK(c->reason.starts_with("contract: no contract given, placed as earliest-start: "));
  // A cluster that cannot ever run the job is no bidder.
  cluster_view tiny = bidder("tiny", 1, 0.01);
  tiny.max_job_procs = 2;
  CHECK(chosen(*b, with_contract(100, 5, 10), {tiny, bidder("big", 50, 1)}) == "big");
}
