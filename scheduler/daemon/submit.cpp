// submit: durable submission, then arrival in the core or, while
// dependencies are unfinished, in the held set.
#include <boost/asio/post.hpp>

#include "daemon/controller.hpp"
#include "daemon/permissions.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

namespace asio = boost::asio;
using core::job_state;

void controller::handle_submit(const conn_ptr& c, const protocol::submit& s) {
  const peer_info& p = c->peer();
  if (!may_submit(p)) {
    reply_error(c, s.id, protocol::error_code::permission_denied,
                "jobs are submitted over the Unix socket, where the kernel vouches for the user");
    return;
  }
  submitter who{user_name_of(*p.uid), static_cast<std::int32_t>(*p.uid), static_cast<std::int32_t>(p.gid.value_or(*p.uid))};
  if (s.job.afterok.empty()) return store_submission(c, s, who, {});
  // Dependencies are checked against the store, off the session's thread.
  asio::post(readers_, [this, c, s, who] {
    std::map<std::int64_t, job_state> deps;
    for (std::int64_t d : s.job.afterok) {
      std::optional<store::job_record> rec;
      try {
        rec = store_.get_job(d);
      } catch (const std::exception& e) {
        reply_error(c, s.id, protocol::error_code::internal, std::string("cannot check dependencies: ") + e.what());
        return;
      }
      if (!rec) {
        reply_error(c, s.id, protocol::error_code::not_found, "dependency job " + std::to_string(d) + " does not exist");
        return;
      }
      deps[d] = rec->status.state;
    }
    store_submission(c, s, who, std::move(deps));
  });
}

void controller::store_submission(const conn_ptr& c, const protocol::submit& s, const submitter& who,
                                  std::map<std::int64_t, job_state> deps) {
  auto done = [this, c, s, who, deps](std::int64_t id, bool created, std::exception_ptr error) {
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const store::store_unavailable& e) {
        // Not stored, not acknowledged: the client may retry with its token.
        reply_error(c, s.id, protocol::error_code::internal,
                    std::string("store unavailable, retrying (submit again): ") + e.what());
      } catch (const std::exception& e) {
        reply_error(c, s.id, protocol::error_code::bad_request, e.what());
      }
      return;
    }
    // The reply goes out from the strand, after the arrival: a client that
    // acts on the id at once (fkill, watch_job) finds the job known.
    post([this, c, s, who, deps, id, created] {
      if (created) {
        metrics_.submitted();
        arrive(id, s.job, who, deps);
      }
      c->send(protocol::make_ok(s.id, protocol::submit_reply{id}));
    });
  };
  try {
    store_.submit_then(to_store_request(s.job, who), std::move(done));
  } catch (const store::store_unavailable& e) {
    reply_error(c, s.id, protocol::error_code::internal, std::string("store unavailable, retrying (submit again): ") + e.what());
  } catch (const store::store_error& e) {
    reply_error(c, s.id, protocol::error_code::bad_request, e.what());
  }
}

std::optional<job_state> controller::known_state(std::int64_t id) const {
  if (const final_info* f = jobs_.finished(id)) return f->state;
  if (jobs_.is_live(id)) {
    const core::job* j = sched_.find(static_cast<core::job_id>(id));
    return j ? j->state : job_state::pending;
  }
  return std::nullopt;
}

void controller::arrive(std::int64_t id, protocol::job_spec spec, submitter who,
                        std::map<std::int64_t, job_state> dep_states) {
  if (jobs_.is_known(id)) return;  // a retried token
  job_entry e;
  e.user = who.user;
  e.uid = who.uid;
  e.gid = who.gid;
  e.deps = spec.afterok;
  e.dep_known = std::move(dep_states);
  e.interactive = spec.interactive;
  e.req = to_core_request(id, spec, who.user, now());
  e.spec = std::move(spec);
  jobs_.add(id, std::move(e));
  view_.set_owner(id, who.uid);
  notify(id, job_state::pending, std::nullopt, std::nullopt, nullptr);  // nobody watches yet: the event stream
  admit_or_hold(id);
}

void controller::admit_or_hold(std::int64_t id) {
  job_entry* e = jobs_.find(id);
  if (e == nullptr) return;
  deps_.release(id);
  const auto v = dependency_gate::evaluate(e->deps, [&](std::int64_t d) {
    std::optional<job_state> st = known_state(d);
    if (!st) {
      auto k = e->dep_known.find(d);
      if (k != e->dep_known.end()) st = k->second;
    }
    return st;
  });
  switch (v.what) {
    case dependency_gate::verdict::kind::never: {
      const std::string why =
          "dependency " + std::to_string(v.failed_dep) + " ended " + std::string(core::to_string(v.failed_state));
      logging::info("job {} cancelled: {}", id, why);
      transition(id, job_state::cancelled, std::nullopt, why);
      after_commit([this, id] { on_final(id, job_state::cancelled); });
      kick();
      return;
    }
    case dependency_gate::verdict::kind::waiting:
      deps_.hold(id, v.waiting);
      return;
    case dependency_gate::verdict::kind::ready:
      break;
  }
  sched_.apply(core::event::arrival(e->req));
  decide_needed_ = true;
  kick();
}

void controller::on_final(std::int64_t id, job_state state, std::optional<std::int32_t> code,
                          std::optional<std::int32_t> signal) {
  jobs_.finish(id, state, code, signal);
  metrics_.job_ended(std::string(core::to_string(state)));
  end_steps_of_job(id);
  deps_.release(id);
  resizes_.forget(id);
  view_.forget_job(id);  // the token dies with the job
  notify(id, state, code, signal, nullptr);
  watchers_.forget(id);
  for (std::int64_t h : deps_.ended(id)) admit_or_hold(h);
}

}  // namespace aqs::daemon
