// controller_observe: the controller's read API: snapshots of the scheduling state for read-only fronts (HTTP API,
// /metrics), taken on the strand.
#include <algorithm>

#include "core/start_estimate.hpp"

#include "daemon/controller.hpp"

namespace aqs::daemon {

void controller::snapshot(std::function<void(cluster_snapshot)> done) {
  pipe_.post([this, done = std::move(done)] {
    cluster_snapshot s;
    s.taken_at = now();
    const auto& machine = sched_.machine();
    const auto steady_now = clock_.now();
    std::vector<std::int64_t> holder(machine.size(), 0);
    for (const auto& [end, id] : sched_.holding_by_end()) {
      const core::job& j = sched_.get(id);
      j.procs.for_each([&](std::size_t p) { holder[p] = static_cast<std::int64_t>(id); });
      // A growing job's new processors are its own already (held for it).
      j.target.for_each([&](std::size_t p) {
        if (holder[p] == 0) holder[p] = static_cast<std::int64_t>(id);
      });
    }
    const core::processor_set& reserved = sched_.reserved();
    for (const node_entry& n : nodes_) {
      snapshot_node sn;
      sn.name = n.name;
      switch (machine.at(n.index).state) {
        case core::node_state::up: sn.state = "UP"; break;
        case core::node_state::drained: sn.state = "DRAIN"; break;
        case core::node_state::down: sn.state = "DOWN"; break;
      }
      sn.first_proc = static_cast<std::int64_t>(n.first_proc);
      sn.nprocs = static_cast<std::int64_t>(n.nprocs);
      sn.connected = static_cast<bool>(n.conn);
      sn.heartbeat_age_s = n.last_seen == node_entry::time_point{}
                               ? -1.0
                               : std::chrono::duration<double>(steady_now - n.last_seen).count();
      for (std::size_t p = n.first_proc; p < n.first_proc + n.nprocs && p < holder.size(); ++p) {
        sn.holder.push_back(holder[p]);
        sn.reserved.push_back(reserved.test(p));
      }
      s.nodes.push_back(std::move(sn));
    }
    for (const auto& [id, e] : jobs().live()) {
      const core::job* j = sched_.find(static_cast<core::job_id>(id));
      const core::job_state st = j ? j->state : core::job_state::pending;
      switch (st) {
        case core::job_state::running: ++s.jobs_running; break;
        case core::job_state::resizing: ++s.jobs_resizing; break;
        case core::job_state::suspended: ++s.jobs_suspended; break;
        default: ++s.jobs_pending; break;
      }
      if (j == nullptr || !core::holds_processors(st)) continue;
      snapshot_job sj;
      sj.id = id;
      sj.user = e.user;
      sj.state = st;
      sj.adaptive = e.req.adaptive;
      sj.min_pe = static_cast<std::int64_t>(e.req.min_pe);
      sj.max_pe = static_cast<std::int64_t>(e.req.max_pe);
      if (j->procs.any()) sj.procs = j->procs.to_string();
      if (st == core::job_state::resizing) sj.target = j->target.to_string();
      s.jobs.push_back(std::move(sj));
    }
    std::sort(s.jobs.begin(), s.jobs.end(), [](const snapshot_job& a, const snapshot_job& b) { return a.id < b.id; });
    s.cpus_total = static_cast<std::int64_t>(machine.size());
    s.cpus_alloc = static_cast<std::int64_t>(sched_.held_count() - sched_.reserved_count());
    s.cpus_reserved = static_cast<std::int64_t>(sched_.reserved_count());
    s.cpus_idle = static_cast<std::int64_t>(sched_.free_count());
    s.cpus_unavailable = s.cpus_total - static_cast<std::int64_t>(sched_.usable_count());
    done(std::move(s));
  });
}

void controller::capacity(std::function<void(capacity_summary)> done) {
  pipe_.post([this, done = std::move(done)] {
    capacity_summary c;
    const auto& machine = sched_.machine();
    c.procs_total = static_cast<std::int64_t>(sched_.usable_count());
    c.procs_free = static_cast<std::int64_t>(sched_.free_count());
    for (const node_entry& n : nodes_) {
      if (machine.at(n.index).state != core::node_state::up) continue;
      ++c.nodes_up;
      c.gpus_total += n.gpus;
      c.max_job_gpus = std::max(c.max_job_gpus, n.gpus);
    }
    c.max_job_procs = c.procs_total;
    std::int64_t gpus_used = 0;
    for (const auto& [id, e] : jobs().live()) {
      const core::job* j = sched_.find(static_cast<core::job_id>(id));
      const core::job_state st = j ? j->state : core::job_state::pending;
      if (j != nullptr && core::holds_processors(st)) {
        ++c.running_jobs;
        if (e.req.adaptive && j->size() > e.req.min_pe) {
          c.shrinkable += static_cast<std::int64_t>(j->size() - e.req.min_pe);
        }
        // What it holds on each node now (an adaptive job's follow its map).
        for (const auto& on : j->placed) gpus_used += static_cast<std::int64_t>(on.gpus);
      } else if (st == core::job_state::pending) {
        ++c.pending_jobs;
        c.pending_procs += static_cast<std::int64_t>(e.req.min_pe);
        ++c.pending_by_partition[e.req.partition.empty() ? "default" : e.req.partition];
      }
    }
    c.gpus_free = std::max<std::int64_t>(0, c.gpus_total - gpus_used);
    done(std::move(c));
  });
}

void controller::estimate_start(core::job_request r, std::function<void(std::optional<double>)> done) {
  pipe_.post([this, r = std::move(r), done = std::move(done)] { done(core::estimate_start(sched_, r, now())); });
}

}  // namespace aqs::daemon
