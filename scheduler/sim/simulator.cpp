// simulator: event heap over completions and acks, arrivals by index, trace events, metrics at the end.
#include "sim/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "core/accounts.hpp"
#include "core/fairshare.hpp"
#include "core/scheduler.hpp"
#include "core/usage.hpp"

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

// A suspend, resume or range change waiting for its time: from the file (in
// file order at equal times) or synthesised.
struct pending_event {
  trace_event e;
  std::uint64_t seq;
  bool synthetic;

  bool operator>(const pending_event& o) const {
    if (e.time != o.e.time) return e.time > o.e.time;
    return seq > o.seq;
  }
};

struct live {
  double remaining = 1;  // adaptive: fraction of the job's work left
  double rate = 0;       // adaptive: fraction per second on its current processors
  double left_s = 0;     // rigid: seconds of run left (exact, so a suspension shifts the end exactly)
  double since = 0;      // progress counted up to here
  std::size_t procs = 0;
  std::size_t held = 0;  // during a migration: old and gained processors
  std::uint64_t version = 0;
  bool running = false;     // holds processors (running or migrating)
  bool started = false;
  bool suspended = false;
  bool resume_wanted = false;
  bool defer_suspend = false;    // a suspend came during a resize: applied at the ack
  bool defer_synthetic = false;  // ... and it was synthesised (it then schedules its resume)
  double suspended_at = 0;
};

// What the synthesised events do to one job (negative: nothing).
struct synth_plan {
  double suspend_at = -1;  // fraction of the expected run
  double range_at = -1;
  bool grow = false;
};

// The user a trace's user id stands for ("u7"; "unknown" for -1).
std::string user_name(long long id) { return id < 0 ? std::string("unknown") : "u" + std::to_string(id); }

}  // namespace

