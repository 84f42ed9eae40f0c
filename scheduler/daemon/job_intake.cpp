// job_intake (job_intake.hpp): durable submission, then arrival in the core
// or, while dependencies are unfinished, in the held set.
#include <atomic>
#include <memory>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/array_spec.hpp"
#include "core/dependency.hpp"
#include "core/signal_spec.hpp"

#include "daemon/job_intake.hpp"

#include <nlohmann/json.hpp>

#include "core/start_estimate.hpp"
#include "daemon/faucets_uplink.hpp"
#include "daemon/admission.hpp"
#include "daemon/partition_gate.hpp"
#include "daemon_base/permissions.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

namespace asio = boost::asio;
using core::job_state;

// Tasks split off an array's compact record per turn of the strand (one
// store transaction).
constexpr std::size_t k_split_slice = 1000;
// Pending tasks of one array split off beyond the cluster's processors (the
// window the scheduler sees; the rest stays compact until tasks end).
constexpr std::size_t k_split_ahead = 1000;
// Jobs admitted (or held again) per turn of the strand when a dependency
// that many waited for ends.
constexpr std::size_t k_admit_slice = 1000;
// A job text larger than this is not kept in memory until launch: it is read
// from the store then, as after a restart.
constexpr std::int64_t k_kept_text_bytes = 64 * 1024;

struct job_intake::submit_call {
  std::shared_ptr<connection> c;
  std::int64_t request = 0;
  std::int32_t uid = 0;
  std::string key;  // the scoped submit token ("" without one)
  // Of the reservation (ledger_.reserve), what no arrived job holds yet.
  std::atomic<std::int64_t> jobs{0};
  std::atomic<std::int64_t> bytes{0};
  std::atomic<bool> answered{false};
  // Its place in the accounting while it is stored (job_accounting::
  // check_submission); 0: not checked yet. Strand.
  std::uint64_t ticket = 0;
  // Checked on the strand (account, limits, reservation) before it is stored.
  bool checked = false;
};

namespace {

// A job's text as MaxScriptBytes counts it: script, arguments, environment.
std::int64_t text_bytes(const protocol::job_spec& j) {
  std::size_t n = j.script ? j.script->size() : 0;
  for (const auto& a : j.argv) n += a.size() + 1;
  for (const auto& e : j.environment) n += e.size() + 1;
  return static_cast<std::int64_t>(n);
}

}  // namespace

job_intake::job_intake(core::scheduler& core, write_pipeline& pipe, access_view& view, metrics& stats, clock& time,
                       job_accounting& accounts, core::site_config partitions, user_limits limits,
                       std::function<bool(std::int64_t)> faucets_admits,
                       std::function<void(std::int64_t, core::job_state)> ended)
    : core_(core),
      pipe_(pipe),
      view_(view),
      metrics_(stats),
      clock_(time),
      accounts_(accounts),
      partitions_(std::make_shared<const core::site_config>(std::move(partitions))),
      faucets_admits_(std::move(faucets_admits)),
      ended_(std::move(ended)),
      ledger_(limits) {}

