// memory_job_store: the job store's rules applied to maps under one mutex,
// with a worker thread delivering submission callbacks.
#include "store/memory_job_store.hpp"

#include <algorithm>
#include <random>
#include <unordered_set>
#include <utility>

#include <nlohmann/json.hpp>

#include "protocol/messages.hpp"
#include "store/sql_text.hpp"

namespace aqs::store {

using core::job_state;
using core::processor_set;

namespace {

std::string random_cluster_id() {
  std::random_device rd;
  std::string id;
  constexpr const char* k_hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) id += k_hex[rd() % 16];
  return id;
}

}  // namespace

memory_job_store::memory_job_store(memory_job_store_options options)
    : options_(std::move(options)), cluster_id_(random_cluster_id()) {
  callback_thread_ = std::thread([this] { callback_loop(); });
}

memory_job_store::~memory_job_store() { shutdown(); }

void memory_job_store::shutdown() noexcept {
  std::call_once(shutdown_once_, [this] {
    {
      // Under mu_: a submit_then that got past the check has queued its
      // callback already, and the worker drains the queue before it stops.
      std::lock_guard lk(mu_);
      shut_down_ = true;
    }
    {
      std::lock_guard lk(callbacks_mu_);
      stopping_ = true;
    }
    callbacks_cv_.notify_all();
    if (callback_thread_.joinable()) callback_thread_.join();
  });
}

bool memory_job_store::unreachable() const noexcept { return down_; }

// ---------------------------------------------------------------- faults --

void memory_job_store::inject(fault f, std::size_t writes) {
  if (writes == 0) return;
  std::lock_guard lk(mu_);
  faults_.emplace_back(f, writes);
}

void memory_job_store::clear_faults() {
  std::lock_guard lk(mu_);
  faults_.clear();
}

std::size_t memory_job_store::faults_pending() const {
  std::lock_guard lk(mu_);
  std::size_t n = 0;
  for (const auto& [f, count] : faults_) {
    if (count == always) return always;
    n += count;
  }
  return n;
}

void memory_job_store::set_down(bool down) {
  std::lock_guard lk(mu_);
  if (down_ && !down) ++stats_.reconnects;
  down_ = down;
}

void memory_job_store::check_up() const {
  if (down_) throw store_unavailable("cannot reach the job database: it is down (memory_job_store::set_down)");
}

memory_job_store::commit_outcome memory_job_store::next_commit() {
  if (faults_.empty()) return commit_outcome::ok;
  auto& [f, count] = faults_.front();
  const fault met = f;
  if (count != always && --count == 0) faults_.pop_front();
  return met == fault::commit_lost ? commit_outcome::lost : commit_outcome::in_doubt;
}

void memory_job_store::fail_commit(commit_outcome outcome) {
  if (outcome == commit_outcome::lost) {
    throw store_unavailable("the job database stayed unreachable (injected: connection lost before COMMIT)");
  }
  throw store_unavailable("lost the connection while committing and cannot tell whether it landed (injected)");
}

time_point memory_job_store::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
}

// ----------------------------------------------------------- submissions --

std::int64_t memory_job_store::submit_locked(job_submission& request, bool& created) {
  check_up();
  const commit_outcome outcome = next_commit();
  if (outcome == commit_outcome::lost) fail_commit(outcome);
  std::int64_t id = 0;
  if (auto found = by_token_.find(request.submit_token); found != by_token_.end()) {
    id = found->second;
    created = false;
  } else {
    const time_point at = now();
    id = next_job_++;
    created = true;
    by_token_.emplace(request.submit_token, id);
    job_record& r = jobs_[id];
    r.id = id;
    r.request = std::move(request);
    r.status.submit_time = at;
    history_event e;
    e.id = next_event_++;
    e.job_id = id;
    e.time = at;
    e.new_state = job_state::pending;
    e.reason = "submitted";
    events_[id].push_back(std::move(e));
  }
  if (outcome == commit_outcome::in_doubt) fail_commit(outcome);
  ++stats_.batches;
  ++stats_.submissions;
  return id;
}

