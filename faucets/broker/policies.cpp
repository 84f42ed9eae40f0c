// policies: random, fastest-cpu, fastest-queue, data, earliest-start and contract, each a ranking of the eligible clusters.
#include "broker/policies.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace aqs::faucets::policies {

namespace {

// A short decimal for a reason line: 2, 0.5, 1.25, 3600.
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string n_eligible(std::size_t n) {
  return std::to_string(n) + (n == 1 ? " eligible cluster" : " eligible clusters");
}

std::vector<const cluster_view*> eligible(const job_ask& job, std::span<const cluster_view> clusters) {
  std::vector<const cluster_view*> out;
  for (const cluster_view& c : clusters) {
    if (can_ever_run(job, c)) out.push_back(&c);
  }
  return out;
}

// The best of the eligible clusters by `better` (a strict ranking: true when
// a goes before b), ties broken by name.
const cluster_view* best(const std::vector<const cluster_view*>& cs,
                         const std::function<bool(const cluster_view&, const cluster_view&)>& better) {
  const cluster_view* top = nullptr;
  for (const cluster_view* c : cs) {
    if (top == nullptr || better(*c, *top) || (!better(*top, *c) && c->name < top->name)) top = c;
  }
  return top;
}

// fastest-queue's order: least pending_procs per procs_total (compared
// exactly, by cross-multiplying; no processors counts as the longest queue),
// then most processors free now or by shrinking adaptive jobs.
int compare_queue_load(const cluster_view& a, const cluster_view& b) {
  const std::int64_t ta = std::max<std::int64_t>(a.procs_total, 0), tb = std::max<std::int64_t>(b.procs_total, 0);
  if ((ta == 0) != (tb == 0)) return ta == 0 ? 1 : -1;
  if (ta == 0) return 0;
  const std::int64_t pa = std::max<std::int64_t>(a.pending_procs, 0), pb = std::max<std::int64_t>(b.pending_procs, 0);
  // Both products stay far below 2^63 for any real machine (10^9 processors queued on 10^9).
  const std::int64_t la = pa * tb, lb = pb * ta;
  if (la != lb) return la < lb ? -1 : 1;
  return 0;
}

std::int64_t room(const cluster_view& c) { return c.procs_free + c.shrinkable; }

bool queue_better(const cluster_view& a, const cluster_view& b) {
  const int load = compare_queue_load(a, b);
  if (load != 0) return load < 0;
  return room(a) > room(b);
}

std::string queue_detail(const cluster_view& c) {
  return std::to_string(c.pending_procs) + " processors queued on " + std::to_string(c.procs_total) + ", " +
         std::to_string(c.procs_free) + " free + " + std::to_string(c.shrinkable) + " shrinkable";
}

class random_broker final : public broker {
public:
  explicit random_broker(std::uint64_t seed) : engine_(seed) {}
  std::string_view name() const noexcept override { return "random"; }
  std::optional<choice> choose(const job_ask& job, std::span<const cluster_view> clusters) override {
    const auto cs = eligible(job, clusters);
    if (cs.empty()) return std::nullopt;
    std::uniform_int_distribution<std::size_t> pick(0, cs.size() - 1);
    const cluster_view& c = *cs[pick(engine_)];
    return choice{c.name, "random: drawn from " + n_eligible(cs.size())};
  }

private:
  std::mt19937_64 engine_;
};

class fastest_cpu final : public broker {
public:
  std::string_view name() const noexcept override { return "fastest-cpu"; }
  std::optional<choice> choose(const job_ask& job, std::span<const cluster_view> clusters) override {
    const auto cs = eligible(job, clusters);
    if (cs.empty()) return std::nullopt;
    const cluster_view& c = *best(cs, [](const cluster_view& a, const cluster_view& b) {
      if (a.speed != b.speed) return a.speed > b.speed;
      return a.procs_free > b.procs_free;
    });
    return choice{c.name, "fastest-cpu: speed " + num(c.speed) + ", " + std::to_string(c.procs_free) +
                              " processors free (" + n_eligible(cs.size()) + ")"};
  }
};

class fastest_queue final : public broker {
public:
  std::string_view name() const noexcept override { return "fastest-queue"; }
  std::optional<choice> choose(const job_ask& job, std::span<const cluster_view> clusters) override {
    const auto cs = eligible(job, clusters);
    if (cs.empty()) return std::nullopt;
    const cluster_view& c = *best(cs, queue_better);
    return choice{c.name, "fastest-queue: " + queue_detail(c) + " (" + n_eligible(cs.size()) + ")"};
  }
};

// How many of the job's data sets (each counted once) the cluster holds.
std::size_t held(const job_ask& job, const cluster_view& c) {
  const std::set<std::string> wanted(job.datasets.begin(), job.datasets.end());
  std::size_t n = 0;
  for (const std::string& d : wanted) {
    if (std::find(c.datasets.begin(), c.datasets.end(), d) != c.datasets.end()) ++n;
  }
  return n;
}

class data_broker final : public broker {
public:
  std::string_view name() const noexcept override { return "data"; }
  std::optional<choice> choose(const job_ask& job, std::span<const cluster_view> clusters) override {
    const auto cs = eligible(job, clusters);
    if (cs.empty()) return std::nullopt;
    const cluster_view& c = *best(cs, [&job](const cluster_view& a, const cluster_view& b) {
      const std::size_t ha = held(job, a), hb = held(job, b);
      if (ha != hb) return ha > hb;
      return queue_better(a, b);
    });
    const std::size_t wanted = std::set<std::string>(job.datasets.begin(), job.datasets.end()).size();
    return choice{c.name, "data: holds " + std::to_string(held(job, c)) + " of the job's " + std::to_string(wanted) +
                              " data sets; " + queue_detail(c) + " (" + n_eligible(cs.size()) + ")"};
  }
};

// earliest-start's measure: when the job would end there, from now.
// +inf when the cluster gave no estimate or reports no speed.
double expected_completion(const job_ask& job, const cluster_view& c) {
  if (!c.start_in_s || !(c.speed > 0)) return std::numeric_limits<double>::infinity();
  return std::max(*c.start_in_s, 0.0) + job.walltime_s / c.speed;
}

class earliest_start final : public broker {
public:
  std::string_view name() const noexcept override { return "earliest-start"; }
  bool needs_start_estimates() const noexcept override { return true; }
  std::optional<choice> choose(const job_ask& job, std::span<const cluster_view> clusters) override {
    const auto cs = eligible(job, clusters);
    if (cs.empty()) return std::nullopt;
    const cluster_view& c = *best(cs, [&job](const cluster_view& a, const cluster_view& b) {
      // Clusters with no estimate go last (among themselves: by name).
      if (a.start_in_s.has_value() != b.start_in_s.has_value()) return a.start_in_s.has_value();
      if (!a.start_in_s) return false;
      const double ea = expected_completion(job, a), eb = expected_completion(job, b);
      if (ea != eb) return ea < eb;
      return *a.start_in_s < *b.start_in_s;
    });
    if (!c.start_in_s) {
      return choice{c.name, "earliest-start: no cluster gave a start estimate; first by name of " + n_eligible(cs.size())};
    }
    const double done = expected_completion(job, c);
    return choice{c.name, "earliest-start: starts in " + num(std::max(*c.start_in_s, 0.0)) + " s, done in about " +
                              (std::isinf(done) ? std::string("(no speed)") : num(done) + " s") + " at speed " +
                              num(c.speed) + " (" + n_eligible(cs.size()) + ")"};
  }
};

// A cluster's bid for the contract policy: its completion (its own, else
// earliest-start's measure) and its price; nullopt without both.
struct bid {
  const cluster_view* c;
  double completion, price;
};
std::optional<bid> bid_of(const job_ask& job, const cluster_view& c) {
  if (!c.price || !(*c.price >= 0)) return std::nullopt;
  const double done = c.completion_in_s ? std::max(*c.completion_in_s, 0.0) : expected_completion(job, c);
  if (!std::isfinite(done)) return std::nullopt;
  return bid{&c, done, *c.price};
}

class contract_broker final : public broker {
public:
  std::string_view name() const noexcept override { return "contract"; }
  bool needs_start_estimates() const noexcept override { return true; }
  std::optional<choice> choose(const job_ask& job, std::span<const cluster_view> clusters) override {
    if (!job.contract) {
      auto c = fallback_.choose(job, clusters);
      if (c) c->reason = "contract: no contract given, placed as " + c->reason;
      return c;
    }
    const contract_terms& t = *job.contract;
    const auto cs = eligible(job, clusters);
    if (cs.empty()) return std::nullopt;
    std::vector<bid> bids, within;
    for (const cluster_view* c : cs) {
      if (auto b = bid_of(job, *c)) bids.push_back(*b);
    }
    // No bid yet (no answers within the estimate timeout): asked again later.
    if (bids.empty()) return std::nullopt;
    for (const bid& b : bids) {
      if (b.price <= t.max_price) within.push_back(b);
    }
    if (within.empty()) {
      const bid& cheapest = *std::min_element(bids.begin(), bids.end(), [](const bid& a, const bid& b) {
        return a.price != b.price ? a.price < b.price : a.c->name < b.c->name;
      });
      return choice{"", "contract: no cluster bids within the maximum price " + num(t.max_price) +
                            " credits per processor-second (cheapest: " + cheapest.c->name + " at " +
                            num(cheapest.price) + ")",
                    true};
    }
    auto earliest = [](const bid& a, const bid& b) {
      if (a.completion != b.completion) return a.completion < b.completion;
      return a.c->name < b.c->name;
    };
    std::vector<bid> meets;
    for (const bid& b : within) {
      if (b.completion <= t.deadline_in_s) meets.push_back(b);
    }
    if (!meets.empty()) {
      // All earn the full value: the cheapest, then the earliest.
      const bid& b = *std::min_element(meets.begin(), meets.end(), [&](const bid& x, const bid& y) {
        if (x.price != y.price) return x.price < y.price;
        return earliest(x, y);
      });
      return choice{b.c->name, "contract: done in about " + num(b.completion) + " s, by the deadline (" +
                                   num(t.deadline_in_s) + " s), at " + num(b.price) + " per processor-second, value " +
                                   num(contract_value(t, b.completion)) + " (" + std::to_string(bids.size()) + " bids, " +
                                   std::to_string(meets.size()) + " by the deadline within the price)"};
    }
    const bid& soonest = *std::min_element(within.begin(), within.end(), earliest);
    if (!t.best_effort) {
      return choice{"", "contract: no cluster can finish it by its deadline (in " + num(t.deadline_in_s) +
                            " s); the earliest within the price is " + soonest.c->name + ", done in about " +
                            num(soonest.completion) + " s",
                    true};
    }
    // Best effort: the most value left, then the earliest.
    const bid& b = *std::min_element(within.begin(), within.end(), [&](const bid& x, const bid& y) {
      const double vx = contract_value(t, x.completion), vy = contract_value(t, y.completion);
      if (vx != vy) return vx > vy;
      return earliest(x, y);
    });
    return choice{b.c->name, "contract: best effort, no cluster can finish it by the deadline (" +
                                 num(t.deadline_in_s) + " s); done in about " + num(b.completion) + " s at " +
                                 num(b.price) + " per processor-second, value " + num(contract_value(t, b.completion))};
  }

private:
  earliest_start fallback_;
};

}  // namespace

std::unique_ptr<broker> make_contract() { return std::make_unique<contract_broker>(); }
std::unique_ptr<broker> make_random(std::uint64_t seed) { return std::make_unique<random_broker>(seed); }
std::unique_ptr<broker> make_fastest_cpu() { return std::make_unique<fastest_cpu>(); }
std::unique_ptr<broker> make_fastest_queue() { return std::make_unique<fastest_queue>(); }
std::unique_ptr<broker> make_data() { return std::make_unique<data_broker>(); }
std::unique_ptr<broker> make_earliest_start() { return std::make_unique<earliest_start>(); }

}  // namespace aqs::faucets::policies
