// resize_manager: two-phase resizes of adaptive jobs: RESIZING with the new
// map sent to the job's shim, until it acknowledges or the resize times out.
#include "daemon/resize_manager.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "logging/log.hpp"

namespace aqs::daemon {

using core::job_state;

namespace {

std::string ms(std::int64_t us) { return fmt::format("{:.1f} ms", static_cast<double>(us) / 1000.0); }

// The job_events note of an acknowledged map: the phases as the shim saw them.
std::string ack_note(const protocol::resize_ack& m, std::int64_t sent_us) {
  std::string note = "resize acknowledged: map " + std::to_string(m.epoch);
  if (m.received_at_us && sent_us > 0) note += ", delivered in " + ms(std::max<std::int64_t>(0, *m.received_at_us - sent_us));
  if (m.wait_us) note += ", waited " + ms(*m.wait_us) + " for MPI_Migrate";
  if (m.spawn_us) note += ", spawn " + ms(*m.spawn_us);
  if (m.data_us) note += ", data " + ms(*m.data_us);
  if (m.total_us) note += ", total " + ms(*m.total_us);
  return note;
}

}  // namespace

resize_manager::resize_manager(core::scheduler& core, clock& time, boost::asio::any_io_executor strand, pipeline& out,
                               resize_jobs& jobs, node_manager& nodes, metrics& stats, resize_timeouts timeouts)
    : core_(core),
      clock_(time),
      out_(out),
      jobs_(jobs),
      nodes_(nodes),
      stats_(stats),
      timeouts_(timeouts),
      tracker_(time, std::move(strand)) {
  nodes_.on_registered([this](std::size_t index, const std::vector<std::int64_t>& kept) { agent_registered(index, kept); });
}

void resize_manager::tell_cpus(std::int64_t id, const core::processor_set& where, const core::processor_set& use) {
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    const node_entry& e = nodes_.at(n);
    if (where.count_range(e.first_proc, e.first_proc + e.nprocs) == 0 || !nodes_.is_up(n)) continue;
    std::vector<std::int64_t> cpus;
    if (use.size() > 0) cpus = node_registry::local_cpus(e, use);
    nodes_.send(n, protocol::job_cpus{nodes_.new_request_id(), id, std::move(cpus)});
  }
}

void resize_manager::agent_registered(std::size_t index, const std::vector<std::int64_t>& kept) {
  const node_entry& e = nodes_.at(index);
  for (const std::int64_t id : kept) {
    const core::job* j = core_.find(static_cast<core::job_id>(id));
    if (j == nullptr || !j->adaptive() || !jobs_.is_live(id) || !core::holds_processors(j->state)) continue;
    // While a map is out the job may run on both maps' cpus.
    const core::processor_set now = j->state == job_state::resizing ? j->procs | j->target : j->procs;
    if (now.count_range(e.first_proc, e.first_proc + e.nprocs) == 0) continue;  // none here: launch's cpus hold
    nodes_.send(index, protocol::job_cpus{nodes_.new_request_id(), id, node_registry::local_cpus(e, now)});
  }
}

