// Property tests: thousands of seeded random event sequences, invariants checked after every decision.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/scheduler.hpp"

using namespace aqs::core;

namespace {

// Holds after every decide(): no processor in two jobs, the scheduler's own
// sets agree with the jobs, sizes within bounds, decisions well-formed.
void check_always(const scheduler& s, const std::vector<decision>& ds) {
  processor_set seen(s.machine().size());
  std::size_t holding = 0;
  for (const auto& [end, id] : s.holding_by_end()) {
    const job& j = s.get(id);
    processor_set mine = j.procs | j.target;
    REQUIRE_MESSAGE(!mine.intersects(seen), "job ", id, " shares a processor");
    seen |= mine;
    ++holding;
    REQUIRE(holds_processors(j.state));
    REQUIRE(j.nprocs == j.procs.count());
    REQUIRE(j.ntarget == j.target.count());
    if (!j.req.adaptive) {
      REQUIRE(j.size() == j.req.min_pe);
      REQUIRE(j.state != job_state::resizing);
    }
    if (j.state == job_state::resizing) {
      REQUIRE(j.req.adaptive);
      // A resize only ever adds to or only removes from the held map.
      REQUIRE((j.target.is_subset_of(j.procs) || j.procs.is_subset_of(j.target)));
    }
  }
  REQUIRE(seen == s.held());
  REQUIRE(s.reserved().is_subset_of(s.held()));
  REQUIRE(s.free_count() == (s.usable() - s.held()).count());
  REQUIRE(s.held_count() == s.held().count());
  REQUIRE(s.reserved_count() == s.reserved().count());
  REQUIRE(s.reserved_usable_count() == s.reserved().count_common(s.usable()));
  REQUIRE(s.usable_count() == s.usable().count());
  for (const decision& d : ds) {
    if (d.what != decision::kind::resize) REQUIRE(d.ranks_moved == 0);
    if (d.what == decision::kind::start) {
      const job& j = s.get(d.job);
      REQUIRE(d.to.count() >= j.req.min_pe);
      REQUIRE(d.to.count() <= j.req.max_pe);
      REQUIRE(d.to.is_subset_of(s.usable()));
    }
    if (d.what == decision::kind::resize) {
      const job& j = s.get(d.job);
      REQUIRE(d.to.count() >= j.req.min_pe);
      REQUIRE(d.to.count() <= j.req.max_pe);
      REQUIRE(d.ranks_moved == (d.from - d.to).count());
      // Fewest ranks moved: a shrink moves exactly the ranks it removes, a grow none.
      REQUIRE(d.ranks_moved == (d.to.count() < d.from.count() ? d.from.count() - d.to.count() : 0));
      // A grow only onto processors of UP nodes; a shrink gives up a
      // processor off them only once it has given up all those on them.
      REQUIRE((d.to - d.from).is_subset_of(s.usable()));
      if ((d.from - d.to).intersects(s.machine().procs_in(node_state::drained))) {
        REQUIRE_FALSE(d.to.intersects(s.usable()));
      }
    }
  }
}

// Holds at every decision under equipartition: its plan for now asks for no
// more processors on UP nodes than there are to hand out. A job keeps what
// it holds on drained nodes up to its planned size; the rest of that size,
// and every start, must come from free processors on UP nodes, vacated ones
// there, or what resizable jobs hold there.
void check_plan_fits(const scheduler& s, double now) {
  if (s.policy().name() != "equipartition") return;
  plan p = s.policy().schedule(s, now);
  std::size_t supply = s.free_count() + s.reserved_usable_count(), demand = 0;
  for (const plan::sized& st : p.starts) demand += st.procs;
  for (job_id id : s.adaptive_holding()) {
    const job& j = s.get(id);
    if (!scheduler::resizable(j)) continue;
    const processor_set& map = j.state == job_state::resizing ? j.target : j.procs;
    const std::size_t on_up = map.count_common(s.usable());
    const std::size_t pinned = scheduler::planning_size(j) - on_up;
    std::size_t size = scheduler::planning_size(j);
    for (const plan::sized& t : p.targets) {
      if (t.job == id) size = t.procs;
    }
    supply += on_up;
    demand += size - std::min(size, pinned);
  }
  REQUIRE_MESSAGE(demand <= supply, "plan asks for ", demand, " processors on UP nodes, ", supply, " to give");
}

// Holds once every resize has been acknowledged (the settled state). Only
// processors on UP nodes count as idle or as what a shrink can hand over: a
// job keeps those it holds on drained nodes (equipartition, policies.hpp).
void check_settled(const scheduler& s, double now) {
  // Rigid strategies never resize, so a change request is not honoured there.
  if (s.policy().name() != "equipartition") return;
  // The plan is a fixed point: once the resizes it asked for are done, it
  // asks for nothing more. A plan counting processors no one can be given
  // (on drained nodes) asks for starts and grows that cannot happen.
  plan again = s.policy().schedule(s, now);
  REQUIRE(again.starts.empty());
  REQUIRE(again.targets.empty());
  std::size_t shrinkable = 0;
  std::size_t min_extra = SIZE_MAX, max_extra = 0, min_pinned_extra = SIZE_MAX;
  bool below_max = false;
  for (job_id id : s.adaptive_holding()) {
    const job& j = s.get(id);
    REQUIRE(j.state != job_state::resizing);
    if (!scheduler::resizable(j)) continue;
    REQUIRE(j.size() >= j.req.min_pe);
    REQUIRE(j.size() <= j.req.max_pe);
    const std::size_t on_up = j.procs.count_common(s.usable());
    const std::size_t pinned = j.size() - on_up;
    REQUIRE(s.pinned_count(j) == pinned);
    const std::size_t extra = j.size() - j.req.min_pe;
    shrinkable += std::min(extra, on_up);
    if (j.size() < j.req.max_pe) {
      below_max = true;
      if (pinned > j.req.min_pe && j.size() == pinned) {
        // Held at its floor by what it keeps on drained nodes: above the level.
        min_pinned_extra = std::min(min_pinned_extra, extra);
      } else {
        min_extra = std::min(min_extra, extra);
        max_extra = std::max(max_extra, extra);
      }
    }
  }
  // Unsaturated adaptive jobs' extras above their minimum differ by at most
  // one (water-filling), except that a job held at its floor by what it keeps
  // on drained nodes may be above the others.
  if (below_max && min_extra != SIZE_MAX) {
    std::size_t lowest = std::min(min_extra, min_pinned_extra);
    REQUIRE_MESSAGE(max_extra - lowest <= 1, "extras ", lowest, "..", max_extra);
  }
  // No idle processor while an adaptive job is below its maximum ...
  if (s.free_count() > 0) REQUIRE_FALSE(below_max);
  // ... or while the head's minimum fits (shrinking adaptive jobs if needed).
  for (const queue_key& k : s.queue()) {
    const job& head = s.get(k.id);
    if (head.req.min_pe > s.usable_count()) continue;  // can never run: passed over
    REQUIRE(head.req.min_pe > s.free_count() + shrinkable);
    break;
  }
}

struct random_run {
  std::mt19937_64 rng;
  explicit random_run(std::uint64_t seed) : rng(seed) {}
  std::size_t uniform(std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(rng); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng); }
};