void job_intake::handle_submit(const std::shared_ptr<connection>& c, const protocol::submit& s) {
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
  // The per-user caps (user_limits.hpp), before any work is done for it.
  const user_limits& caps = ledger_.limits();
  std::int64_t tasks = 1;
  if (s.job.geometry && s.job.geometry->array) {
    tasks = static_cast<std::int64_t>(core::parse_array_spec(*s.job.geometry->array).tasks.size());
    if (tasks > caps.max_array_size) {
      reply_error(c, s.id, protocol::error_code::bad_request,
                  "the array's tasks (" + std::to_string(tasks) + ") would be over " +
                      std::string(k_max_array_size) + " " + std::to_string(caps.max_array_size));
      return;
    }
  }
  const std::int64_t bytes = text_bytes(s.job);
  if (bytes > caps.max_script_bytes) {
    reply_error(c, s.id, protocol::error_code::bad_request,
                "the job's script, arguments and environment (" + std::to_string(bytes) + " bytes) would be over " +
                    std::string(k_max_script_bytes) + " " + std::to_string(caps.max_script_bytes));
    return;
  }
  const auto uid = static_cast<std::int32_t>(*p.uid);
  auto call = std::make_shared<submit_call>();
  call->c = c;
  call->request = s.id;
  call->uid = uid;
  call->key = scoped_submit_token(uid, s.job.submit_token.value_or(""));
  // The same token while it is worked on (a client that resent it): it is
  // answered with that submission's answer, not worked on again.
  std::string why;
  const auto started = ledger_.start_submit(
      uid, call->key,
      [c, rid = s.id](bool ok, std::int64_t id, int code, const std::string& message) {
        if (ok) {
          c->send(protocol::make_ok(rid, protocol::submit_reply{id, {}}));
        } else {
          c->send(protocol::error{rid, static_cast<protocol::error_code>(code), message});
        }
      },
      why);
  if (started == user_ledger::start::joined) {
    // The token itself is not logged: it is what proves a job is one's own.
    logging::info("a submission of uid {} was sent again while it is being stored: answered once stored", uid);
    return;
  }
  if (started == user_ledger::start::refused) {
    reply_error(c, s.id, protocol::error_code::too_large, why);
    return;
  }
  if (auto over = ledger_.reserve(uid, tasks, bytes)) {
    answer_submit_error(call, protocol::error_code::too_large, *over);
    return;
  }
  call->jobs = tasks;
  call->bytes = bytes;
  submitter who{user_name_of(*p.uid), uid, static_cast<std::int32_t>(p.gid.value_or(*p.uid))};
  if (partitions()->configured) return handle_partition_submit(call, s, who);
  if (s.job.geometry) {
    // A job that asked for a layout the nodes can never give is refused now,
    // with the reason, rather than pending forever (Slurm does the same).
    if (auto why_not = view_.never_fits(to_core_request(0, s.job, who.user, 0))) {
      answer_submit_error(call, protocol::error_code::bad_request, "the job can never run on this cluster: " + *why_not);
      return;
    }
  }
  submit_checked(call, s, who);
}

void job_intake::answer_test_only(const call_ptr& call, const protocol::submit& s, const submitter& who) {
  // Checked as a submission; now, instead of storing it, when it would start.
  pipe_.post([this, call, s, who] {
    if (call->ticket != 0) accounts_.unstored(call->ticket);
    call->ticket = 0;
    const double t = now();
    core::job_request r = to_core_request(0, s.job, who.user, t);
    const auto in = core::estimate_start(core_, r, t);
    if (call->answered.exchange(true)) return;
    ledger_.release(call->uid, call->jobs.exchange(0), call->bytes.exchange(0));
    ledger_.finish_submit(call->uid, call->key, false, 0, static_cast<int>(protocol::error_code::bad_request),
                          "a --test-only submission stores no job");
    nlohmann::json body = {{"test_only", true},
                           {"start_in_s", in ? nlohmann::json(*in) : nlohmann::json(nullptr)},
                           {"start_s", in ? nlohmann::json(t + *in) : nlohmann::json(nullptr)},
                           {"procs", s.job.min_pe}};
    call->c->send(protocol::ok{call->request, std::move(body)});
  });
}

void job_intake::answer_submit(const call_ptr& call, protocol::submit_reply r) {
  if (call->answered.exchange(true)) return;
  ledger_.release(call->uid, call->jobs.exchange(0), call->bytes.exchange(0));
  // The submission leaves the in-flight list before its answer goes out: a
  // resend the client makes on reading the answer must not join it.
  ledger_.finish_submit(call->uid, call->key, true, r.job_id, 0, "");
  call->c->send(protocol::make_ok(call->request, std::move(r)));
}

void job_intake::answer_submit_error(const call_ptr& call, protocol::error_code code, std::string message) {
  if (call->answered.exchange(true)) return;
  ledger_.release(call->uid, call->jobs.exchange(0), call->bytes.exchange(0));
  ledger_.finish_submit(call->uid, call->key, false, 0, static_cast<int>(code), message);
  call->c->send(protocol::error{call->request, code, std::move(message)});
}

void job_intake::handle_partition_submit(const call_ptr& call, const protocol::submit& asked, const submitter& who) {
  // The partitions' names, states, users and limits (partition_gate.hpp),
  // then whether the job fits any of their nodes at all.
  protocol::submit s = asked;
  const core::job_request r = to_core_request(0, s.job, who.user, 0);
  const auto admitted = admit_submission(*partitions(), s.job, who, group_names_of(who.user, who.gid),
                                         [&](const core::partition* p) { return view_.never_fits(r, *p); });
  if (!admitted.error.empty()) {
    answer_submit_error(call, protocol::error_code::bad_request, admitted.error);
    return;
  }
  submit_checked(call, s, who);
}

