// resize: two-phase resizes of adaptive jobs: RESIZING with the new map sent
// to the job's shim, until it acknowledges or the resize times out.
#include <boost/asio/steady_timer.hpp>

#include "daemon/controller.hpp"
#include "daemon/log.hpp"

namespace aqs::daemon {

using core::job_state;

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
    conn->send(protocol::new_map{id, it->second.epoch, j->target.to_string()});
  }
}

void controller::handle_resize_ack(const conn_ptr& c, const protocol::resize_ack& m) {
  if (c->peer().job_id != m.job_id) {
    return reply_error(c, m.id, protocol::error_code::unauthorized,
                       "this connection speaks for job " + std::to_string(c->peer().job_id.value_or(0)));
  }
  const core::job* j = sched_.find(static_cast<core::job_id>(m.job_id));
  auto it = jobs_.find(m.job_id);
  if (j == nullptr || it == jobs_.end() || j->state != job_state::resizing || it->second.epoch != m.epoch) {
    return reply_error(c, m.id, protocol::error_code::invalid_state,
                       "map " + std::to_string(m.epoch) + " of job " + std::to_string(m.job_id) + " is not the current one");
  }
  if (m.procs != j->target.to_string()) {
    return reply_error(c, m.id, protocol::error_code::bad_request, "the acknowledged map is not the one sent");
  }
  const core::processor_set to = j->target;
  sched_.apply(core::event::on_job(core::event::kind::resize_ack, static_cast<core::job_id>(m.job_id)));
  resize_timers_.erase(m.job_id);
  transition(m.job_id, job_state::running, to, "resize acknowledged");
  after_commit([this, c, rid = m.id, id = m.job_id, to] {
    c->send(protocol::ok{rid, {}});
    notify(id, job_state::running, std::nullopt, std::nullopt, &to);
  });
  decide_needed_ = true;
  kick();
}

void controller::resize_expired(std::int64_t id, std::int64_t epoch) {
  const core::job* j = sched_.find(static_cast<core::job_id>(id));
  auto it = jobs_.find(id);
  if (j == nullptr || it == jobs_.end() || j->state != job_state::resizing || it->second.epoch != epoch) return;
  const core::processor_set old = j->procs;
  log("job {} did not apply map {} within {} ms: it keeps its {} processors", id, epoch,
      options_.resize_timeout.count(), old.count());
  sched_.apply(core::event::on_job(core::event::kind::resize_timeout, static_cast<core::job_id>(id)));
  resize_timers_.erase(id);
  transition(id, job_state::running, old, "resize timed out: keeps its processors");
  after_commit([this, id, old] { notify(id, job_state::running, std::nullopt, std::nullopt, &old); });
  decide_needed_ = true;
  kick();
}

}  // namespace aqs::daemon