// One random sequence of events against one policy; acks come at once, but
// some resizes time out instead.
void run_sequence(std::uint64_t seed, std::string_view policy) {
  random_run r(seed);
  const std::size_t nodes = r.uniform(1, 4), per_node = r.uniform(1, 8);
  scheduler s(cluster::uniform(nodes, per_node), make_strategy(policy));
  const std::size_t total = nodes * per_node;
  job_id next = 1;
  double now = 0;
  std::vector<decision> ds;
  auto settle = [&](std::vector<decision> d) {
    // Deliver every resize's outcome and decide again, until nothing is in flight.
    for (int round = 0; round < 100; ++round) {
      check_always(s, d);
      check_plan_fits(s, now);
      std::vector<job_id> resizing;
      for (const auto& [end, id] : s.holding_by_end()) {
        if (s.get(id).state == job_state::resizing) resizing.push_back(id);
      }
      if (resizing.empty()) return;
      for (job_id id : resizing) {
        s.apply(event::on_job(r.chance(0.05) ? event::kind::resize_timeout : event::kind::resize_ack, id));
      }
      d = s.decide(now);
    }
    FAIL("resizes did not settle");
  };
  for (int step = 0; step < 60; ++step) {
    now += static_cast<double>(r.uniform(0, 5));
    std::size_t what = r.uniform(0, 99);
    std::vector<job_id> holding, queued;
    for (const auto& [end, id] : s.holding_by_end()) holding.push_back(id);
    for (const auto& k : s.queue()) queued.push_back(k.id);
    std::sort(holding.begin(), holding.end());
    if (what < 40 || (holding.empty() && queued.empty())) {
      job_request q;
      q.id = next++;
      q.user = "u" + std::to_string(r.uniform(0, 3));
      q.adaptive = policy == "equipartition" ? r.chance(0.6) : r.chance(0.2);
      q.min_pe = r.uniform(1, total);
      q.max_pe = q.adaptive ? r.uniform(q.min_pe, total) : q.min_pe;
      q.walltime = static_cast<double>(r.uniform(1, 50));
      q.submit_time = now;
      settle(s.handle(event::arrival(q), now));
    } else if (what < 75 && !holding.empty()) {
      const job& j = s.get(holding[r.uniform(0, holding.size() - 1)]);
      // A suspended job cannot complete, but it can be cancelled.
      job_state end = j.state == job_state::suspended ? job_state::cancelled : job_state::completed;
      settle(s.handle(event::completion(j.req.id, end), now));
    } else if (what < 80 && !queued.empty()) {
      settle(s.handle(event::completion(queued[r.uniform(0, queued.size() - 1)], job_state::cancelled), now));
    } else if (what < 88 && !holding.empty()) {
      const job& j = s.get(holding[r.uniform(0, holding.size() - 1)]);
      if (j.req.adaptive && j.state == job_state::running) {
        // New bounds that the job's current size still satisfies from below,
        // so the minimum never exceeds what is there to give.
        std::size_t min = r.uniform(1, j.size());
        settle(s.handle(event::change(j.req.id, min, r.uniform(min, total)), now));
      }
    } else if (what < 92 && !holding.empty()) {
      const job& j = s.get(holding[r.uniform(0, holding.size() - 1)]);
      if (j.state == job_state::running) {
        settle(s.handle(event::on_job(event::kind::suspend, j.req.id), now));
      } else if (j.state == job_state::suspended) {
        settle(s.handle(event::on_job(event::kind::resume, j.req.id), now));
      }
    } else {
      // Nodes go down and come back, and are drained and undrained, so jobs
      // run on drained nodes, shrink and grow around them.
      std::size_t n = r.uniform(0, nodes - 1);
      event::kind k = event::kind::node_up;
      switch (s.machine().at(n).state) {
        case node_state::up: k = r.chance(0.6) ? event::kind::node_drain : event::kind::node_down; break;
        case node_state::drained: k = r.chance(0.7) ? event::kind::node_up : event::kind::node_down; break;
        case node_state::down: k = event::kind::node_up; break;
      }
      settle(s.handle(event::on_node(k, n), now));
    }
    check_settled(s, now);
  }
}

}  // namespace