void job_intake::submit_checked(const call_ptr& call, const protocol::submit& s, const submitter& who) {
  if (s.job.afterok.empty()) return store_submission(call, s, who, {});
  // Dependencies are checked against the store, off the session's thread.
  pipe_.on_readers([this, call, s, who] {
    std::map<std::int64_t, job_state> deps;
    for (std::int64_t d : s.job.afterok) {
      std::optional<store::job_record> rec;
      try {
        rec = pipe_.store().get_job(d);
      } catch (const std::exception& e) {
        answer_submit_error(call, protocol::error_code::internal, std::string("cannot check dependencies: ") + e.what());
        return;
      }
      if (!rec) {
        answer_submit_error(call, protocol::error_code::not_found, "dependency job " + std::to_string(d) + " does not exist");
        return;
      }
      deps[d] = rec->status.state;
    }
    store_submission(call, s, who, std::move(deps));
  });
}

protocol::submit_reply job_intake::submit_reply_for(const protocol::job_spec& job, std::int64_t id) const {
  protocol::submit_reply r{id, {}};
  // Scripts from other sites name their partitions: without any configured
  // here the job runs on every node, and the submitter is told.
  if (!partitions()->configured && job.geometry && job.geometry->partition) {
    r.warnings.push_back("partition '" + *job.geometry->partition +
                         "' is recorded; this cluster has one partition of all its nodes");
  }
  return r;
}

void job_intake::reply_store_refusal(const call_ptr& call, std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const store::store_unavailable& e) {
    // Not stored, not acknowledged: the client may retry with its token.
    answer_submit_error(call, protocol::error_code::internal,
                        std::string("store unavailable, retrying (submit again): ") + e.what());
  } catch (const std::exception& e) {
    answer_submit_error(call, protocol::error_code::bad_request, e.what());
  }
}

void job_intake::forget_ticket(const call_ptr& call) {
  pipe_.post([this, call] {
    if (call->ticket != 0) accounts_.unstored(call->ticket);
  });
}

void job_intake::store_refused(const call_ptr& call, const std::string& scoped_token, std::exception_ptr error) {
  forget_ticket(call);
  bool maybe_stored = false;
  try {
    std::rethrow_exception(error);
  } catch (const store::store_unavailable&) {
    maybe_stored = true;  // lost or in doubt: the row may be there
  } catch (...) {
  }
  if (maybe_stored && !scoped_token.empty()) {
    // Posted before the answer goes out: the client's resend, which follows
    // the answer, finds the mark.
    pipe_.post([this, scoped_token] { in_doubt_.insert(scoped_token); });
  }
  reply_store_refusal(call, error);
}

bool job_intake::arrives_now(std::int64_t id, bool created, const std::string& scoped_token) {
  const bool was_in_doubt = !scoped_token.empty() && in_doubt_.erase(scoped_token) != 0;
  if (created) return true;
  // Found stored: it arrived with an earlier attempt, unless that attempt's
  // commit was in doubt and the job never came here.
  return was_in_doubt && !jobs_.is_live(id) && jobs_.finished(id) == nullptr;
}

void job_intake::store_submission(const call_ptr& call, const protocol::submit& s, const submitter& who,
                                  std::map<std::int64_t, job_state> deps) {
  const bool names_reservation = !recorded_option(s.job.geometry, "reservation").empty();
  if (!call->checked && (accounts_.checks_submissions() || names_reservation)) {
    // Its account, QOS and submission limits, and the reservation it names,
    // on the strand, before it is stored: a refusal writes nothing.
    pipe_.post([this, call, s, who, deps]() mutable {
      protocol::submit checked = s;
      std::uint64_t ticket = 0;
      if (accounts_.checks_submissions()) {
        std::string why = accounts_.check_submission(checked.job, who.user, ticket);
        if (!why.empty()) return answer_submit_error(call, protocol::error_code::bad_request, why);
      }
      if (reservation_check_) {
        // After the account is chosen: a reservation may be for an account.
        if (std::string why = reservation_check_(checked.job, who.user, who.uid == 0); !why.empty()) {
          if (ticket != 0) accounts_.unstored(ticket);
          return answer_submit_error(call, protocol::error_code::bad_request, why);
        }
      }
      call->ticket = ticket;
      call->checked = true;
      store_submission(call, checked, who, std::move(deps));
    });
    return;
  }
  if (s.test_only) return answer_test_only(call, s, who);
  if (s.job.geometry && s.job.geometry->array) return store_array(call, s, who, std::move(deps));
  store::job_submission row = to_store_request(s.job, who);
  auto done = [this, call, s, who, deps, token = row.submit_token](std::int64_t id, bool created,
                                                                   std::exception_ptr error) {
    if (error) return store_refused(call, token, error);
    // The reply goes out from the strand, after the arrival: a client that
    // acts on the id at once (fkill, watch_job) finds the job known.
    pipe_.post([this, call, s, who, deps, id, created, token] {
      if (call->ticket != 0) accounts_.stored(call->ticket, id);
      if (arrives_now(id, created, token)) {
        metrics_.submitted();
        // The job holds its place and its text's bytes from now on.
        call->jobs -= 1;
        const std::int64_t bytes = call->bytes.exchange(0);
        const bool keep = bytes <= k_kept_text_bytes;
        arrive(id, s.job, who, deps, keep, bytes);
      }
      answer_submit(call, submit_reply_for(s.job, id));
    });
  };
  try {
    pipe_.store().submit_then(std::move(row), std::move(done));
  } catch (const store::store_error&) {
    forget_ticket(call);
    reply_store_refusal(call, std::current_exception());
  }
}