std::future<std::int64_t> memory_job_store::submit_async(job_submission request) {
  check_request(request);
  if (request.submit_token.empty()) request.submit_token = make_submit_token();
  std::promise<std::int64_t> promise;
  auto future = promise.get_future();
  std::lock_guard lk(mu_);
  if (shut_down_) throw store_unavailable("the job store is shutting down");
  try {
    bool created = false;
    promise.set_value(submit_locked(request, created));
  } catch (const store_unavailable&) {
    promise.set_exception(std::current_exception());
  }
  return future;
}

std::int64_t memory_job_store::submit(job_submission request) { return submit_async(std::move(request)).get(); }

void memory_job_store::submit_then(job_submission request, submit_callback done) {
  check_request(request);
  if (request.submit_token.empty()) request.submit_token = make_submit_token();
  std::lock_guard lk(mu_);
  if (shut_down_) throw store_unavailable("the job store is shutting down");
  // Queued while mu_ is held, so callbacks run in the order of submission.
  try {
    bool created = false;
    const std::int64_t id = submit_locked(request, created);
    deliver([done = std::move(done), id, created] { done(id, created, nullptr); });
  } catch (const store_unavailable&) {
    deliver([done = std::move(done), e = std::current_exception()] { done(0, false, e); });
  }
}

void memory_job_store::deliver(std::function<void()> done) {
  {
    std::lock_guard lk(callbacks_mu_);
    callbacks_.push_back(std::move(done));
  }
  callbacks_cv_.notify_all();
}

void memory_job_store::callback_loop() {
  std::unique_lock lk(callbacks_mu_);
  for (;;) {
    callbacks_cv_.wait(lk, [&] { return stopping_ || !callbacks_.empty(); });
    if (callbacks_.empty()) return;  // stopping, and every callback ran
    std::function<void()> done = std::move(callbacks_.front());
    callbacks_.pop_front();
    delivering_ = true;
    lk.unlock();
    try {
      done();
    } catch (...) {
      // A callback that throws cannot stop the others from hearing.
    }
    lk.lock();
    delivering_ = false;
    callbacks_cv_.notify_all();
  }
}

void memory_job_store::wait_callbacks() {
  std::unique_lock lk(callbacks_mu_);
  callbacks_cv_.wait(lk, [&] { return callbacks_.empty() && !delivering_; });
}

// ----------------------------------------------------------- transitions --

planned_transition memory_job_store::plan_locked(const job_transition& t) const {
  auto found = jobs_.find(t.job_id);
  if (found == jobs_.end()) throw not_found("no job " + std::to_string(t.job_id));
  const job_status& st = found->second.status;
  std::optional<std::string> old_resize;
  if (st.resize_procs) old_resize = st.resize_procs->to_string();
  return plan_transition(t, st.state, st.procs.to_string(), old_resize);
}

history_event memory_job_store::apply_locked(const job_transition& t, const planned_transition& p, time_point at) {
  job_status& st = jobs_.at(t.job_id).status;
  if (st.state != t.to) st.control.clear();
  st.state = t.to;
  st.procs = processor_set::from_string(p.procs);
  st.resize_procs.reset();
  if (p.resize_procs) st.resize_procs = processor_set::from_string(*p.resize_procs);
  if (t.to == job_state::pending) {
    st.start_time.reset();
  } else if (t.to == job_state::running && !st.start_time) {
    st.start_time = at;
  }
  st.end_time.reset();
  if (core::is_final(t.to)) st.end_time = at;
  st.exit_code = t.exit_code;
  st.term_signal = t.term_signal;
  history_event e = event_of(t, p, next_event_++, at);
  events_[t.job_id].push_back(e);
  return e;
}

