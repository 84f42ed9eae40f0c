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
};

using strategy_factory = std::function<std::unique_ptr<strategy>()>;

// The registry: "fcfs", "easy", "equipartition" are built in.
std::vector<std::string> strategy_names();
// Throws std::invalid_argument("unknown policy 'x' (known: easy, equipartition, fcfs)").
std::unique_ptr<strategy> make_strategy(std::string_view name);
// Adds (or replaces) a policy, for plug-ins and tests.
void register_strategy(std::string name, strategy_factory factory);

}  // namespace aqs::core