void job_intake::store_array(const call_ptr& call, const protocol::submit& s, const submitter& who,
                             std::map<std::int64_t, job_state> deps) {
  // One row, whatever the array's size: its compact record (issue 28). Its
  // tasks become jobs of their own only as they become eligible
  // (split_array), a bounded number at a time.
  const core::array_spec spec = core::parse_array_spec(*s.job.geometry->array);  // validated with the message
  const std::size_t n = spec.tasks.size();
  protocol::job_spec job = s.job;
  auto& g = *job.geometry;
  if (spec.max_running > 0) g.array_max_running = spec.max_running;
  g.array_task_count = static_cast<std::int64_t>(n);
  g.array_job_id.reset();
  if (n == 1) {
    g.array.reset();  // one task: a job of its own at once
    g.array_task_id = spec.tasks.front();
  } else {
    g.array_task_id.reset();
    g.array = core::task_ranges::of(spec.tasks).to_string() +
              (spec.max_running > 0 ? "%" + std::to_string(spec.max_running) : std::string());
  }
  store::job_submission row = to_store_request(job, who);
  auto done = [this, call, job, who, deps, token = row.submit_token](std::int64_t id, bool created,
                                                                     std::exception_ptr error) {
    if (error) return store_refused(call, token, error);
    pipe_.post([this, call, job, who, deps, id, created, token] {
      if (call->ticket != 0) accounts_.stored(call->ticket, id);
      if (arrives_now(id, created, token)) {
        metrics_.submitted();
        // The record holds every task's place and the array's text.
        const std::int64_t tasks = call->jobs.exchange(0);
        arrive(id, job, who, deps, false, call->bytes.exchange(0), tasks);
      }
      answer_submit(call, submit_reply_for(job, id));
    });
  };
  try {
    pipe_.store().submit_then(std::move(row), std::move(done));
  } catch (const store::store_error&) {
    forget_ticket(call);
    reply_store_refusal(call, std::current_exception());
  }
}

namespace {

// "%K" as the compact record's text carries it.
std::string throttle_text(std::int64_t max_running) {
  return max_running > 0 ? "%" + std::to_string(max_running) : std::string();
}

// Task `index` of array `array_id`: the record's geometry as a task's.
protocol::job_geometry task_geometry(protocol::job_geometry g, std::int64_t array_id, std::int64_t index) {
  g.array.reset();
  g.array_task_id = index;
  g.array_job_id = array_id;
  return g;
}

}  // namespace

