// simulator: event heap over completions and acks, arrivals by index, metrics at the end.
#include "sim/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <stdexcept>
#include <unordered_map>

#include "core/scheduler.hpp"

namespace aqs::sim {

using core::decision;
using core::event;

double bounded_slowdown(double wait, double run, double tau) {
  return std::max(1.0, (wait + run) / std::max(run, tau));
}

namespace {

struct timed {
  double t;
  int order;  // completions (0) before acknowledgements (1) at equal times
  std::uint64_t seq;
  std::size_t job;      // index into the workload
  std::uint64_t version;  // completion events go stale when the job is resized

  bool operator>(const timed& o) const {
    if (t != o.t) return t > o.t;
    if (order != o.order) return order > o.order;
    return seq > o.seq;
  }
};

struct live {
  double remaining = 1;  // fraction of the job's work left
  double rate = 0;       // fraction per second on its current processors
  double since = 0;      // progress counted up to here
  std::size_t procs = 0;
  std::size_t held = 0;  // during a migration: old and gained processors
  std::uint64_t version = 0;
  bool running = false;
};

}  // namespace

sim_result simulate(const workload& w, const sim_options& opt) {
  if (opt.procs_per_node == 0 || w.procs % opt.procs_per_node != 0) {
    throw std::invalid_argument("the machine's " + std::to_string(w.procs) +
                                " processors are not a whole number of " +
                                std::to_string(opt.procs_per_node) + "-processor nodes");
  }
  core::scheduler sched(core::cluster::uniform(w.procs / opt.procs_per_node, opt.procs_per_node),
                        core::make_strategy(opt.policy));
  const std::size_t n = w.jobs.size();
  sim_result res;
  res.procs = w.procs;
  res.jobs.resize(n);
  std::vector<live> state(n);
  std::unordered_map<std::uint64_t, std::size_t> index;  // job id -> workload index
  index.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    const sim_job& j = w.jobs[i];
    if (!index.emplace(j.id, i).second) throw std::invalid_argument("duplicate job id " + std::to_string(j.id));
    res.jobs[i] = {j.id, j.submit, -1, -1, 0, j.min_pe, j.max_pe, j.adaptive, 0};
  }

  std::priority_queue<timed, std::vector<timed>, std::greater<>> heap;
  std::uint64_t seq = 0;
  std::size_t next_arrival = 0, finished = 0;
  double busy_area = 0, last_t = n ? w.jobs.front().submit : 0;
  std::size_t busy = 0;

  auto schedule_completion = [&](std::size_t i, double from) {
    live& s = state[i];
    s.since = from;
    double end = from + (w.jobs[i].adaptive ? s.remaining / s.rate : w.jobs[i].runtime);
    heap.push({end, 0, seq++, i, s.version});
  };

  while (finished < n) {
    double now = INFINITY;
    if (next_arrival < n) now = w.jobs[next_arrival].submit;
    if (!heap.empty()) now = std::min(now, heap.top().t);
    if (!std::isfinite(now)) throw std::logic_error("simulation stalled: jobs left that can never be placed");
    busy_area += static_cast<double>(busy) * (now - last_t);
    last_t = now;

    while (!heap.empty() && heap.top().t == now) {
      timed e = heap.top();
      heap.pop();
      live& s = state[e.job];
      const sim_job& j = w.jobs[e.job];
      if (e.order == 0) {
        if (e.version != s.version || !s.running) continue;  // superseded by a resize
        sched.apply(event::completion(j.id));
        s.running = false;
        busy -= s.held;
        s.held = 0;
        res.jobs[e.job].end = now;
        ++finished;
      } else {
        // The job has applied its new map: progress resumes at the new rate.
        sched.apply(event::on_job(event::kind::resize_ack, j.id));
        s.procs = sched.get(j.id).size();
        busy -= s.held - s.procs;  // what it vacated is free now
        s.held = s.procs;
        s.rate = opt.speedup.relative_rate(s.procs, j.size) / j.runtime;
        schedule_completion(e.job, now);
      }
    }
    while (next_arrival < n && w.jobs[next_arrival].submit == now) {
      const sim_job& j = w.jobs[next_arrival++];
      core::job_request r;
      r.id = j.id;
      r.min_pe = j.min_pe;
      r.max_pe = j.max_pe;
      r.adaptive = j.adaptive;
      r.walltime = j.estimate;
      r.submit_time = j.submit;
      sched.apply(event::arrival(std::move(r)));
    }

    for (const decision& d : sched.decide(now)) {
      std::size_t i = index.at(d.job);
      live& s = state[i];
      const sim_job& j = w.jobs[i];
      ++res.decisions;
      if (d.what == decision::kind::start) {
        s.running = true;
        s.procs = d.to.count();
        s.held = s.procs;
        busy += s.held;
        s.remaining = 1;
        s.rate = opt.speedup.relative_rate(s.procs, j.size) / j.runtime;
        res.jobs[i].start = now;
        res.jobs[i].first_procs = s.procs;
        schedule_completion(i, now);
      } else if (d.what == decision::kind::resize) {
        // Work done so far at the old rate; none while the job migrates.
        s.remaining = std::max(0.0, s.remaining - (now - s.since) * s.rate);
        s.since = now;
        ++s.version;
        std::size_t to = d.to.count();
        if (to > s.held) {  // a grow holds its new processors at once
          busy += to - s.held;
          s.held = to;
        }
        ++res.resizes;
        ++res.jobs[i].resizes;
        res.ranks_moved += d.ranks_moved;
        heap.push({now + opt.resize_cost, 1, seq++, i, s.version});
      } else {
        throw std::logic_error("unexpected decision in the simulator");
      }
    }
  }

  double first_submit = n ? w.jobs.front().submit : 0, last_end = first_submit;
  double wait = 0, response = 0, bsld = 0;
  for (const job_result& r : res.jobs) {
    last_end = std::max(last_end, r.end);
    double wt = r.start - r.submit, run = r.end - r.start;
    wait += wt;
    response += r.end - r.submit;
    bsld += bounded_slowdown(wt, run);
  }
  if (n > 0) {
    res.mean_wait = wait / static_cast<double>(n);
    res.mean_response = response / static_cast<double>(n);
    res.mean_bsld = bsld / static_cast<double>(n);
  }
  res.makespan = last_end - first_submit;
  if (res.makespan > 0) res.utilization = busy_area / (static_cast<double>(w.procs) * res.makespan);
  return res;
}

}  // namespace aqs::sim