TEST_CASE("random event sequences keep every invariant under every policy (seeded)") {
  for (std::string_view policy : {"fcfs", "easy", "equipartition"}) {
    for (std::uint64_t seed = 1; seed <= 1500; ++seed) {
      CAPTURE(policy);
      CAPTURE(seed);
      run_sequence(seed, policy);
    }
  }
}

TEST_CASE("under easy with exact estimates a backfilled job never delays the head's reservation") {
  for (std::uint64_t seed = 1; seed <= 1500; ++seed) {
    CAPTURE(seed);
    random_run r(seed);
    const std::size_t procs = r.uniform(2, 32);
    scheduler s(cluster::uniform(1, procs), make_strategy("easy"));
    // Arrivals at random times; each job runs exactly its estimate.
    std::multimap<double, job_request> arrivals;
    double t = 0;
    const int n = static_cast<int>(r.uniform(5, 40));
    for (int i = 1; i <= n; ++i) {
      t += static_cast<double>(r.uniform(0, 20));
      job_request q;
      q.id = static_cast<job_id>(i);
      q.min_pe = q.max_pe = r.uniform(1, procs);
      q.walltime = static_cast<double>(r.uniform(1, 100));
      q.submit_time = t;
      arrivals.emplace(t, q);
    }
    std::multimap<double, job_id> ends;
    std::map<job_id, double> promised;  // the first reservation each job got as head
    std::size_t started = 0;
    while (!arrivals.empty() || !ends.empty()) {
      double now = std::min(arrivals.empty() ? INFINITY : arrivals.begin()->first,
                            ends.empty() ? INFINITY : ends.begin()->first);
      while (!ends.empty() && ends.begin()->first == now) {
        s.apply(event::completion(ends.begin()->second));
        ends.erase(ends.begin());
      }
      while (!arrivals.empty() && arrivals.begin()->first == now) {
        s.apply(event::arrival(arrivals.begin()->second));
        arrivals.erase(arrivals.begin());
      }
      for (const decision& d : s.decide(now)) {
        REQUIRE(d.what == decision::kind::start);
        ++started;
        auto p = promised.find(d.job);
        if (p != promised.end()) REQUIRE_MESSAGE(now <= p->second + 1e-9, "job ", d.job, " promised ", p->second);
        ends.emplace(now + s.get(d.job).req.walltime, d.job);
      }
      if (auto res = s.reservation()) promised.emplace(res->job, res->time);
    }
    REQUIRE(started == static_cast<std::size_t>(n));
  }
}