void job_intake::split_array(std::int64_t array_id) {
  array_table::compact* c = arrays_.find_compact(array_id);
  if (c == nullptr) return;
  job_entry* a = jobs_.find(c->record);
  if (a == nullptr || !a->geometry || !c->eligible || c->splitting || pipe_.stopped() || a->cancel_requested ||
      c->rest.empty()) {
    return;
  }
  // Split while the queue reaches them: up to the throttle, else up to the
  // cluster's processors plus a window of pending ones; the rest stays one
  // record, its place taken as tasks end.
  const std::size_t window = c->max_running > 0 ? static_cast<std::size_t>(c->max_running)
                                                : core_.machine().size() + k_split_ahead;
  const std::size_t live = arrays_.live_tasks(array_id);
  if (live >= window) {
    view_.set_reason(c->record, c->max_running > 0 ? "JobArrayTaskLimit" : "Priority");
    return;
  }
  const std::size_t budget = std::min(window - live, k_split_slice);
  const bool first = c->record == array_id;  // the array's own job: it becomes the first task
  core::task_ranges rest = c->rest;
  split_run run;
  run.split.array_id = c->record;
  protocol::job_geometry g = *a->geometry;
  g.array_job_id.reset();
  g.array.reset();
  if (first) {
    run.becomes = rest.take_front(1).front();
    run.split.tasks = rest.take_front(budget - 1);
  } else if (static_cast<std::int64_t>(budget) >= rest.size()) {
    // The record becomes the array's last task: every index is a job.
    run.split.tasks = rest.take_front(static_cast<std::size_t>(rest.size() - 1));
    run.becomes = rest.take_front(1).front();
  } else {
    run.split.tasks = rest.take_front(budget);
  }
  run.split.task_geometry.reserve(run.split.tasks.size());
  for (const std::int64_t t : run.split.tasks) {
    run.split.task_geometry.push_back(protocol::geometry_json(task_geometry(g, array_id, t)));
  }
  const std::string throttle = throttle_text(c->max_running);
  if (run.becomes) {
    protocol::job_geometry as_task = g;
    as_task.array_task_id = *run.becomes;
    if (!first) as_task.array_job_id = array_id;
    run.split.rest_geometry = protocol::geometry_json(as_task);
    if (first && !rest.empty()) {
      // The indices left move to a new record of the array.
      protocol::job_geometry record = g;
      record.array = rest.to_string() + throttle;
      record.array_job_id = array_id;
      run.split.new_record_geometry = protocol::geometry_json(record);
    }
  } else {
    protocol::job_geometry record = g;
    record.array = rest.to_string() + throttle;
    if (!first) record.array_job_id = array_id;
    run.split.rest_geometry = protocol::geometry_json(record);
  }
  run.array_id = array_id;
  run.rest = std::move(rest);
  c->splitting = true;
  // On the writer, in order with the transitions (a cancel of the record
  // written first makes the split find it cancelled, and write nothing).
  pipe_.on_writer([this, run = std::move(run)]() mutable {
    try {
      run.ids = pipe_.store().split_array(run.split);
    } catch (const std::exception& e) {
      run.error = e.what();
    }
    pipe_.post([this, run = std::move(run)]() mutable { on_split(std::move(run)); });
  });
}

void job_intake::on_split(split_run run) {
  const std::int64_t array_id = run.array_id;
  const std::int64_t record = run.split.array_id;
  array_table::compact* c = arrays_.find_compact(array_id);
  job_entry* a = jobs_.find(record);
  if (c != nullptr) c->splitting = false;
  if (!run.error.empty()) {
    if (a == nullptr || a->cancel_requested || c == nullptr) return;  // cancelled meanwhile: nothing was written
    logging::warn("array {}: tasks not split off ({}): trying again in a second", array_id, run.error);
    auto timer = std::make_shared<asio::steady_timer>(pipe_.io(), std::chrono::seconds(1));
    timer->async_wait([this, timer, array_id](const boost::system::error_code& ec) {
      if (!ec) pipe_.post([this, array_id] { split_array(array_id); });
    });
    return;
  }
  if (a == nullptr || a->cancel_requested || c == nullptr) {
    // The record was cancelled after its split was written: what the split
    // made goes with it.
    for (const std::int64_t id : run.ids) {
      if (jobs_.is_known(id)) continue;
      pipe_.transition(id, job_state::cancelled, std::nullopt, "its array " + std::to_string(array_id) + " was cancelled");
    }
    pipe_.kick();
    return;
  }
  const std::int64_t max_running = c->max_running;
  const std::size_t tasks = run.split.tasks.size();
  for (std::size_t i = 0; i < tasks; ++i) arrive_task(run.ids[i], record, array_id, run.split.tasks[i]);
  a = jobs_.find(record);  // arrivals may have moved the table
  if (run.split.new_record_geometry && run.ids.size() > tasks) {
    // The indices left, in their new record (eligible already).
    const std::int64_t next = run.ids[tasks];
    job_entry r = copy_for(*a, next);
    r.geometry->array = run.rest.to_string() + throttle_text(max_running);
    r.geometry->array_job_id = array_id;
    r.charged_jobs = run.rest.size();
    if (!r.submit_token.empty()) r.submit_token += "#rest";
    metrics_.submitted();  // the task it becomes in the end
    const std::int32_t uid = r.uid;
    jobs_.add(next, std::move(r));
    view_.set_owner(next, uid);
    pipe_.notify(next, job_state::pending, std::nullopt, std::nullopt, nullptr);
    a = jobs_.find(record);
    c->record = next;
  }
  a->charged_jobs -= static_cast<std::int64_t>(tasks);
  if (run.becomes) {
    // The record is a task now: an ordinary job of the array.
    a->geometry->array.reset();
    a->geometry->array_task_id = *run.becomes;
    if (record != array_id) a->geometry->array_job_id = array_id;
    if (c->record == record) {
      arrays_.drop_compact(array_id);  // every index is a job now
      c = nullptr;
    } else {
      c->rest = std::move(run.rest);
    }
    a->charged_jobs = 1;
    if (!arrays_.arrive(array_id, record, max_running)) {
      view_.set_reason(record, "JobArrayTaskLimit");
    } else {
      admit_or_hold(record);
    }
  } else {
    c->rest = std::move(run.rest);
    a->geometry->array = c->rest.to_string() + throttle_text(max_running);
  }
  // The next slice on a later turn: what else waits on the strand goes first.
  if (c != nullptr) pipe_.post([this, array_id] { split_array(array_id); });
}

