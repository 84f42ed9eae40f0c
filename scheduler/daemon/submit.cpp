// submit: durable submission, then arrival in the core or, while
// dependencies are unfinished, in the held set.
#include <atomic>
#include <memory>

#include <boost/asio/post.hpp>

#include "core/array_spec.hpp"
#include "core/dependency.hpp"
#include "core/signal_spec.hpp"

#include "daemon/controller.hpp"
#include "daemon/faucets_uplink.hpp"
#include "daemon/admission.hpp"
#include "daemon/partition_gate.hpp"
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
  // A Faucets token marks a job as the server's (held for it, reported to
  // it, adopted by it): only the uplink may give one.
  if (s.job.submit_token && placed_by_faucets(*s.job.submit_token) && !p.faucets_uplink) {
    reply_error(c, s.id, protocol::error_code::bad_request,
                "submit tokens starting with 'faucets:' are kept for jobs a Faucets server forwards");
    return;
  }
    // --signal is acted on by the agent (a warning before the time limit):
  // a value it could not act on is refused now, in one line.
  if (s.job.geometry) {
    for (const auto& r : s.job.geometry->recorded) {
      if (!r.starts_with("signal=")) continue;
      const auto spec = core::parse_signal_spec(std::string_view(r).substr(7));
      if (const auto* why = std::get_if<std::string>(&spec)) {
        reply_error(c, s.id, protocol::error_code::bad_request, *why);
        return;
      }
    }
  }
  submitter who{user_name_of(*p.uid), static_cast<std::int32_t>(*p.uid), static_cast<std::int32_t>(p.gid.value_or(*p.uid))};
  if (options_.partitions.configured) return handle_partition_submit(c, s, who);
  if (s.job.geometry) {
    // A job that asked for a layout the nodes can never give is refused now,
    // with the reason, rather than pending forever (Slurm does the same).
    if (auto why = view_.never_fits(to_core_request(0, s.job, who.user, 0))) {
      reply_error(c, s.id, protocol::error_code::bad_request, "the job can never run on this cluster: " + *why);
      return;
    }
  }
  submit_checked(c, s, who);
}

void controller::handle_partition_submit(const conn_ptr& c, const protocol::submit& asked, const submitter& who) {
  // The partitions' names, states, users and limits (partition_gate.hpp),
  // then whether the job fits any of their nodes at all.
  protocol::submit s = asked;
  const core::job_request r = to_core_request(0, s.job, who.user, 0);
  const auto admitted = admit_submission(options_.partitions, s.job, who, group_names_of(who.user, who.gid),
                                         [&](const core::partition* p) { return view_.never_fits(r, *p); });
  if (!admitted.error.empty()) {
    reply_error(c, s.id, protocol::error_code::bad_request, admitted.error);
    return;
  }
  submit_checked(c, s, who);
}

void controller::submit_checked(const conn_ptr& c, const protocol::submit& s, const submitter& who) {
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

protocol::submit_reply controller::submit_reply_for(const protocol::job_spec& job, std::int64_t id) const {
  protocol::submit_reply r{id, {}};
  // Scripts from other sites name their partitions: without any configured
  // here the job runs on every node, and the submitter is told.
  if (!options_.partitions.configured && job.geometry && job.geometry->partition) {
    r.warnings.push_back("partition '" + *job.geometry->partition +
                         "' is recorded; this cluster has one partition of all its nodes");
  }
  return r;
}

void controller::reply_store_refusal(const conn_ptr& c, std::int64_t request, std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const store::store_unavailable& e) {
    // Not stored, not acknowledged: the client may retry with its token.
    reply_error(c, request, protocol::error_code::internal,
                std::string("store unavailable, retrying (submit again): ") + e.what());
  } catch (const std::exception& e) {
    reply_error(c, request, protocol::error_code::bad_request, e.what());
  }
}

