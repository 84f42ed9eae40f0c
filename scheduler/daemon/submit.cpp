// submit: durable submission, then arrival in the core or, while
// dependencies are unfinished, in the held set.
#include <boost/asio/post.hpp>

#include "daemon/controller.hpp"
#include "daemon/log.hpp"

namespace aqs::daemon {

namespace asio = boost::asio;
using core::job_state;

void controller::handle_submit(const conn_ptr& c, const protocol::submit& s) {
  const peer_info& p = c->peer();
  if (p.via != transport::unix_socket || !p.uid) {
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
      if (created) arrive(id, s.job, who, deps);
      c->send(protocol::ok{s.id, {{"job_id", id}}});
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
  if (auto f = finished_.find(id); f != finished_.end()) return f->second.state;
  if (jobs_.count(id) != 0) {
    const core::job* j = sched_.find(static_cast<core::job_id>(id));
    return j ? j->state : job_state::pending;
  }
  return std::nullopt;
}

void controller::arrive(std::int64_t id, protocol::job_spec spec, submitter who,
                        std::map<std::int64_t, job_state> dep_states) {
  if (jobs_.count(id) != 0 || finished_.count(id) != 0) return;  // a retried token
  job_entry e;
  e.user = who.user;
  e.uid = who.uid;
  e.gid = who.gid;
  e.deps = spec.afterok;
  e.dep_known = std::move(dep_states);
  e.interactive = spec.interactive;
  e.req = to_core_request(id, spec, who.user, now());
  e.spec = std::move(spec);
  jobs_.emplace(id, std::move(e));
  {
    std::lock_guard lock(shared_mu_);
    owners_[id] = who.uid;
  }
  admit_or_hold(id);
}

void controller::admit_or_hold(std::int64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  job_entry& e = it->second;
  held_.erase(id);
  std::vector<std::int64_t> waiting;
  for (std::int64_t d : e.deps) {
    std::optional<job_state> st = known_state(d);
    if (!st) {
      auto k = e.dep_known.find(d);
      if (k != e.dep_known.end()) st = k->second;
    }
    if (st && *st == job_state::completed) continue;
    if (st && core::is_final(*st)) {
      const std::string why = "dependency " + std::to_string(d) + " ended " + std::string(core::to_string(*st));
      log("job {} cancelled: {}", id, why);
      transition(id, job_state::cancelled, std::nullopt, why);
      after_commit([this, id] { on_final(id, job_state::cancelled); });
      kick();
      return;
    }
    waiting.push_back(d);
  }
  if (!waiting.empty()) {
    held_.insert(id);
    for (std::int64_t d : waiting) dependents_.emplace(d, id);
    return;
  }
  sched_.apply(core::event::arrival(e.req));
  decide_needed_ = true;
  kick();
}

void controller::on_final(std::int64_t id, job_state state, std::optional<std::int32_t> code,
                          std::optional<std::int32_t> signal) {
  std::int32_t uid = 0;
  if (auto live = jobs_.find(id); live != jobs_.end()) uid = live->second.uid;
  if (finished_.insert_or_assign(id, final_info{state, uid, code, signal}).second) finished_order_.push_back(id);
  while (finished_order_.size() > k_finished_kept) {
    finished_.erase(finished_order_.front());
    finished_order_.pop_front();
  }
  end_steps_of_job(id);
  jobs_.erase(id);
  held_.erase(id);
  shims_.erase(id);
  resize_timers_.erase(id);
  {
    std::lock_guard lock(shared_mu_);
    owners_.erase(id);
    tokens_.erase(id);  // the token dies with the job
    job_addrs_.erase(id);
  }
  notify(id, state, code, signal, nullptr);
  auto [first, last] = dependents_.equal_range(id);
  std::vector<std::int64_t> waiting;
  for (auto it = first; it != last; ++it) waiting.push_back(it->second);
  dependents_.erase(first, last);
  for (std::int64_t h : waiting) {
    if (held_.count(h) != 0) admit_or_hold(h);
  }
}

}  // namespace aqs::daemon