job_entry job_intake::copy_for(const job_entry& a, std::int64_t id) const {
  job_entry e;
  e.req = a.req;
  e.req.id = static_cast<core::job_id>(id);
  e.user = a.user;
  e.uid = a.uid;
  e.gid = a.gid;
  e.deps = a.deps;
  e.dep_known = a.dep_known;
  e.interactive = a.interactive;
  e.control = a.control;
  e.name = a.name;
  e.geometry = a.geometry;
  e.charged_jobs = 1;  // its place, from the record's
  // A Faucets server's array: its tasks are the server's too (their tokens
  // in the store are the record's with a suffix).
  e.faucets = a.faucets;
  e.submit_token = a.submit_token;
  return e;
}

void job_intake::arrive_task(std::int64_t id, std::int64_t record, std::int64_t array_id, std::int64_t index) {
  if (jobs_.is_known(id)) return;  // recovered already (a split stored before a restart)
  job_entry e = copy_for(jobs_.at(record), id);
  e.geometry = task_geometry(*e.geometry, array_id, index);
  if (!e.submit_token.empty()) e.submit_token += "#" + std::to_string(index);
  metrics_.submitted();  // each task counts once, as when arrays were stored per task
  const std::int64_t max_running = arrays_.find_compact(array_id) ? arrays_.find_compact(array_id)->max_running : 0;
  const std::int32_t uid = e.uid;
  jobs_.add(id, std::move(e));
  view_.set_owner(id, uid);
  pipe_.notify(id, job_state::pending, std::nullopt, std::nullopt, nullptr);
  if (!arrays_.arrive(array_id, id, max_running)) {
    view_.set_reason(id, "JobArrayTaskLimit");
    return;
  }
  admit_or_hold(id);
}

std::optional<job_state> job_intake::known_state(std::int64_t id) const {
  if (const final_info* f = jobs_.finished(id)) return f->state;
  if (jobs_.is_live(id)) {
    const core::job* j = core_.find(static_cast<core::job_id>(id));
    return j ? j->state : job_state::pending;
  }
  return std::nullopt;
}

void job_intake::arrive(std::int64_t id, protocol::job_spec spec, submitter who,
                        std::map<std::int64_t, job_state> dep_states, bool keep_spec, std::int64_t charged_bytes,
                        std::int64_t charged_jobs) {
  if (jobs_.is_known(id)) {  // a retried token
    ledger_.release(who.uid, charged_jobs, charged_bytes);
    return;
  }
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
  e.charged_bytes = charged_bytes;
  e.charged_jobs = charged_jobs;
  // Array tasks and big scripts are read from the store at launch: memory
  // holds no job text per task (issue 28: 100,000 copies of an array's
  // environment took gigabytes).
  if (keep_spec) e.spec = std::move(spec);
  jobs_.add(id, std::move(e));
  view_.set_owner(id, who.uid);
  pipe_.notify(id, job_state::pending, std::nullopt, std::nullopt, nullptr);  // nobody watches yet: the event stream
  const auto& g = jobs_.at(id).geometry;
  if (g && g->array) {
    // An array's compact record: its tasks are split off once it is eligible.
    const core::array_spec spec = core::parse_array_spec(*g->array);
    array_table::compact c;
    c.record = id;
    c.rest = core::task_ranges::of(spec.tasks);
    c.max_running = spec.max_running;
    arrays_.add_compact(id, std::move(c));
    admit_or_hold(id);
    return;
  }
  if (g && g->array_task_id &&
      !arrays_.arrive(g->array_job_id.value_or(id), id, g->array_max_running.value_or(0))) {
    view_.set_reason(id, "JobArrayTaskLimit");
    return;  // its array's throttle: it waits for a running task to end
  }
  admit_or_hold(id);
}