void controller::store_submission(const conn_ptr& c, const protocol::submit& s, const submitter& who,
                                  std::map<std::int64_t, job_state> deps) {
  if (s.job.geometry && s.job.geometry->array) return store_array(c, s, who, std::move(deps));
  auto done = [this, c, s, who, deps](std::int64_t id, bool created, std::exception_ptr error) {
    if (error) return reply_store_refusal(c, s.id, error);
    // The reply goes out from the strand, after the arrival: a client that
    // acts on the id at once (fkill, watch_job) finds the job known.
    post([this, c, s, who, deps, id, created] {
      if (created) {
        metrics_.submitted();
        arrive(id, s.job, who, deps);
      }
      c->send(protocol::make_ok(s.id, submit_reply_for(s.job, id)));
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

void controller::store_array(const conn_ptr& c, const protocol::submit& s, const submitter& who,
                             std::map<std::int64_t, job_state> deps) {
  const core::array_spec spec = core::parse_array_spec(*s.job.geometry->array);  // validated with the message
  const std::size_t n = spec.tasks.size();
  auto task = [s, spec, n](std::size_t k, std::optional<std::int64_t> array_id) {
    protocol::job_spec j = s.job;
    auto& g = *j.geometry;
    g.array.reset();
    g.array_task_id = spec.tasks[k];
    g.array_job_id = array_id;
    if (spec.max_running > 0) g.array_max_running = spec.max_running;
    g.array_task_count = static_cast<std::int64_t>(n);
    // A resent request (same token) finds each task it stored before.
    if (j.submit_token) j.submit_token = *j.submit_token + "#" + std::to_string(spec.tasks[k]);
    return j;
  };
  struct stored {
    std::int64_t id = 0;
    bool created = false;
    std::exception_ptr error;
  };
  auto results = std::make_shared<std::vector<stored>>(n);
  auto specs = std::make_shared<std::vector<protocol::job_spec>>();
  specs->reserve(n);
  specs->push_back(task(0, std::nullopt));
  auto finish = [this, c, s, who, deps, results, specs] {
    post([this, c, s, who, deps, results, specs] {
      std::size_t ok = 0;
      std::exception_ptr first_error;
      for (std::size_t k = 0; k < results->size(); ++k) {
        const stored& r = (*results)[k];
        if (r.error) {
          if (!first_error) first_error = r.error;
          continue;
        }
        ++ok;
        if (r.created) arrive(r.id, (*specs)[k], who, deps);
      }
      if (!first_error) {
        c->send(protocol::make_ok(s.id, submit_reply_for(s.job, (*results)[0].id)));
        return;
      }
      std::string why;
      try {
        std::rethrow_exception(first_error);
      } catch (const std::exception& e) {
        why = e.what();
      }
      reply_error(c, s.id, protocol::error_code::internal,
                  "only " + std::to_string(ok) + " of " + std::to_string(results->size()) +
                      " array tasks were stored (submit again with the same token to store the rest): " + why);
    });
  };
  try {
    store_.submit_then(to_store_request(specs->front(), who),
                       [this, who, n, task, results, specs, finish, c, s](std::int64_t id0, bool created0,
                                                                        std::exception_ptr error) {
      (*results)[0] = {id0, created0, error};
      // Nothing stored: the whole array is refused as a single job would be.
      if (error) return reply_store_refusal(c, s.id, error);
      if (n == 1) return finish();
      for (std::size_t k = 1; k < n; ++k) specs->push_back(task(k, id0));
      auto left = std::make_shared<std::atomic<std::size_t>>(n - 1);
      for (std::size_t k = 1; k < n; ++k) {
        auto done = [results, left, finish, k](std::int64_t id, bool created, std::exception_ptr e) {
          (*results)[k] = {id, created, e};
          if (left->fetch_sub(1, std::memory_order_acq_rel) == 1) finish();
        };
        try {
          store_.submit_then(to_store_request((*specs)[k], who), done);
        } catch (...) {
          done(0, false, std::current_exception());
        }
      }
    });
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
  e.name = spec.name;
  e.geometry = spec.geometry;
  e.faucets = spec.submit_token && placed_by_faucets(*spec.submit_token);
  if (e.faucets) e.submit_token = *spec.submit_token;
  e.spec = std::move(spec);
  jobs_.add(id, std::move(e));
  view_.set_owner(id, who.uid);
  notify(id, job_state::pending, std::nullopt, std::nullopt, nullptr);  // nobody watches yet: the event stream
  const auto& g = jobs_.at(id).spec->geometry;
  if (g && g->array_task_id &&
      !arrays_.arrive(g->array_job_id.value_or(id), id, g->array_max_running.value_or(0))) {
    view_.set_reason(id, "JobArrayTaskLimit");
    return;  // its array's throttle: it waits for a running task to end
  }
  admit_or_hold(id);
}

void controller::admit_or_hold(std::int64_t id) {
  job_entry* e = jobs_.find(id);
  if (e == nullptr) return;
  if (e->faucets && !faucets_open_) {
    faucets_waiting_.insert(id);
    view_.set_reason(id, "FaucetsSync");
    return;
  }
  deps_.release(id);
  auto state_of = [&](std::int64_t d) {
    std::optional<job_state> st = known_state(d);
    if (!st) {
      auto k = e->dep_known.find(d);
      if (k != e->dep_known.end()) st = k->second;
    }
    return st;
  };
  dependency_gate::verdict v;
  if (e->geometry && e->geometry->dependency) {
    // after, afterany, afternotok, '?' (core/dependency.hpp); validated on arrival.
    const core::dependency dep = core::parse_dependency(*e->geometry->dependency);
    if (dep.singleton) {
      // Slurm's singleton: after every earlier job of this user and name.
      std::vector<std::int64_t> earlier;
      for (const auto& [other, oe] : jobs_.live()) {
        if (other < id && oe.uid == e->uid && oe.name == e->name) earlier.push_back(other);
      }
      if (!earlier.empty()) {
        std::sort(earlier.begin(), earlier.end());
        deps_.hold(id, earlier);
        view_.set_reason(id, "Dependency");
        return;
      }
    }
    const auto r = core::evaluate(dep, state_of);
    v.what = r.what == core::dependency_verdict::kind::ready     ? dependency_gate::verdict::kind::ready
             : r.what == core::dependency_verdict::kind::waiting ? dependency_gate::verdict::kind::waiting
                                                                 : dependency_gate::verdict::kind::never;
    v.waiting = r.waiting;
    v.failed_dep = r.failed_job;
    v.failed_state = r.failed_state;
  } else {
    v = dependency_gate::evaluate(e->deps, state_of);
  }
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
      view_.set_reason(id, "Dependency");
      return;
    case dependency_gate::verdict::kind::ready:
      break;
  }
  view_.set_reason(id, "");
  sched_.apply(core::event::arrival(e->req));
  if (e->control == "held-user" || e->control == "held-admin") {
    // Held while it waited (fctl hold), or before aqsd restarted.
    sched_.apply(core::event::on_job(core::event::kind::hold, static_cast<core::job_id>(id)));
    view_.set_reason(id, e->control == "held-admin" ? "JobHeldAdmin" : "JobHeldUser");
  }
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
  if (const auto next = arrays_.ended(id)) admit_or_hold(*next);
}

}  // namespace aqs::daemon
