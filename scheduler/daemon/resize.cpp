// resize: two-phase resizes of adaptive jobs: RESIZING with the new map sent
// to the job's shim, until it acknowledges or the resize times out (a map
// the shim has claimed with resize_begin no longer times out).
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <fmt/format.h>

#include "daemon/controller.hpp"
#include "daemon/log.hpp"

namespace aqs::daemon {

using core::job_state;

namespace {

std::int64_t wall_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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

void controller::begin_resize(std::int64_t id, const core::processor_set& to) {
  transition(id, job_state::resizing, to, "resize to " + std::to_string(to.count()) + " processors");
  after_commit([this, id] {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return;
    const std::int64_t epoch = ++it->second.epoch;
    if (const core::job* j = sched_.find(static_cast<core::job_id>(id))) {
      notify(id, job_state::resizing, std::nullopt, std::nullopt, &j->procs);
    }
    send_map(id);
    auto timer = std::make_unique<boost::asio::steady_timer>(strand_, options_.resize_timeout);
    timer->async_wait([this, id, epoch](boost::system::error_code ec) {
      if (!ec && !stopped_) resize_expired(id, epoch);
    });
    resize_timers_[id] = std::move(timer);
  });
}

void controller::send_map(std::int64_t id) {
  const core::job* j = sched_.find(static_cast<core::job_id>(id));
  auto it = jobs_.find(id);
  auto sh = shims_.find(id);
  if (j == nullptr || j->state != job_state::resizing || it == jobs_.end() || it->second.epoch == 0 ||
      sh == shims_.end()) {
    return;
  }
  if (auto conn = sh->second.lock()) {
    it->second.map_sent_us = wall_clock_us();
    protocol::new_map m{id, it->second.epoch, j->target.to_string(), {}, {}};
    fill_placement(j->target, m.proc_hosts, m.proc_cpus);
    conn->send(std::move(m));
  }
}

const core::job* controller::current_resize(const conn_ptr& c, std::int64_t rid, std::int64_t job_id,
                                           std::int64_t epoch) {
  if (c->peer().job_id != job_id) {
    reply_error(c, rid, protocol::error_code::unauthorized,
                "this connection speaks for job " + std::to_string(c->peer().job_id.value_or(0)));
    return nullptr;
  }
  const core::job* j = sched_.find(static_cast<core::job_id>(job_id));
  auto it = jobs_.find(job_id);
  if (j == nullptr || it == jobs_.end() || j->state != job_state::resizing || it->second.epoch != epoch) {
    reply_error(c, rid, protocol::error_code::invalid_state,
                "map " + std::to_string(epoch) + " of job " + std::to_string(job_id) + " is not the current one");
    return nullptr;
  }
  return j;
}

void controller::handle_resize_begin(const conn_ptr& c, const protocol::resize_begin& m) {
  // A map that timed out or was replaced gets invalid_state here, and the
  // job does not apply it: it never runs on processors aqsd took back.
  if (current_resize(c, m.id, m.job_id, m.epoch) == nullptr) return;
  // Under way: spawning ranks on other hosts may outlast --resize-timeout on
  // a loaded machine; the ack (or the job's end) closes the resize now.
  resize_timers_.erase(m.job_id);
  c->send(protocol::ok{m.id, {}});
}

void controller::handle_resize_ack(const conn_ptr& c, const protocol::resize_ack& m) {
  const core::job* j = current_resize(c, m.id, m.job_id, m.epoch);
  if (j == nullptr) return;
  auto it = jobs_.find(m.job_id);
  if (m.procs != j->target.to_string()) {
    return reply_error(c, m.id, protocol::error_code::bad_request, "the acknowledged map is not the one sent");
  }
  const core::processor_set to = j->target;
  sched_.apply(core::event::on_job(core::event::kind::resize_ack, static_cast<core::job_id>(m.job_id)));
  resize_timers_.erase(m.job_id);
  transition(m.job_id, job_state::running, to, ack_note(m, it->second.map_sent_us));
  after_commit([this, c, rid = m.id, id = m.job_id, to] {
    c->send(protocol::ok{rid, {}});
    notify(id, job_state::running, std::nullopt, std::nullopt, &to);
  });
  decide_needed_ = true;
  kick();
}

void controller::handle_resize_refused(const conn_ptr& c, const protocol::resize_refused& m) {
  const core::job* j = current_resize(c, m.id, m.job_id, m.epoch);
  if (j == nullptr) return;
  log("job {} cannot apply map {}: {}; it keeps its {} processors", m.job_id, m.epoch, m.reason, j->procs.count());
  c->send(protocol::ok{m.id, {}});
  keep_old_processors(m.job_id, "resize refused by the job: " + m.reason);
}

void controller::resize_expired(std::int64_t id, std::int64_t epoch) {
  const core::job* j = sched_.find(static_cast<core::job_id>(id));
  auto it = jobs_.find(id);
  if (j == nullptr || it == jobs_.end() || j->state != job_state::resizing || it->second.epoch != epoch) return;
  log("job {} did not apply map {} within {} ms: it keeps its {} processors", id, epoch,
      options_.resize_timeout.count(), j->procs.count());
  keep_old_processors(id, "resize timed out: keeps its processors");
}

void controller::keep_old_processors(std::int64_t id, const std::string& note) {
  const core::job* j = sched_.find(static_cast<core::job_id>(id));
  if (j == nullptr) return;
  const core::processor_set old = j->procs;
  sched_.apply(core::event::on_job(core::event::kind::resize_timeout, static_cast<core::job_id>(id)));
  resize_timers_.erase(id);
  transition(id, job_state::running, old, note);
  after_commit([this, id, old] { notify(id, job_state::running, std::nullopt, std::nullopt, &old); });
  decide_needed_ = true;
  kick();
}

}  // namespace aqs::daemon