void job_intake::admit_or_hold(std::int64_t id) {
  job_entry* e = jobs_.find(id);
  if (e == nullptr) return;
  if (e->faucets && !faucets_admits_(id)) return;
  if (e->geometry && e->geometry->begin_time && static_cast<double>(*e->geometry->begin_time) > now()) {
    return wait_for_begin(id, *e->geometry->begin_time);
  }
  begin_waits_.erase(id);
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
      pipe_.transition(id, job_state::cancelled, std::nullopt, why);
      pipe_.after_commit([this, id] { ended_(id, job_state::cancelled); });
      pipe_.kick();
      return;
    }
    case dependency_gate::verdict::kind::waiting:
      deps_.hold(id, v.waiting);
      view_.set_reason(id, "Dependency");
      return;
    case dependency_gate::verdict::kind::ready:
      break;
  }
  array_table::compact* c =
      e->geometry && e->geometry->array ? arrays_.find_compact(e->geometry->array_job_id.value_or(id)) : nullptr;
  if (c != nullptr && c->record == id) {
    // An array's compact record never enters the core: its tasks do.
    if (e->control == "held-user" || e->control == "held-admin") {
      c->eligible = false;
      view_.set_reason(id, e->control == "held-admin" ? "JobHeldAdmin" : "JobHeldUser");
      return;
    }
    c->eligible = true;
    view_.set_reason(id, "");
    split_array(e->geometry->array_job_id.value_or(id));
    return;
  }
  // Its association's and QOS's running limits: it waits outside the core
  // while one is full (job_accounting.hpp).
  if (std::string why = accounts_.admit(id, *e); !why.empty()) {
    view_.set_reason(id, why);
    return;
  }
  view_.set_reason(id, "");
  core_.apply(core::event::arrival(e->req));
  accounts_.prioritise(id);
  if (e->control == "held-user" || e->control == "held-admin") {
    // Held while it waited (fctl hold), or before aqsd restarted.
    core_.apply(core::event::on_job(core::event::kind::hold, static_cast<core::job_id>(id)));
    view_.set_reason(id, e->control == "held-admin" ? "JobHeldAdmin" : "JobHeldUser");
  }
  pipe_.decide();
}

void job_intake::wait_for_begin(std::int64_t id, std::int64_t begin) {
  view_.set_reason(id, "BeginTime");
  const double left_s = std::min(static_cast<double>(begin) - now(), 3600.0);
  const auto delay = std::chrono::milliseconds(static_cast<std::int64_t>(std::max(left_s, 0.0) * 1000.0) + 1);
  // The timer only posts: the handle is dropped by a later turn, not from
  // inside its own callback.
  begin_waits_[id] = clock_.after(pipe_.strand(), delay, [this, id] {
    pipe_.post([this, id] {
      if (begin_waits_.erase(id) != 0) admit_or_hold(id);
    });
  });
}