sim_result simulate(const workload& w, const sim_options& opt) {
  if (opt.procs_per_node == 0 || w.procs % opt.procs_per_node != 0) {
    throw std::invalid_argument("the machine's " + std::to_string(w.procs) +
                                " processors are not a whole number of " +
                                std::to_string(opt.procs_per_node) + "-processor nodes");
  }
  core::scheduler sched(core::cluster::uniform(w.procs / opt.procs_per_node, opt.procs_per_node),
                        core::make_strategy(opt.policy, opt.params));
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
    res.jobs[i] = {j.id, j.submit, -1, -1, 0, j.min_pe, j.max_pe, j.adaptive, 0, 0, 0};
  }

  // Each job's true speedup: its own Amdahl fraction when it has one, else the run's model.
  std::vector<speedup_model> own;
  std::vector<int> model_of(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    if (w.jobs[i].parallel_fraction < 0) continue;
    model_of[i] = static_cast<int>(own.size());
    own.push_back(speedup_model::parse("amdahl:" + std::to_string(w.jobs[i].parallel_fraction)));
  }
  auto model = [&](std::size_t i) -> const speedup_model& {
    return model_of[i] < 0 ? opt.speedup : own[static_cast<std::size_t>(model_of[i])];
  };

  std::priority_queue<timed, std::vector<timed>, std::greater<>> heap;
  std::priority_queue<pending_event, std::vector<pending_event>, std::greater<>> ext;
  std::uint64_t seq = 0;
  for (const trace_event& e : opt.events) ext.push({e, seq++, false});

  std::vector<synth_plan> synth;
  if (opt.suspend_fraction > 0 || opt.range_change_fraction > 0) {
    synth.resize(n);
    std::mt19937_64 rng(opt.seed ^ 0x5eed5eedULL);  // not the stream that picks malleable jobs
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (std::size_t i = 0; i < n; ++i) {
      // Always the same draws per job, so changing one fraction keeps the other's choice.
      double a = u(rng), b = u(rng), c = u(rng), d = u(rng), coin = u(rng);
      if (a < opt.suspend_fraction) synth[i].suspend_at = b;
      if (w.jobs[i].adaptive && c < opt.range_change_fraction) {
        synth[i].range_at = d;
        synth[i].grow = coin < 0.5;
      }
    }
  }

  // Fair share: one association per trace user under root, equal shares.
  const bool fair = !opt.priority.all_zero();
  std::optional<core::account_index> accounts;
  std::unordered_map<std::string, std::size_t> assoc_of;  // user name -> association
  core::usage_ledger ledger(opt.priority.half_life_s);
  double charged_to = n ? w.jobs.front().submit : 0;
  if (fair) {
    core::account_tree tree;
    core::account root;
    root.name = std::string(core::k_root_account);
    tree.accounts.push_back(root);
    for (const sim_job& j : w.jobs) {
      const std::string u = user_name(j.user);
      if (assoc_of.emplace(u, tree.associations.size()).second) {
        core::user_association a;
        a.user = u;
        a.account = root.name;
        tree.associations.push_back(a);
      }
    }
    accounts.emplace(std::move(tree));
  }
  // Charges what the jobs held since the last charge, up to `now`.
  auto charge_usage = [&](double now) {
    if (!fair || now <= charged_to) return;
    for (const auto& [end, id] : sched.holding_by_end()) {
      const core::job& cj = sched.get(id);
      ledger.charge(cj.req.user, static_cast<double>(cj.size()), charged_to, now);
    }
    charged_to = now;
  };
  // Gives every queued job its multifactor priority at `now`.
  auto prioritise = [&](double now) {
    if (!fair) return;
    const auto& tree = accounts->tree();
    std::vector<double> usage(tree.associations.size(), 0.0);
    for (std::size_t a = 0; a < usage.size(); ++a) usage[a] = ledger.at(tree.associations[a].user, now);
    const core::fair_share_result fs = core::fair_share(*accounts, usage);
    std::vector<core::priority_input> in;
    in.reserve(sched.queue().size());
    for (const core::queue_key& k : sched.queue()) {
      const core::job& cj = sched.get(k.id);
      in.push_back(core::priority_input_of(k.id, cj.req, fs.assoc_factor[assoc_of.at(cj.req.user)]));
    }
    res.priority_changes += core::apply_priorities(
        sched, core::compute_priorities(in, core::priority_context{w.procs, 0, 0}, opt.priority, now));
  };

  std::size_t next_arrival = 0, finished = 0;
  double busy_area = 0, last_t = n ? w.jobs.front().submit : 0;
  std::size_t busy = 0;
  std::set<std::size_t> idle_suspended;  // suspended, not asked to resume
  std::set<std::size_t> resuming_rigid;  // rigid, asked to resume, not resumed yet

  auto schedule_completion = [&](std::size_t i, double from) {
    live& s = state[i];
    s.since = from;
    double end = from + (w.jobs[i].adaptive ? s.remaining / s.rate : s.left_s);
    heap.push({end, 0, seq++, i, s.version});
  };
  auto expected_run = [&](std::size_t i) {
    const live& s = state[i];
    return w.jobs[i].adaptive ? s.remaining / s.rate : s.left_s;
  };
  auto skip = [&](const char* why) {
    ++res.events_skipped;
    ++res.events_skipped_by_reason[why];
  };
  auto do_suspend = [&](std::size_t i, double now, bool synthetic) {
    live& s = state[i];
    const sim_job& j = w.jobs[i];
    if (j.adaptive) {
      s.remaining = std::max(0.0, s.remaining - (now - s.since) * s.rate);
    } else {
      s.left_s = std::max(0.0, s.left_s - (now - s.since));
    }
    s.since = now;
    ++s.version;  // its completion is stale: it is rescheduled at resume
    sched.apply(event::on_job(event::kind::suspend, j.id));
    busy -= s.held;
    s.held = s.procs = 0;
    s.running = false;
    s.suspended = true;
    s.suspended_at = now;
    idle_suspended.insert(i);
    ++res.suspends;
    ++res.jobs[i].suspensions;
    if (synthetic) {
      trace_event r;
      r.time = now + opt.suspend_duration;
      r.job = j.id;
      r.what = trace_event::kind::resume;
      ext.push({r, seq++, true});
    }
  };
  auto do_resume = [&](std::size_t i) {
    live& s = state[i];
    sched.apply(event::on_job(event::kind::resume, w.jobs[i].id));
    s.resume_wanted = true;
    idle_suspended.erase(i);
    if (!w.jobs[i].adaptive) resuming_rigid.insert(i);
  };
  // Applies one suspend/resume/range event at `now`, or skips it with a reason.
  auto apply_event = [&](const pending_event& pe, double now) {
    const trace_event& e = pe.e;
    auto it = index.find(e.job);
    if (it == index.end()) return skip("unknown_job");
    std::size_t i = it->second;
    live& s = state[i];
    const sim_job& j = w.jobs[i];
    if (i >= next_arrival) return skip("not_submitted");
    if (res.jobs[i].end >= 0) return skip("finished");
    switch (e.what) {
      case trace_event::kind::suspend: {
        if (!s.started) return skip("suspend_not_started");
        if (s.suspended || s.defer_suspend) return skip("already_suspended");
        if (sched.get(j.id).state == core::job_state::resizing) {
          // The core suspends only a job that has applied its map: wait for the ack.
          s.defer_suspend = true;
          s.defer_synthetic = pe.synthetic;
          ++res.deferred_suspends;
          return;
        }
        do_suspend(i, now, pe.synthetic);
        return;
      }
      case trace_event::kind::resume: {
        if (s.defer_suspend) {
          // Resumed before the suspend could take effect: neither happens.
          s.defer_suspend = false;
          skip("suspend_cancelled");
          return skip("resume_before_suspend_applied");
        }
        if (!s.suspended) return skip("resume_not_suspended");
        if (s.resume_wanted) return skip("already_resuming");
        do_resume(i);
        ++res.resumes;
        return;
      }
      case trace_event::kind::range: {
        if (e.max_pe > w.procs) return skip("range_larger_than_machine");
        if (!j.adaptive) {
          if (e.min_pe != e.max_pe) return skip("range_rigid_min_ne_max");
          if (s.started) return skip("range_rigid_started");
        }
        try {
          sched.apply(event::change(j.id, e.min_pe, e.max_pe));
        } catch (const std::invalid_argument&) {
          return skip("range_refused_by_core");
        }
        ++res.range_changes;
        return;
      }
    }
  };

  // Carries out the core's decisions at `now`.
  auto carry_out = [&](const std::vector<decision>& decisions, double now) {
    for (const decision& d : decisions) {
      std::size_t i = index.at(d.job);
      live& s = state[i];
      const sim_job& j = w.jobs[i];
      ++res.decisions;
      if (d.what == decision::kind::start) {
        s.running = true;
        s.started = true;
        s.procs = d.to.count();
        s.held = s.procs;
        busy += s.held;
        s.remaining = 1;
        s.rate = model(i).relative_rate(s.procs, j.size) / j.runtime;
        // A rigid job whose size was changed while pending runs at the speedup model's rate for it.
        s.left_s = s.procs == j.size ? j.runtime : j.runtime / model(i).relative_rate(s.procs, j.size);
        res.jobs[i].start = now;
        res.jobs[i].first_procs = s.procs;
        schedule_completion(i, now);
        if (!synth.empty()) {
          double run = expected_run(i);
          for (auto [at, what] : {std::pair{synth[i].suspend_at, trace_event::kind::suspend},
                                  std::pair{synth[i].range_at, trace_event::kind::range}}) {
            if (at < 0) continue;
            trace_event e;
            e.time = now + at * run;
            e.job = j.id;
            e.what = what;
            if (what == trace_event::kind::range) {
              if (synth[i].grow) {
                e.min_pe = j.min_pe;
                e.max_pe = std::min(w.procs, 2 * j.max_pe);
              } else {
                e.min_pe = std::max<std::size_t>(1, j.min_pe / 2);
                e.max_pe = std::max(e.min_pe, j.max_pe / 2);
              }
            }
            ext.push({e, seq++, true});
          }
        }
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
      } else if (d.what == decision::kind::resume) {
        resuming_rigid.erase(i);
        s.suspended = false;
        s.resume_wanted = false;
        res.jobs[i].suspended_s += now - s.suspended_at;
        s.running = true;
        s.procs = s.held = d.to.count();
        busy += s.held;
        s.since = now;
        ++s.version;
        if (j.adaptive) {
          // Sent its new map like a resize: it progresses at the new size's rate after the ack.
          heap.push({now + opt.resize_cost, 1, seq++, i, s.version});
        } else {
          schedule_completion(i, now);
        }
      } else {
        throw std::logic_error("unexpected decision in the simulator");
      }
    }
  };

  // Works around a core bug (tests/unit/core/scheduler_test.cpp, "a rigid
  // job waiting to resume on its free processors is not blocked by a job
  // ahead that needs them"): a rigid job waiting to resume whose processors
  // are all free, but which the strategy did not reach because a job ahead
  // of it was planned on those (promised) processors and refused, would wait
  // forever. The pending jobs ahead are held for one decision and released
  // at their old places, then the core decides again. Only runs with
  // suspensions ever get here; counted in unblocked_resumes.
  auto unblock_resumers = [&](double now) {
    const core::processor_set free = sched.free_procs();
    bool stuck = false;
    for (std::size_t i : resuming_rigid) {
      const core::job& cj = sched.get(w.jobs[i].id);
      if (cj.state == core::job_state::suspended && !(cj.home - free).any()) stuck = true;
    }
    if (!stuck) return;
    std::vector<std::uint64_t> held;
    for (const core::queue_key& k : sched.queue()) {
      if (sched.get(k.id).state == core::job_state::pending) held.push_back(k.id);
    }
    for (std::uint64_t id : held) sched.apply(event::on_job(event::kind::hold, id));
    carry_out(sched.decide(now), now);
    for (std::uint64_t id : held) sched.apply(event::on_job(event::kind::release, id));
    carry_out(sched.decide(now), now);
    ++res.unblocked_resumes;
  };

  while (finished < n) {
    if (!idle_suspended.empty()) {
      // Stale completions (of jobs resized or suspended since) would only
      // delay the moment the simulator sees that nothing else can happen.
      // Dropped only in this case, so that runs without suspensions decide
      // at exactly the instants they always did.
      while (!heap.empty() && heap.top().order == 0 &&
             (heap.top().version != state[heap.top().job].version || !state[heap.top().job].running)) {
        heap.pop();
      }
    }
    double now = INFINITY;
    if (next_arrival < n) now = w.jobs[next_arrival].submit;
    if (!heap.empty()) now = std::min(now, heap.top().t);
    if (!ext.empty()) now = std::min(now, ext.top().e.time);
    bool wake = false;  // nothing left but suspended jobs: resume them now
    if (!std::isfinite(now)) {
      if (idle_suspended.empty()) {
        throw std::logic_error("simulation stalled: jobs left that can never be placed");
      }
      now = last_t;
      wake = true;
    }
    // Events before the first arrival (or at an earlier time than the
    // clock, which cannot happen otherwise) are taken at the current time.
    now = std::max(now, last_t);
    busy_area += static_cast<double>(busy) * (now - last_t);
    last_t = now;
    charge_usage(now);

    while (!heap.empty() && heap.top().t <= now) {
      timed e = heap.top();
      heap.pop();
      live& s = state[e.job];
      const sim_job& j = w.jobs[e.job];
      if (e.order == 0) {
        if (e.version != s.version || !s.running) continue;  // superseded by a resize or a suspension
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
        s.rate = model(e.job).relative_rate(s.procs, j.size) / j.runtime;
        schedule_completion(e.job, now);
        if (s.defer_suspend) {
          s.defer_suspend = false;
          do_suspend(e.job, now, s.defer_synthetic);
        }
      }
    }
    while (next_arrival < n && w.jobs[next_arrival].submit <= now) {
      const sim_job& j = w.jobs[next_arrival++];
      core::job_request r;
      r.id = j.id;
      r.min_pe = j.min_pe;
      r.max_pe = j.max_pe;
      r.adaptive = j.adaptive;
      r.walltime = j.estimate;
      r.submit_time = j.submit;
      r.user = user_name(j.user);
      if (j.adaptive) {
        // What the job declares: its preferred size, its speedup model (the
        // true one: the simulator's users know their codes) and its resize cost.
        r.pref_pe = j.pref_pe;
        const speedup_model& m = model(next_arrival - 1);
        r.speedup = m.name() == "linear" ? core::speedup_model{} : core::speedup_model::parse(m.name());
        r.resize_cost = opt.resize_cost;
      }
      sched.apply(event::arrival(std::move(r)));
    }
    while (!ext.empty() && ext.top().e.time <= now) {
      pending_event pe = ext.top();
      ext.pop();
      apply_event(pe, now);
    }
    if (wake) {
      for (std::size_t i : std::vector<std::size_t>(idle_suspended.begin(), idle_suspended.end())) {
        do_resume(i);
        ++res.resumed_at_end;
      }
    }

    prioritise(now);
    carry_out(sched.decide(now), now);
    if (!resuming_rigid.empty()) unblock_resumers(now);
  }
  if (fair) {
    for (const sim_job& j : w.jobs) res.user_usage[j.user] = ledger.at(user_name(j.user), last_t);
  }

  double first_submit = n ? w.jobs.front().submit : 0, last_end = first_submit;
  double wait = 0, response = 0, bsld = 0, suspended = 0;
  for (const job_result& r : res.jobs) {
    last_end = std::max(last_end, r.end);
    // Time suspended counts as waiting, not as running, in the slowdown.
    double wt = r.start - r.submit, run = r.end - r.start - r.suspended_s;
    wait += wt;
    response += r.end - r.submit;
    bsld += bounded_slowdown(wt + r.suspended_s, run);
    suspended += r.suspended_s;
  }
  if (n > 0) {
    res.mean_wait = wait / static_cast<double>(n);
    res.mean_response = response / static_cast<double>(n);
    res.mean_bsld = bsld / static_cast<double>(n);
    res.mean_suspended_s = suspended / static_cast<double>(n);
  }
  res.makespan = last_end - first_submit;
  if (res.makespan > 0) res.utilization = busy_area / (static_cast<double>(w.procs) * res.makespan);
  return res;
}

}  // namespace aqs::sim