void resize_manager::arm(std::int64_t id, std::int64_t epoch) {
  auto timeout = timeouts_.resize;
  const core::job* j = core_.find(static_cast<core::job_id>(id));
  if (j != nullptr && !tracker_.had_shim(id)) {
    // No shim yet: the map waits for it only until the grace is over.
    const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::duration<double>(std::max(0.0, clock_.wall_seconds() - j->start_time)));
    const auto left = std::max(k_no_shim_grace - age, std::chrono::milliseconds(1'000));
    timeout = std::min(timeout, left);
  }
  tracker_.arm(id, epoch, timeout, [this](std::int64_t job, std::int64_t e) {
    if (!out_.stopped()) expired(job, e);
  });
}

void resize_manager::arm_claim(std::int64_t id, std::int64_t epoch) {
  tracker_.arm(id, epoch, timeouts_.claim, [this](std::int64_t job, std::int64_t e) {
    if (!out_.stopped()) claim_expired(job, e);
  });
}

bool resize_manager::shim_overdue(const core::job& j) const {
  const auto grace_s = std::chrono::duration<double>(k_no_shim_grace).count();
  const std::int64_t id = static_cast<std::int64_t>(j.req.id);
  return !tracker_.had_shim(id) && j.start_time >= 0 && clock_.wall_seconds() - j.start_time >= grace_s &&
         clock_.now() - tracker_.since() >= k_no_shim_grace;
}

void resize_manager::limit_range(std::int64_t id, std::size_t min, std::size_t max, const std::string& note) {
  core_.apply(core::event::change(static_cast<core::job_id>(id), min, max));
  store::control_change u;
  u.job_id = id;
  u.min_pe = static_cast<std::int32_t>(min);
  u.max_pe = static_cast<std::int32_t>(max);
  u.reason = note;
  out_.record_update(std::move(u));
}

void resize_manager::withdraw_and_limit(std::int64_t id, std::size_t min, std::size_t max, const std::string& note) {
  // Nothing was sent or stored for this resize yet: the core alone takes it
  // back (the job keeps its processors), and the new range keeps it there.
  core_.apply(core::event::on_job(core::event::kind::resize_timeout, static_cast<core::job_id>(id)));
  limit_range(id, min, max, note);
  out_.decide();
}

void resize_manager::begin(std::int64_t id, const core::processor_set& to) {
  if (const core::job* j = core_.find(static_cast<core::job_id>(id)); j != nullptr && shim_overdue(*j)) {
    // A plain script submitted --adaptive: it would hold processors RESIZING
    // for a map it can never apply.
    const std::size_t n = j->nprocs;
    logging::info("job {} is --adaptive but its runtime shim never connected: rigid at {} processors", id, n);
    tracker_.made_rigid(id, j->req.min_pe, j->req.max_pe);
    withdraw_and_limit(id, n, n,
                       "no runtime shim connected within " +
                           std::to_string(std::chrono::duration_cast<std::chrono::seconds>(k_no_shim_grace).count()) +
                           " s of its start: treated as rigid at " + std::to_string(n) + " processors");
    return;
  }
  out_.transition(id, job_state::resizing, to, "resize to " + std::to_string(to.count()) + " processors");
  out_.after_commit([this, id] {
    if (!jobs_.is_live(id)) return;
    const std::int64_t epoch = tracker_.next_epoch(id);
    stats_.resize_started();
    if (const core::job* j = core_.find(static_cast<core::job_id>(id))) {
      out_.notify(id, job_state::resizing, std::nullopt, std::nullopt, &j->procs);
      // Before the map: the ranks that stay and those it starts may run
      // on both maps' cpus until the shim says the new one is in effect.
      // (On the agents' connections, ahead of the shim's claim and spawns.)
      const core::processor_set both = j->procs | j->target;
      tell_cpus(id, both, both);
    }
    send_map(id);
    arm(id, epoch);
  });
}

void resize_manager::attach_shim(std::int64_t id, const std::shared_ptr<connection>& c, std::int64_t seen) {
  tracker_.attach_shim(id, c);
  if (const auto range = tracker_.take_range_before(id)) {
    // Made rigid for want of a shim, and here it is after all (a slow start):
    // the job gets its range back.
    const core::job* j = core_.find(static_cast<core::job_id>(id));
    if (j != nullptr && j->state == job_state::running) {
      limit_range(id, range->first, range->second,
                  "runtime shim connected: adaptive again, range " + std::to_string(range->first) + ".." +
                      std::to_string(range->second));
      out_.decide();
    }
  }
  if (seen > 0 && seen >= tracker_.epoch(id) && !tracker_.claimed(id)) {
    // aqsd restarted since the job saw map `seen`: a shim ignores a map no
    // newer than one it has seen, so the job's maps are numbered above it.
    tracker_.raise_epoch(id, seen);
    const core::job* j = core_.find(static_cast<core::job_id>(id));
    if (j != nullptr && j->state == job_state::resizing) {
      // A map numbered before aqsd knew: renumbered, its timeout anew.
      arm(id, tracker_.next_epoch(id));
    }
  }
  send_map(id);  // a resize already under way
}

void resize_manager::resume_claimed(std::int64_t id, std::int64_t epoch, const core::processor_set& target) {
  core_.restore_resize(static_cast<core::job_id>(id), target);
  tracker_.raise_epoch(id, epoch);
  tracker_.set_claimed(id);
  // Its shim reconnects and repeats its acknowledgement (or refusal) of the
  // map; one that never does is killed, as for a claim aqsd saw.
  arm_claim(id, epoch);
}

void resize_manager::send_map(std::int64_t id) {
  const core::job* j = core_.find(static_cast<core::job_id>(id));
  const std::int64_t epoch = tracker_.epoch(id);
  if (j == nullptr || j->state != job_state::resizing || !jobs_.is_live(id) || epoch == 0) return;
  if (auto conn = tracker_.shim(id)) {
    tracker_.map_sent(id, clock_.wall_us());
    protocol::new_map m{id, epoch, j->target.to_string(), {}, {}};
    nodes_.fill_placement(j->target, m.proc_hosts, m.proc_cpus);
    conn->send(std::move(m));
  }
}

const core::job* resize_manager::current_resize(const std::shared_ptr<connection>& c, std::int64_t rid,
                                                std::int64_t job_id, std::int64_t epoch) {
  if (c->peer().job_id != job_id) {
    reply_error(c, rid, protocol::error_code::unauthorized,
                "this connection speaks for job " + std::to_string(c->peer().job_id.value_or(0)));
    return nullptr;
  }
  const core::job* j = core_.find(static_cast<core::job_id>(job_id));
  if (j == nullptr || !jobs_.is_live(job_id) || j->state != job_state::resizing || tracker_.epoch(job_id) != epoch) {
    reply_error(c, rid, protocol::error_code::invalid_state,
                "map " + std::to_string(epoch) + " of job " + std::to_string(job_id) + " is not the current one");
    return nullptr;
  }
  return j;
}

void resize_manager::handle_resize_begin(const std::shared_ptr<connection>& c, const protocol::resize_begin& m) {
  // A map that timed out or was replaced gets invalid_state here, and the
  // job does not apply it: it never runs on processors aqsd took back.
  if (current_resize(c, m.id, m.job_id, m.epoch) == nullptr) return;
  if (tracker_.claimed(m.job_id)) {
    c->send(protocol::ok{m.id, {}});  // asked again: it was already granted
    return;
  }
  // Under way: spawning ranks on other hosts may outlast --resize-timeout on
  // a loaded machine; the ack (or the job's end) closes the resize now, or
  // the longer claim timeout: a job that never acknowledges (its leader hung
  // in MPI, its ack lost with its connection) must not hold the resize open
  // for ever with its ranks on either map.
  tracker_.set_claimed(m.job_id);
  arm_claim(m.job_id, m.epoch);
  // Stored before the job may go on: from here its ranks may run on either
  // map, and an aqsd restarted before the acknowledgement must know that
  // (recover.cpp) rather than give the new map's processors to others.
  out_.record_update({m.job_id, store::claim_control(m.epoch), std::nullopt, std::nullopt, std::nullopt,
                      "map " + std::to_string(m.epoch) + " claimed by the job: applying it"});
  out_.after_commit([c, rid = m.id] { c->send(protocol::ok{rid, {}}); });
  out_.kick();
}

void resize_manager::handle_resize_ack(const std::shared_ptr<connection>& c, const protocol::resize_ack& m) {
  const core::job* j = current_resize(c, m.id, m.job_id, m.epoch);
  if (j == nullptr) return;
  if (m.procs != j->target.to_string()) {
    return reply_error(c, m.id, protocol::error_code::bad_request, "the acknowledged map is not the one sent");
  }
  const core::processor_set to = j->target;
  const core::processor_set both = j->procs | to;
  const bool grew = to.count() > j->procs.count();
  core_.apply(core::event::on_job(core::event::kind::resize_ack, static_cast<core::job_id>(m.job_id)));
  tracker_.disarm(m.job_id);
  const std::int64_t sent = tracker_.sent_us(m.job_id);
  stats_.resize_ended("acked", sent > 0 ? static_cast<double>(clock_.wall_us() - sent) / 1e6 : -1.0);
  auto phase = [&](const char* name, const std::optional<std::int64_t>& us) {
    if (us) stats_.resize_phase(name, static_cast<double>(*us) / 1e6);
  };
  phase("wait", m.wait_us);
  phase("spawn", m.spawn_us);
  phase("data", m.data_us);
  phase("total", m.total_us);
  if (grew) tracker_.expand_done(m.job_id);
  out_.transition(m.job_id, job_state::running, to, ack_note(m, sent));
  out_.after_commit([this, c, rid = m.id, id = m.job_id, to, both] {
    c->send(protocol::ok{rid, {}});
    out_.notify(id, job_state::running, std::nullopt, std::nullopt, &to);
    // The ranks on processors it gave up have left them: the cpusets shrink
    // to the new map (to none on a node it left).
    if (jobs_.is_live(id)) tell_cpus(id, both, to);
  });
  out_.decide();
}

void resize_manager::handle_resize_refused(const std::shared_ptr<connection>& c, const protocol::resize_refused& m) {
  const core::job* j = current_resize(c, m.id, m.job_id, m.epoch);
  if (j == nullptr) return;
  logging::warn("job {} cannot apply map {}: {}; it keeps its {} processors", m.job_id, m.epoch, m.reason,
                j->procs.count());
  c->send(protocol::ok{m.id, {}});
  const std::size_t now_on = j->procs.count(), wanted = j->target.count();
  const std::size_t min_pe = j->req.min_pe;
  if (wanted <= now_on || !tracker_.claimed(m.job_id)) {
    stats_.resize_ended("refused", -1.0);
    keep_old_processors(m.job_id, "resize refused by the job: " + m.reason);
    return;
  }
  // An expand the job began and could not finish: its shim took it back to
  // the map it had, and it computes on.
  const std::int64_t sent = tracker_.sent_us(m.job_id);
  const double after_s = sent > 0 ? static_cast<double>(std::max<std::int64_t>(0, clock_.wall_us() - sent)) / 1e6 : 0.0;
  stats_.resize_ended("abandoned", -1.0);
  keep_old_processors(m.job_id, fmt::format("expand to {} abandoned after {:.1f} s: {}; running on {}", wanted, after_s,
                                            m.reason, now_on));
  const int times = tracker_.note_abandoned(m.job_id);
  if (times >= k_abandoned_expands_limit) {
    logging::warn("job {}: {} expands in a row abandoned: no more growth is offered to it", m.job_id, times);
    limit_range(m.job_id, std::min(min_pe, now_on), now_on,
                fmt::format("growth stopped after {} abandoned expands in a row: maximum lowered to {} (fctl update "
                            "--max raises it again)",
                            times, now_on));
  }
}

void resize_manager::expired(std::int64_t id, std::int64_t epoch) {
  const core::job* j = core_.find(static_cast<core::job_id>(id));
  if (j == nullptr || !jobs_.is_live(id) || j->state != job_state::resizing || tracker_.epoch(id) != epoch) return;
  if (!tracker_.had_shim(id) && shim_overdue(*j)) {
    const std::size_t n = j->procs.count();
    logging::info("job {} is --adaptive but its runtime shim never connected: rigid at {} processors", id, n);
    tracker_.made_rigid(id, j->req.min_pe, j->req.max_pe);
    stats_.resize_ended("timeout", -1.0);
    keep_old_processors(id, "resize withdrawn: the job has no runtime shim");
    limit_range(id, n, n,
                "no runtime shim connected within " +
                    std::to_string(std::chrono::duration_cast<std::chrono::seconds>(k_no_shim_grace).count()) +
                    " s of its start: treated as rigid at " + std::to_string(n) + " processors");
    return;
  }
  logging::warn("job {} did not apply map {} within {} ms: it keeps its {} processors", id, epoch,
                timeouts_.resize.count(), j->procs.count());
  stats_.resize_ended("timeout", -1.0);
  keep_old_processors(id, "resize timed out: keeps its processors");
}

void resize_manager::claim_expired(std::int64_t id, std::int64_t epoch) {
  const core::job* j = core_.find(static_cast<core::job_id>(id));
  if (j == nullptr || !jobs_.is_live(id) || j->state != job_state::resizing || tracker_.epoch(id) != epoch) return;
  // Its ranks may run on the old map, the new one or both: neither can be
  // given to another job while they might. Killed, its processors are free.
  logging::warn("job {} began to apply map {} and did not acknowledge it within {} ms: killing it", id, epoch,
                timeouts_.claim.count());
  stats_.resize_ended("killed", -1.0);
  tracker_.disarm(id);
  jobs_.kill_uncertain(id, "resize claimed but not acknowledged within " + std::to_string(timeouts_.claim.count()) +
                               " ms: killed (its processors were uncertain)");
}

void resize_manager::keep_old_processors(std::int64_t id, const std::string& note) {
  const core::job* j = core_.find(static_cast<core::job_id>(id));
  if (j == nullptr) return;
  const core::processor_set old = j->procs;
  // The cpus the map out widened the job's cpusets to, if it went out.
  const core::processor_set both = j->state == job_state::resizing && tracker_.epoch(id) > 0 ? old | j->target : old;
  core_.apply(core::event::on_job(core::event::kind::resize_timeout, static_cast<core::job_id>(id)));
  tracker_.disarm(id);
  out_.transition(id, job_state::running, old, note);
  out_.after_commit([this, id, old, both] {
    out_.notify(id, job_state::running, std::nullopt, std::nullopt, &old);
    // The new map was not applied (its spawned ranks gone): back to the old.
    if (jobs_.is_live(id) && !(both == old)) tell_cpus(id, both, old);
  });
  out_.decide();
}

}  // namespace aqs::daemon