void job_intake::admit_in_slices(std::vector<std::int64_t> ids) {
  if (ids.empty()) return;
  const std::size_t n = std::min(ids.size(), k_admit_slice);
  // Each only while still held: one cancelled meanwhile, or released by
  // another dependency's end, is not admitted twice.
  for (std::size_t i = 0; i < n; ++i) {
    if (deps_.is_held(ids[i])) admit_or_hold(ids[i]);
  }
  if (n == ids.size()) return;
  // The rest on a later turn: what else waits on the strand goes first.
  ids.erase(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
  pipe_.post([this, rest = std::move(ids)]() mutable { admit_in_slices(std::move(rest)); });
}

void job_intake::finish(std::int64_t id, job_state state, std::optional<std::int32_t> code,
                        std::optional<std::int32_t> signal) {
  if (const job_entry* e = jobs_.find(id)) {
    ledger_.release(e->uid, e->charged_jobs, e->charged_bytes);
    // A cancelled record: its unsplit tasks with it.
    if (e->geometry && e->geometry->array) arrays_.drop_compact(e->geometry->array_job_id.value_or(id));
  }
  begin_waits_.erase(id);
  const auto array = arrays_.array_of(id);
  jobs_.finish(id, state, code, signal);
  deps_.release(id);
  admit_in_slices(deps_.ended(id));
  if (const auto next = arrays_.ended(id)) admit_or_hold(*next);
  // Its place goes to the array's next unsplit task.
  if (array) split_array(*array);
}

std::shared_ptr<const core::site_config> job_intake::partitions() const {
  std::lock_guard lock(partitions_mu_);
  return partitions_;
}

void job_intake::set_partitions(core::site_config partitions) {
  auto next = std::make_shared<const core::site_config>(std::move(partitions));
  std::lock_guard lock(partitions_mu_);
  partitions_ = std::move(next);
}

// ---- what job_control asks ----------------------------------------------

std::vector<std::int64_t> job_intake::cancel_targets(std::int64_t id) {
  std::vector<std::int64_t> targets = arrays_.tasks_of(id);
  if (targets.empty()) targets.push_back(id);
  // Its compact record too, once it moved off the array's id: the tasks
  // not yet split off.
  if (const auto* rec = arrays_.find_compact(id); rec != nullptr && rec->record != id) targets.push_back(rec->record);
  return targets;
}

job_intake::task_cancel job_intake::cancel_array_task(const std::string& t, const peer_info& p, const std::string& caller) {
  task_cancel out;
  const auto us = t.find('_');
  std::int64_t array = 0, index = -1;
  try {
    if (us == std::string::npos) throw std::invalid_argument(t);
    array = std::stoll(t.substr(0, us));
    index = std::stoll(t.substr(us + 1));
  } catch (const std::exception&) {
    out.refused = protocol::cancel_failure{0, protocol::error_code::bad_request, "'" + t + "' is not ARRAY_INDEX"};
    return out;
  }
  array_table::compact* rec = arrays_.find_compact(array);
  job_entry* r = rec != nullptr ? jobs_.find(rec->record) : nullptr;
  if (r == nullptr || r->cancel_requested || !rec->rest.contains(index)) {
    // Split off meanwhile: the live task itself.
    bool split = false;
    for (const std::int64_t id : arrays_.tasks_of(array)) {
      const job_entry* e = jobs_.find(id);
      if (e != nullptr && e->geometry && e->geometry->array_task_id == index) {
        out.split_off.push_back(id);
        split = true;
      }
    }
    if (!split) out.refused = protocol::cancel_failure{array, protocol::error_code::not_found, "no pending or running task " + t};
    return out;
  }
  if (!may_act_on_job(p, r->uid)) {
    out.refused = protocol::cancel_failure{array, protocol::error_code::permission_denied,
                                           "array " + std::to_string(array) + " belongs to " + r->user + ", not to " + caller};
    return out;
  }
  if (rec->splitting) {
    out.refused = protocol::cancel_failure{array, protocol::error_code::invalid_state,
                                           "task " + t + " is being split off its array now: try again"};
    return out;
  }
  logging::info("task {} cancelled by {} before it was split off its array", t, caller);
  rec->rest.erase(index);
  r->charged_jobs -= 1;
  ledger_.release(r->uid, 1, 0);
  if (rec->rest.empty()) {
    // Its last index: the record itself ends.
    r->cancel_requested = true;
    deps_.release(rec->record);
    pipe_.transition(rec->record, core::job_state::cancelled, std::nullopt, "cancelled by " + caller);
    pipe_.after_commit([this, id = rec->record] { ended_(id, core::job_state::cancelled); });
    return out;
  }
  r->geometry->array = rec->rest.to_string() + (rec->max_running > 0 ? "%" + std::to_string(rec->max_running) : "");
  // On the writer before this request's commit (the reply waits for it),
  // in order with the splits.
  store::array_split shrink;
  shrink.array_id = rec->record;
  shrink.rest_geometry = protocol::geometry_json(*r->geometry);
  pipe_.on_writer([this, shrink = std::move(shrink)] {
    try {
      pipe_.store().split_array(shrink);
    } catch (const std::exception& e) {
      logging::warn("array record {}: a task's cancel was not written: {}", shrink.array_id, e.what());
    }
  });
  return out;
}

}  // namespace aqs::daemon
