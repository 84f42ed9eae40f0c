// job_watchers (job_watchers.hpp): frun's watches and the change sinks.
#include "daemon/job_watchers.hpp"

#include "daemon_base/permissions.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

using core::job_state;

void job_watchers::handle_watch(const std::shared_ptr<connection>& c, const protocol::watch_job& m) {
  auto send_final = [c, m](job_state st, std::optional<std::int32_t> code, std::optional<std::int32_t> sig) {
    c->send(protocol::ok{m.id, {}});
    protocol::job_event ev;
    ev.id = m.id;
    ev.job_id = m.job_id;
    ev.state = st;
    if (code) ev.exit_code = *code;
    if (sig) ev.signal = *sig;
    c->send(ev);
  };
  auto refuse = [c, m] {
    reply_error(c, m.id, protocol::error_code::permission_denied,
                "job " + std::to_string(m.job_id) + " belongs to another user: only its owner and root may watch it");
  };
  if (const final_info* f = jobs_.finished(m.job_id)) {
    if (!may_act_on_job(c->peer(), f->uid)) return refuse();
    return send_final(f->state, f->exit_code, f->signal);
  }
  const job_entry* live = jobs_.find(m.job_id);
  if (live == nullptr) {
    pipe_.on_readers([this, c, m, send_final, refuse] {
      try {
        auto rec = pipe_.store().get_job(m.job_id);
        if (!rec) return reply_error(c, m.id, protocol::error_code::not_found, "no job " + std::to_string(m.job_id));
        if (!may_act_on_job(c->peer(), rec->request.uid)) return refuse();
        send_final(rec->status.state, rec->status.exit_code, rec->status.term_signal);
      } catch (const std::exception& e) {
        reply_error(c, m.id, protocol::error_code::internal, e.what());
      }
    });
    return;
  }
  if (!may_act_on_job(c->peer(), live->uid)) return refuse();
  c->streaming();  // a stream, not an idle connection
  c->send(protocol::ok{m.id, {}});
  protocol::job_event ev;
  ev.id = m.id;
  ev.job_id = m.job_id;
  const core::job* j = core_.find(static_cast<core::job_id>(m.job_id));
  ev.state = j ? j->state : job_state::pending;
  if (j && core::holds_processors(j->state)) ev.procs = j->procs.to_string();
  c->send(ev);
  watches_.add(m.job_id, c, m.id);  // and the output that came before it
}

void job_watchers::handle_output(const std::shared_ptr<connection>& c, const protocol::output& m) {
  const node_entry* from = nodes_.of_conn(*c);
  const job_entry* live = jobs_.find(m.job_id);
  if (from == nullptr || live == nullptr || (live->host != from->index && !steps_.runs(m.job_id, from->index))) {
    return;  // not a job this node runs: nobody is shown what it claims
  }
  watches_.output(m);
}

void job_watchers::notify(std::int64_t id, job_state state, std::optional<std::int32_t> code,
                        std::optional<std::int32_t> signal, const core::processor_set* procs) {
  watches_.notify(id, state, code, signal, procs);
  if (!sinks_.empty()) {
    job_change ch;
    ch.job_id = id;
    ch.state = state;
    ch.exit_code = code;
    ch.signal = signal;
    if (procs != nullptr && procs->any()) ch.procs = procs->to_string();
    if (state == job_state::resizing) {
      if (const core::job* j = core_.find(static_cast<core::job_id>(id))) ch.target = j->target.to_string();
    }
    ch.time = clock_.wall_seconds();
    for (const auto& sink : sinks_) {
      try {
        sink(ch);
      } catch (const std::exception& e) {
        logging::warn("a change listener failed: {}", e.what());
      }
    }
  }
}

}  // namespace aqs::daemon
