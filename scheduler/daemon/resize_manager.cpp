// resize_manager: two-phase resizes of adaptive jobs: RESIZING with the new
// map sent to the job's shim, until it acknowledges or the resize times out.
#include "daemon/resize_manager.hpp"

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
                               resize_jobs& jobs, const node_manager& nodes, metrics& stats, resize_timeouts timeouts)
    : core_(core),
      clock_(time),
      out_(out),
      jobs_(jobs),
      nodes_(nodes),
      stats_(stats),
      timeouts_(timeouts),
      tracker_(time, std::move(strand)) {}

void resize_manager::arm(std::int64_t id, std::int64_t epoch) {
  tracker_.arm(id, epoch, timeouts_.resize, [this](std::int64_t job, std::int64_t e) {
    if (!out_.stopped()) expired(job, e);
  });
}

void resize_manager::arm_claim(std::int64_t id, std::int64_t epoch) {
  tracker_.arm(id, epoch, timeouts_.claim, [this](std::int64_t job, std::int64_t e) {
    if (!out_.stopped()) claim_expired(job, e);
  });
}

void resize_manager::begin(std::int64_t id, const core::processor_set& to) {
  out_.transition(id, job_state::resizing, to, "resize to " + std::to_string(to.count()) + " processors");
  out_.after_commit([this, id] {
    if (!jobs_.is_live(id)) return;
    const std::int64_t epoch = tracker_.next_epoch(id);
    stats_.resize_started();
    if (const core::job* j = core_.find(static_cast<core::job_id>(id))) {
      out_.notify(id, job_state::resizing, std::nullopt, std::nullopt, &j->procs);
    }
    send_map(id);
    arm(id, epoch);
  });
}

void resize_manager::attach_shim(std::int64_t id, const std::shared_ptr<connection>& c, std::int64_t seen) {
  tracker_.attach_shim(id, c);
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
  out_.transition(m.job_id, job_state::running, to, ack_note(m, sent));
  out_.after_commit([this, c, rid = m.id, id = m.job_id, to] {
    c->send(protocol::ok{rid, {}});
    out_.notify(id, job_state::running, std::nullopt, std::nullopt, &to);
  });
  out_.decide();
}

void resize_manager::handle_resize_refused(const std::shared_ptr<connection>& c, const protocol::resize_refused& m) {
  const core::job* j = current_resize(c, m.id, m.job_id, m.epoch);
  if (j == nullptr) return;
  logging::warn("job {} cannot apply map {}: {}; it keeps its {} processors", m.job_id, m.epoch, m.reason,
                j->procs.count());
  c->send(protocol::ok{m.id, {}});
  stats_.resize_ended("refused", -1.0);
  keep_old_processors(m.job_id, "resize refused by the job: " + m.reason);
}

void resize_manager::expired(std::int64_t id, std::int64_t epoch) {
  const core::job* j = core_.find(static_cast<core::job_id>(id));
  if (j == nullptr || !jobs_.is_live(id) || j->state != job_state::resizing || tracker_.epoch(id) != epoch) return;
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
  stats_.resize_ended("timeout", -1.0);
  tracker_.disarm(id);
  jobs_.kill_uncertain(id, "resize claimed but not acknowledged within " + std::to_string(timeouts_.claim.count()) +
                               " ms: killed (its processors were uncertain)");
}

void resize_manager::keep_old_processors(std::int64_t id, const std::string& note) {
  const core::job* j = core_.find(static_cast<core::job_id>(id));
  if (j == nullptr) return;
  const core::processor_set old = j->procs;
  core_.apply(core::event::on_job(core::event::kind::resize_timeout, static_cast<core::job_id>(id)));
  tracker_.disarm(id);
  out_.transition(id, job_state::running, old, note);
  out_.after_commit([this, id, old] { out_.notify(id, job_state::running, std::nullopt, std::nullopt, &old); });
  out_.decide();
}

}  // namespace aqs::daemon