history_event memory_job_store::update_job(const control_change& u) {
  std::lock_guard lk(mu_);
  check_up();
  auto it = jobs_.find(u.job_id);
  if (it == jobs_.end()) throw not_found("no job " + std::to_string(u.job_id));
  job_record& r = it->second;
  check_update(u, r.status.state, r.request.adaptive, r.request.min_pe, r.request.max_pe);
  const commit_outcome outcome = next_commit();
  if (outcome == commit_outcome::lost) fail_commit(outcome);
  if (u.control) r.status.control = *u.control;
  if (u.min_pe) r.request.min_pe = *u.min_pe;
  if (u.max_pe) r.request.max_pe = *u.max_pe;
  if (u.walltime_s) {
    r.request.walltime_s.reset();
    if (*u.walltime_s > 0) r.request.walltime_s = *u.walltime_s;
  }
  if (u.ntasks && !r.request.geometry.empty()) {
    auto g = protocol::parse_geometry(r.request.geometry);
    g.ntasks = *u.ntasks;
    r.request.geometry = protocol::geometry_json(g);
  }
  history_event e;
  e.id = next_event_++;
  e.job_id = u.job_id;
  e.time = now();
  e.old_state = r.status.state;
  e.new_state = r.status.state;
  e.reason = u.reason;
  events_[u.job_id].push_back(e);
  if (outcome == commit_outcome::in_doubt) fail_commit(outcome);
  return e;
}

std::vector<std::int64_t> memory_job_store::split_array(const array_split& s) {
  if (s.tasks.size() != s.task_geometry.size() || s.rest_geometry.empty()) {
    throw invalid_job("array " + std::to_string(s.array_id) + ": a split needs one geometry per task and the rest");
  }
  std::lock_guard lk(mu_);
  check_up();
  auto it = jobs_.find(s.array_id);
  if (it == jobs_.end()) throw not_found("no job " + std::to_string(s.array_id));
  const job_record a = it->second;  // a copy: jobs_ grows below
  // As the database sees it: a geometry object with an "array" key.
  const auto g = nlohmann::json::parse(a.request.geometry.empty() ? "null" : a.request.geometry, nullptr, false);
  const bool compact = g.is_object() && g.contains("array");
  if (a.status.state != job_state::pending || !compact) {
    throw invalid_job("job " + std::to_string(s.array_id) + " is not a pending array's compact record");
  }
  const commit_outcome outcome = next_commit();
  if (outcome == commit_outcome::lost) fail_commit(outcome);
  std::vector<std::int64_t> ids;
  const time_point at = now();
  const std::size_t rows = s.tasks.size() + (s.new_record_geometry ? 1 : 0);
  for (std::size_t i = 0; i < rows; ++i) {
    const bool task = i < s.tasks.size();
    const std::string token = a.request.submit_token + "#" + (task ? std::to_string(s.tasks[i]) : "rest");
    if (auto found = by_token_.find(token); found != by_token_.end()) {
      ids.push_back(found->second);
      continue;
    }
    const std::int64_t id = next_job_++;
    by_token_.emplace(token, id);
    job_record& r = jobs_[id];
    r.id = id;
    r.request = a.request;
    r.request.submit_token = token;
    r.request.geometry = task ? s.task_geometry[i] : *s.new_record_geometry;
    r.status.submit_time = at;
    r.status.control = a.status.control;
    history_event e;
    e.id = next_event_++;
    e.job_id = id;
    e.time = at;
    e.new_state = job_state::pending;
    e.reason = "split from array " + std::to_string(s.array_id);
    events_[id].push_back(std::move(e));
    ids.push_back(id);
  }
  jobs_[s.array_id].request.geometry = s.rest_geometry;
  if (outcome == commit_outcome::in_doubt) fail_commit(outcome);
  return ids;
}

history_event memory_job_store::transition(const job_transition& t) {
  check_transition(t);
  std::lock_guard lk(mu_);
  check_up();
  const planned_transition p = plan_locked(t);
  const commit_outcome outcome = next_commit();
  if (outcome == commit_outcome::lost) fail_commit(outcome);
  history_event e = apply_locked(t, p, now());
  if (outcome == commit_outcome::in_doubt) fail_commit(outcome);
  return e;
}

