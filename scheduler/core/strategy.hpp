// strategy: the interface of a scheduling policy and the registry of policies by name.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.hpp"

namespace aqs::core {

class scheduler;

// What a strategy wants; the scheduler turns it into decisions (placement,
// reservations of processors still being vacated, decision records).
struct plan {
  struct sized {
    job_id job;
    std::size_t procs;
  };
  // Queued jobs to start now, in this order, with their processor count.
  std::vector<sized> starts;
  // Running adaptive jobs whose size should change (only the changes).
  std::vector<sized> targets;
  // EASY's promise to the blocked head of the queue: it starts at the latest
  // at `time` if estimates are exact. Empty when nothing is blocked.
  struct reservation_t {
    job_id job;
    double time;
  };
  std::optional<reservation_t> reservation;
  // A start that must wait for processors still being vacated (shrinks not
  // yet acknowledged) keeps, when this is set, the free processors it counts
  // on: later starts and grows of the plan take only the rest. Then the next
  // decision finds the pool as this one planned it, so a policy whose choices
  // depend on the room left (moldable starts) decides the same again and
  // the head's reservation holds.
  bool keep_order = false;
};

// A policy: reads the scheduler's state, returns a plan. Strategies keep no
// state of their own between calls, so the daemon can swap them at any event
// and a restarted daemon decides exactly as before.
class strategy {
public:
  virtual ~strategy() = default;
  virtual std::string_view name() const noexcept = 0;
  // Must only start queued jobs, within their min..max, and only resize
  // running adaptive jobs within theirs; must name each job at most once in
  // the plan (the scheduler refuses a plan that breaks any of this); and
  // must not plan more processors than the scheduler reports available
  // (free, reserved on usable nodes, and what resizable adaptive jobs hold).
  virtual plan schedule(const scheduler& s, double now) const = 0;
  // Whether it ever resizes adaptive jobs (false: it runs them rigid, as
  // fcfs and easy do), so a simulator knows whether malleability applies.
  virtual bool resizes() const noexcept { return true; }
};

using strategy_factory = std::function<std::unique_ptr<strategy>()>;

// Settings of the policies that weigh resizes (payoff); the others ignore
// them. A daemon or simulator passes them once, with the name.
struct strategy_params {
  // No job grows less than this many seconds after its start or its
  // previous resize (a shrink that starts waiting jobs is never held back).
  double min_resize_interval = 60;
  // The cost of a resize, in seconds without progress, for a job that
  // declares none (job_request::resize_cost < 0).
  double default_resize_cost = 10;
};

// The registry: "fcfs", "easy", "equipartition", "pref_common_pool",
// "payoff" and "payoff_lxf" are built in.
std::vector<std::string> strategy_names();
// Throws std::invalid_argument("unknown policy 'x' (known: easy, equipartition, fcfs, ...)").
std::unique_ptr<strategy> make_strategy(std::string_view name);
// The same with settings (strategy_params); throws std::invalid_argument as
// above, or for a negative interval or cost.
std::unique_ptr<strategy> make_strategy(std::string_view name, const strategy_params& params);
// Adds (or replaces) a policy, for plug-ins and tests.
void register_strategy(std::string name, strategy_factory factory);

}  // namespace aqs::core
