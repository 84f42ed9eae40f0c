// controller_recover: the controller's recover(): rebuilding the scheduling state from the store after a restart
// (also after kill -9): nodes in their numbering, pending jobs queued again,
// running jobs kept on their processors until their agents report.
#include <chrono>
#include <csignal>
#include <stdexcept>

#include "daemon/controller.hpp"
#include "daemon/faucets_uplink.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

using core::job_state;

void controller::recover() {
  accounts_.load();
  reservations_.load();
  const store::live_state st = pipe_.store().load_live_state();
  launcher_.set_cluster_id(st.cluster_id);
  logging::info("cluster id {}", st.cluster_id);
  pipe_.hold(true);
  const auto t = clock_.now();
  std::vector<std::size_t> down, drained;
  for (const auto& rec : st.nodes) {
    const std::size_t index = sched_.add_node(rec.name, static_cast<std::size_t>(rec.nprocs));
    if (sched_.machine().at(index).first_proc != static_cast<std::size_t>(rec.first_proc)) {
      throw std::runtime_error("node " + rec.name + " starts at processor " + std::to_string(rec.first_proc) +
                               " in the store, but nodes before it do not add up to that");
    }
    node_entry n;
    n.name = rec.name;
    n.index = index;
    n.first_proc = static_cast<std::size_t>(rec.first_proc);
    n.nprocs = static_cast<std::size_t>(rec.nprocs);
    if (!rec.cpus.empty()) {
      try {
        const auto cpus = core::processor_set::from_ranges(1 << 16, rec.cpus);
        for (std::size_t c = cpus.first(); c != core::processor_set::npos; c = cpus.find_next(c + 1)) {
          n.cpus.push_back(static_cast<std::int64_t>(c));
        }
      } catch (const std::exception&) {
        // Registration sends them again.
      }
    }
    n.memory_mb = rec.memory_mb;
    n.gpus = rec.gpus;
    sched_.set_node_resources(index, static_cast<std::uint64_t>(std::max<std::int64_t>(rec.memory_mb, 0)),
                              static_cast<std::size_t>(std::max<std::int64_t>(rec.gpus, 0)));
    // Its agent has one heartbeat timeout from now to come back.
    n.last_seen = t;
    n.last_stored_heartbeat = t;
    nodes_.add(std::move(n));
    if (rec.state == store::node_state::down) down.push_back(index);
    if (rec.state == store::node_state::drained) drained.push_back(index);
  }
  launcher_.refresh_spans();

  std::size_t pending = 0, running = 0;
  const std::size_t n = sched_.machine().size();
  // Arrays' compact records, admitted once their split tasks are back (the
  // window counts them).
  std::vector<std::int64_t> compact, queued;
  for (const auto& s : st.jobs) {
    job_entry e;
    e.req = to_core_request(s);
    e.user = s.user_name;
    e.uid = s.uid;
    e.gid = s.uid;  // read with the script when it is launched
    e.deps = s.dependencies;
    e.name = s.name;
    e.control = s.status.control;
    e.faucets = placed_by_faucets(s.submit_token);
    if (e.faucets) e.submit_token = s.submit_token;
    try {
      e.geometry = geometry_of(s.geometry);
    } catch (const std::exception&) {
      // Warned about below.
    }
    view_.set_owner(s.id, s.uid);
    const job_state state = s.status.state;
    // A task of a throttled array takes a place of its array again (running
    // ones first in id order, as they come).
    bool admitted = true;
    try {
      if (const auto g = geometry_of(s.geometry); g && g->array_task_id) {
        admitted = intake_.arrays().arrive(g->array_job_id.value_or(s.id), s.id, g->array_max_running.value_or(0)) ||
                   state != job_state::pending;
      }
    } catch (const std::exception& ex) {
      logging::warn("job {}: unreadable geometry ({})", s.id, ex.what());
    }
    if (state == job_state::pending) {
      for (std::int64_t d : e.deps) {
        if (intake_.known_state(d)) continue;
        if (auto rec = pipe_.store().get_job(d)) e.dep_known[d] = rec->status.state;
      }
      if (e.geometry && e.geometry->array) {
        // An array's compact record: its unsplit tasks, as stored.
        try {
          const core::array_spec spec = core::parse_array_spec(*e.geometry->array);
          array_table::compact c;
          c.record = s.id;
          c.rest = core::task_ranges::of(spec.tasks);
          c.max_running = spec.max_running;
          e.charged_jobs = c.rest.size();
          intake_.arrays().add_compact(e.geometry->array_job_id.value_or(s.id), std::move(c));
          jobs().add(s.id, std::move(e));
          compact.push_back(s.id);
          ++pending;
          continue;
        } catch (const std::exception& ex) {
          logging::warn("array {}: unreadable pending tasks ({})", s.id, ex.what());
        }
      }
      jobs().add(s.id, std::move(e));
      if (admitted) {
        // Queued once every running job is back: their places count against
        // the accounting limits first, whatever order the store lists them in.
        queued.push_back(s.id);
      } else {
        view_.set_reason(s.id, "JobArrayTaskLimit");
      }
      ++pending;
      continue;
    }
    const core::processor_set procs = map_over(s.status.procs, n);
    const double start = s.status.start_time ? to_seconds(*s.status.start_time) : to_seconds(s.status.submit_time);
    try {
      sched_.restore(e.req, state == job_state::suspended ? job_state::suspended : job_state::running, procs, start);
    } catch (const std::exception& ex) {
      logging::warn("job {} cannot be restored ({}): marking it FAILED", s.id, ex.what());
      jobs().add(s.id, std::move(e));
      pipe_.transition(s.id, job_state::failed, std::nullopt, std::string("could not be recovered: ") + ex.what());
      pipe_.after_commit([this, id = s.id] { on_final(id, job_state::failed); });
      continue;
    }
    e.host = sched_.machine().node_of(procs.first());
    e.recovered = true;  // its agent must list it or report its end
    accounts_.restored(s.id, e, procs.count(), start, state == job_state::suspended);
    jobs().add(s.id, std::move(e));
    if (state == job_state::suspended && s.status.control == "resume") {
      // Asked to resume before aqsd stopped: it waits for room again.
      sched_.apply(core::event::on_job(core::event::kind::resume, static_cast<core::job_id>(s.id)));
      view_.set_reason(s.id, "Resources");
    }
    if (state == job_state::resizing) {
      const auto claimed = store::claimed_epoch(s.status.control);
      if (claimed && s.status.resize_procs) {
        // Its shim had begun to apply the new map: its ranks may run on
        // either map. Both stay its own until the shim, reconnected, says
        // which (its acknowledgement or refusal of that map).
        jobs().find(s.id)->control.clear();
        try {
          resizes_.resume_claimed(s.id, *claimed, map_over(*s.status.resize_procs, n));
          logging::info("job {} was applying map {} when aqsd stopped: waiting for it to report", s.id, *claimed);
        } catch (const std::exception& ex) {
          logging::warn("job {}: its claimed map {} cannot be restored ({}): killing it", s.id, *claimed, ex.what());
          resizes_.raise_epoch(s.id, *claimed);
          launcher_.send_kill(s.id, SIGKILL, std::chrono::seconds(0), true);
          launcher_.end_job(s.id, job_state::failed, std::nullopt, SIGKILL,
                  "its claimed map could not be restored after aqsd restarted: killed");
        }
      } else {
        // The map it was sent was never begun: it keeps its old one.
        pipe_.transition(s.id, job_state::running, procs, "resize abandoned: aqsd restarted");
      }
    }
    ++running;
  }
  for (const std::int64_t id : queued) intake_.admit_or_hold(id);
  for (const std::int64_t id : compact) intake_.admit_or_hold(id);
  for (std::size_t index : down) sched_.apply(core::event::on_node(core::event::kind::node_down, index));
  for (std::size_t index : drained) sched_.apply(core::event::on_node(core::event::kind::node_drain, index));
  // Each live job counts for its user's MaxJobsPerUser again (its text is
  // not counted: it is read from the store at launch).
  for (const auto& [id, e] : jobs().live()) intake_.ledger().add(e.uid, e.charged_jobs, 0);
  pipe_.want_decision();
  pipe_.hold(false);
  logging::info("recovered {} nodes, {} pending and {} running jobs", nodes_.size(), pending, running);
}

}  // namespace aqs::daemon