std::vector<history_event> memory_job_store::transition_all(const std::vector<job_transition>& ts) {
  if (ts.empty()) return {};
  std::unordered_set<std::int64_t> seen;
  for (const auto& t : ts) {
    check_transition(t);
    if (!seen.insert(t.job_id).second) {
      throw invalid_job("job " + std::to_string(t.job_id) + " appears twice in one batch of transitions");
    }
  }
  std::lock_guard lk(mu_);
  check_up();
  // Every plan before any change: all or nothing.
  std::vector<planned_transition> plans;
  plans.reserve(ts.size());
  for (const auto& t : ts) plans.push_back(plan_locked(t));
  const commit_outcome outcome = next_commit();
  if (outcome == commit_outcome::lost) fail_commit(outcome);
  const time_point at = now();  // one transaction, one now()
  std::vector<history_event> events;
  events.reserve(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) events.push_back(apply_locked(ts[i], plans[i], at));
  if (outcome == commit_outcome::in_doubt) fail_commit(outcome);
  return events;
}

// --------------------------------------------------------------- queries --

std::optional<job_record> memory_job_store::get_job(std::int64_t id) {
  std::lock_guard lk(mu_);
  check_up();
  auto found = jobs_.find(id);
  if (found == jobs_.end()) return std::nullopt;
  return found->second;
}

std::vector<history_event> memory_job_store::job_history(std::int64_t id) {
  std::lock_guard lk(mu_);
  check_up();
  auto found = events_.find(id);
  if (found == events_.end()) return {};
  return found->second;
}

void memory_job_store::record_measurement(const job_measurement& m) {
  if (m.node.empty() || m.user_cpu_us < 0 || m.system_cpu_us < 0 || m.max_rss_kb < 0) {
    throw std::invalid_argument("a job's measurement needs a node and amounts >= 0");
  }
  std::lock_guard lk(mu_);
  check_up();
  measurements_[{m.job_id, m.node}] = {m, now()};
}

std::vector<job_usage> memory_job_store::job_usage_of(const std::vector<std::int64_t>& ids) {
  std::lock_guard lk(mu_);
  check_up();
  std::vector<job_usage> out;
  // No usage records here (account_store keeps them in PostgreSQL only).
  for (const std::int64_t id : ids) {
    const auto job = jobs_.find(id);
    // Plain values: GCC 12 takes an optional's copy here for uninitialised.
    const bool started = job != jobs_.end() && job->second.status.start_time.has_value();
    const time_point start = started ? *job->second.status.start_time : time_point{};
    job_usage u;
    u.job_id = id;
    for (auto it = measurements_.lower_bound({id, std::string()}); it != measurements_.end() && it->first.first == id; ++it) {
      const auto& [m, at] = it->second;
      if (started && at < start) continue;  // an earlier run's
      u.user_cpu_us = u.user_cpu_us.value_or(0) + m.user_cpu_us;
      u.system_cpu_us = u.system_cpu_us.value_or(0) + m.system_cpu_us;
      u.max_rss_kb = std::max(u.max_rss_kb.value_or(0), m.max_rss_kb);
      ++u.measured_nodes;
    }
    if (u.measured_nodes > 0) out.push_back(std::move(u));
  }
  return out;
}

std::vector<job_summary> memory_job_store::list_jobs(const job_filter& f) {
  if (f.user_name) check_text("user_name", *f.user_name);
  std::lock_guard lk(mu_);
  check_up();
  const bool by_ids = !f.job_ids.empty();
  auto state_matches = [&](job_state s) {
    if (!f.states.empty()) return std::find(f.states.begin(), f.states.end(), s) != f.states.end();
    // pg_job_store's listed-ids shape tests "not final", its other shapes the live states.
    return f.include_finished || (by_ids ? !core::is_final(s) : is_live(s));
  };
  auto matches = [&](const job_record& r) {
    if (f.user_name && r.request.user_name != *f.user_name) return false;
    return state_matches(r.status.state);
  };
  // What the query's LIMIT counts. The PostgreSQL store limits a listed-ids
  // query before it applies the user and state filters; the same here, so
  // both return the same rows.
  auto in_query = [&](const job_record& r) {
    return by_ids ? std::find(f.job_ids.begin(), f.job_ids.end(), r.id) != f.job_ids.end() : matches(r);
  };
  const std::size_t limit = f.limit ? static_cast<std::size_t>(std::max<std::int64_t>(*f.limit, 0))
                                    : std::numeric_limits<std::size_t>::max();
  std::vector<job_summary> out;
  std::size_t taken = 0;
  // False once the limit is reached.
  auto visit = [&](const job_record& r) {
    if (taken == limit) return false;
    if (in_query(r)) {
      ++taken;
      if (matches(r)) out.push_back(summary_of(r));
    }
    return true;
  };
  if (f.newest) {
    const std::int64_t below = f.before_id.value_or(std::numeric_limits<std::int64_t>::max());
    for (auto it = jobs_.lower_bound(below); it != jobs_.begin();) {
      --it;
      if (!visit(it->second)) break;
    }
    std::reverse(out.begin(), out.end());
  } else {
    for (auto it = jobs_.upper_bound(f.after_id.value_or(0)); it != jobs_.end(); ++it) {
      if (!visit(it->second)) break;
    }
  }
  return out;
}

live_state memory_job_store::load_live_state() {
  std::lock_guard lk(mu_);
  check_up();
  live_state st;
  for (const auto& [id, r] : jobs_) {
    if (is_live(r.status.state)) st.jobs.push_back(summary_of(r));
  }
  st.nodes = nodes_;
  st.cluster_id = cluster_id_;
  return st;
}

// ----------------------------------------------------------------- nodes --

node_record memory_job_store::register_node(const node_request& q) {
  check_node_request(q);
  std::lock_guard lk(mu_);
  check_up();
  auto found = std::find_if(nodes_.begin(), nodes_.end(), [&](const node_record& n) { return n.name == q.name; });
  if (found != nodes_.end() && found->nprocs != q.nprocs) {
    throw invalid_job("node " + q.name + " registered again with " + std::to_string(q.nprocs) +
                      " processors, it had " + std::to_string(found->nprocs) +
                      "; renumbering would move running jobs (remove the node first)");
  }
  const commit_outcome outcome = next_commit();
  if (outcome == commit_outcome::lost) fail_commit(outcome);
  const time_point at = now();
  node_record* n = nullptr;
  if (found != nodes_.end()) {
    n = &*found;
  } else {
    node_record fresh;
    fresh.id = next_node_++;
    fresh.name = q.name;
    fresh.nprocs = q.nprocs;
    fresh.first_proc = nodes_.empty() ? 0 : nodes_.back().first_proc + nodes_.back().nprocs;
    fresh.registered_at = at;
    nodes_.push_back(std::move(fresh));
    n = &nodes_.back();
  }
  n->address = q.address;
  n->cpus = q.cpus;
  n->memory_mb = q.memory_mb;
  n->gpus = q.gpus;
  n->state = node_state::up;
  n->last_heartbeat = at;
  node_record result = *n;
  if (outcome == commit_outcome::in_doubt) fail_commit(outcome);
  return result;
}

void memory_job_store::update_node(std::string_view name, const std::function<void(node_record&)>& change) {
  const std::string n(name);
  check_text("node name", n);
  std::lock_guard lk(mu_);
  check_up();
  auto found = std::find_if(nodes_.begin(), nodes_.end(), [&](const node_record& r) { return r.name == n; });
  if (found == nodes_.end()) throw not_found("no node " + n);
  const commit_outcome outcome = next_commit();
  if (outcome == commit_outcome::lost) fail_commit(outcome);
  change(*found);
  if (outcome == commit_outcome::in_doubt) fail_commit(outcome);
}

void memory_job_store::heartbeat(std::string_view name) {
  update_node(name, [this](node_record& r) { r.last_heartbeat = now(); });
}

void memory_job_store::set_node_state(std::string_view name, node_state state) {
  update_node(name, [state](node_record& r) { r.state = state; });
}

std::vector<node_record> memory_job_store::list_nodes() {
  std::lock_guard lk(mu_);
  check_up();
  return nodes_;
}

job_store::counters memory_job_store::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

}  // namespace aqs::store
