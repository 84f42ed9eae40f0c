// pg_job_store: the PostgreSQL job store put together: which connection and
// retry rules each operation runs under. The SQL is in pg_statements, rows in
// pg_rows, retries in pg_session, submissions in pg_submit_batcher,
// transitions in pg_transitions.
#include "store/pg_job_store.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include <pqxx/pqxx>

#include "store/job_rules.hpp"
#include "store/pg_rows.hpp"
#include "store/pg_session.hpp"
#include "store/pg_statements.hpp"
#include "store/pg_submit_batcher.hpp"
#include "store/pg_transitions.hpp"
#include "store/sql_text.hpp"

namespace aqs::store {

using core::job_state;

namespace {

// Zero committers or a zero batch would never commit anything.
pg_job_store_options usable(pg_job_store_options o) {
  if (o.committers == 0) o.committers = 1;
  if (o.max_batch == 0) o.max_batch = 1;
  return o;
}

}  // namespace

// -------------------------------------------------------------- lifetime --

pg_job_store::pg_job_store(pg_job_store_options options) : pg_job_store(std::move(options), test_hooks{}) {}

pg_job_store::pg_job_store(pg_job_store_options options, test_hooks hooks)
    : shared_(std::make_unique<pg_shared>(usable(std::move(options)), std::move(hooks))) {
  control_ = std::make_unique<pg_session>(*shared_);
  control_->connect(std::chrono::steady_clock::now() + shared_->options.reconnect_timeout);
  reader_ = std::make_unique<pg_session>(*shared_);
  batcher_ = std::make_unique<pg_submit_batcher>(*shared_);
}

pg_job_store::~pg_job_store() { shutdown(); }

void pg_job_store::shutdown() noexcept {
  std::call_once(shutdown_once_, [this] {
    shared_->giving_up = true;
    batcher_->stop();
  });
}

bool pg_job_store::unreachable() const noexcept { return shared_->unreachable; }

job_store::counters pg_job_store::stats() const { return shared_->stats(); }

// ----------------------------------------------------------- submissions --

std::future<std::int64_t> pg_job_store::submit_async(job_submission request) {
  return batcher_->submit_async(std::move(request));
}

std::int64_t pg_job_store::submit(job_submission request) { return submit_async(std::move(request)).get(); }

void pg_job_store::submit_then(job_submission request, submit_callback done) {
  batcher_->submit_then(std::move(request), std::move(done));
}

// ----------------------------------------------------------- transitions --

history_event pg_job_store::transition(const job_transition& t) {
  check_transition(t);
  std::optional<job_state> before;  // the state the (last) attempt moved from
  std::lock_guard lk(control_mu_);
  return control_->run<history_event>(
      [&](pqxx::work& tx) { return apply_transition(tx, t, before); },
      [&](pqxx::work& tx) { return transition_landed(tx, t, before); }, false);
}

std::vector<history_event> pg_job_store::transition_all(const std::vector<job_transition>& ts) {
  if (ts.empty()) return {};
  std::unordered_map<std::int64_t, int> seen;
  for (const auto& t : ts) {
    check_transition(t);
    if (seen[t.job_id]++ != 0) {
      throw invalid_job("job " + std::to_string(t.job_id) + " appears twice in one batch of transitions");
    }
  }
  std::vector<std::optional<job_state>> before(ts.size());
  std::lock_guard lk(control_mu_);
  return control_->run<std::vector<history_event>>(
      [&](pqxx::work& tx) {
        return apply_transitions(tx, ts, before);
      },
      [&](pqxx::work& tx) -> std::optional<std::vector<history_event>> {
        // One transaction: all landed or none did.
        std::vector<history_event> events;
        std::size_t not_landed = 0;
        for (std::size_t i = 0; i < ts.size(); ++i) {
          if (auto e = transition_landed(tx, ts[i], before[i])) {
            events.push_back(std::move(*e));
          } else {
            ++not_landed;
          }
        }
        if (not_landed == ts.size()) return std::nullopt;
        if (not_landed != 0) {
          throw store_unavailable("lost the connection while committing a batch of transitions and found it "
                                  "applied only in part; the jobs' states need checking");
        }
        return events;
      },
      false);
}

history_event pg_job_store::update_job(const control_change& u) {
  if (u.reason.empty()) throw invalid_job("job " + std::to_string(u.job_id) + ": an update needs a reason");
  std::lock_guard lk(control_mu_);
  return control_->run<history_event>(
      [&](pqxx::work& tx) {
        const pqxx::result cur =
            tx.exec_params("SELECT state, adaptive, min_pe, max_pe FROM jobs WHERE id = $1 FOR UPDATE", u.job_id);
        if (cur.empty()) throw not_found("no job " + std::to_string(u.job_id));
        const job_state state = state_of(cur[0]["state"]);
        check_update(u, state, cur[0]["adaptive"].as<bool>(), cur[0]["min_pe"].as<std::int32_t>(),
                     cur[0]["max_pe"].as<std::int32_t>());
        std::optional<std::string> control;
        if (u.control && !u.control->empty()) control = *u.control;
        std::optional<std::int32_t> walltime;
        if (u.walltime_s && *u.walltime_s > 0) walltime = *u.walltime_s;
        const pqxx::result ev = tx.exec_params(
            "WITH j AS ("
            "  UPDATE jobs SET control = CASE WHEN $2 THEN $3 ELSE control END,"
            "    min_pe = coalesce($4, min_pe), max_pe = coalesce($5, max_pe),"
            "    walltime_s = CASE WHEN $6 THEN $7 ELSE walltime_s END,"
            "    geometry = CASE WHEN $9::integer IS NULL OR geometry IS NULL THEN geometry"
            "      ELSE jsonb_set(geometry, '{ntasks}', to_jsonb($9::integer)) END"
            "  WHERE id = $1 RETURNING state)"
            " INSERT INTO job_events (job_id, old_state, new_state, reason)"
            " SELECT $1, state, state, $8 FROM j RETURNING id, time",
            u.job_id, u.control.has_value(), control, u.min_pe, u.max_pe, u.walltime_s.has_value(), walltime,
            u.reason, u.ntasks);
        if (ev.size() != 1) throw store_error("job " + std::to_string(u.job_id) + " vanished during its update");
        history_event e;
        e.id = ev[0]["id"].as<std::int64_t>();
        e.job_id = u.job_id;
        e.time = micros(ev[0]["time"]);
        e.old_state = state;
        e.new_state = state;
        e.reason = u.reason;
        return e;
      },
      [&](pqxx::work&) -> std::optional<history_event> {
        // An update is idempotent but its event is not: rather than write it
        // twice, say that the outcome is unknown.
        throw store_unavailable("lost the connection while committing an update of job " +
                                std::to_string(u.job_id) + "; its state needs checking");
      },
      false);
}

// ---------------------------------------------------------------- arrays --

namespace {

void check_split(const array_split& s) {
  if (s.tasks.size() != s.task_geometry.size()) {
    throw invalid_job("array " + std::to_string(s.array_id) + ": a split needs one geometry per task");
  }
  if (s.rest_geometry.empty()) throw invalid_job("array " + std::to_string(s.array_id) + ": a split needs the rest");
}

// The suffixes of the rows a split inserts: each task's index, then "rest".
std::vector<std::string> split_suffixes(const array_split& s) {
  std::vector<std::string> out;
  out.reserve(s.tasks.size() + 1);
  for (const std::int64_t t : s.tasks) out.push_back(std::to_string(t));
  if (s.new_record_geometry) out.push_back("rest");
  return out;
}

// The split rows' ids by their tokens (those that exist), in order; empty
// unless every one exists.
std::vector<std::int64_t> split_ids(pqxx::work& tx, const array_split& s, const std::string& token) {
  std::vector<std::string> tokens;
  for (const auto& x : split_suffixes(s)) tokens.push_back(token + "#" + x);
  if (tokens.empty()) return {};
  const pqxx::result r = tx.exec_params("SELECT id, submit_token FROM jobs WHERE submit_token = ANY($1::text[])",
                                        text_array_literal(tokens));
  std::unordered_map<std::string, std::int64_t> by_token;
  for (const auto& row : r) by_token[row["submit_token"].as<std::string>()] = row["id"].as<std::int64_t>();
  std::vector<std::int64_t> ids;
  for (const auto& t : tokens) {
    const auto it = by_token.find(t);
    if (it == by_token.end()) return {};
    ids.push_back(it->second);
  }
  return ids;
}

}  // namespace

std::vector<std::int64_t> pg_job_store::split_array(const array_split& s) {
  check_split(s);
  const auto suffixes = split_suffixes(s);
  std::string input = "[";
  for (std::size_t i = 0; i < suffixes.size(); ++i) {
    if (i > 0) input += ',';
    input += "{\"ord\":" + std::to_string(i) + ",\"suffix\":\"" + suffixes[i] + "\",\"geometry\":" +
             (i < s.tasks.size() ? s.task_geometry[i] : *s.new_record_geometry) + "}";
  }
  input += ']';
  const std::size_t rows = suffixes.size();
  std::string token;  // the record's, read under its lock
  std::lock_guard lk(control_mu_);
  return control_->run<std::vector<std::int64_t>>(
      [&](pqxx::work& tx) {
        const pqxx::result cur = tx.exec_params(
            "SELECT state, submit_token, coalesce(geometry ? 'array', false) AS compact FROM jobs WHERE id = $1 FOR UPDATE",
            s.array_id);
        if (cur.empty()) throw not_found("no job " + std::to_string(s.array_id));
        token = cur[0]["submit_token"].as<std::string>();
        if (state_of(cur[0]["state"]) != job_state::pending || !cur[0]["compact"].as<bool>()) {
          throw invalid_job("job " + std::to_string(s.array_id) + " is not a pending array's compact record");
        }
        tx.exec_params(
            "WITH input AS (SELECT * FROM jsonb_to_recordset($2::jsonb) AS x(ord integer, suffix text, geometry jsonb)),"
            " ins AS ("
            "  INSERT INTO jobs (submit_token, user_name, uid, gid, name, script, argv, workdir, environment,"
            "    stdout_pattern, stderr_pattern, min_pe, max_pe, adaptive, walltime_s, priority, requeue,"
            "    dependencies, umask, geometry, control)"
            "  SELECT a.submit_token || '#' || i.suffix, a.user_name, a.uid, a.gid, a.name, a.script, a.argv, a.workdir,"
            "    a.environment, a.stdout_pattern, a.stderr_pattern, a.min_pe, a.max_pe, a.adaptive, a.walltime_s,"
            "    a.priority, a.requeue, a.dependencies, a.umask, i.geometry, a.control"
            "  FROM jobs a, input i WHERE a.id = $1 ORDER BY i.ord"
            "  ON CONFLICT (submit_token) DO NOTHING"
            "  RETURNING id)"
            " INSERT INTO job_events (job_id, old_state, new_state, reason)"
            " SELECT id, NULL, 'PENDING', 'split from array ' || $1::text FROM ins",
            s.array_id, input);
        tx.exec_params("UPDATE jobs SET geometry = $2::jsonb WHERE id = $1", s.array_id, s.rest_geometry);
        auto ids = split_ids(tx, s, token);
        if (ids.size() != rows) throw store_error("array " + std::to_string(s.array_id) + ": split tasks vanished");
        return ids;
      },
      [&](pqxx::work& tx) -> std::optional<std::vector<std::int64_t>> {
        // One transaction: the tasks exist exactly when it landed.
        if (token.empty() || rows == 0) return std::nullopt;
        auto ids = split_ids(tx, s, token);
        if (ids.empty()) return std::nullopt;
        return ids;
      },
      false);
}

// --------------------------------------------------------------- queries --

std::optional<job_record> pg_job_store::get_job(std::int64_t id) {
  std::lock_guard lk(reader_mu_);
  return reader_->run<std::optional<job_record>>(
      [&](pqxx::work& tx) -> std::optional<job_record> {
        const pqxx::result r = tx.exec_prepared("get_job", id);
        if (r.empty()) return std::nullopt;
        return read_record(r);
      },
      no_resolve<std::optional<job_record>>, true);
}

void pg_job_store::record_measurement(const job_measurement& m) {
  if (m.node.empty() || m.user_cpu_us < 0 || m.system_cpu_us < 0 || m.max_rss_kb < 0) {
    throw std::invalid_argument("a job's measurement needs a node and amounts >= 0");
  }
  check_text("node name", m.node);
  std::lock_guard lk(control_mu_);
  control_->run<bool>(
      [&](pqxx::work& tx) {
        tx.exec_prepared("record_measurement", m.job_id, m.node, m.user_cpu_us, m.system_cpu_us, m.max_rss_kb);
        return true;
      },
      no_resolve<bool>, false);
}

std::vector<job_usage> pg_job_store::job_usage_of(const std::vector<std::int64_t>& ids) {
  if (ids.empty()) return {};
  std::string id_array = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) id_array += (i ? "," : "") + std::to_string(ids[i]);
  id_array += "}";
  std::lock_guard lk(reader_mu_);
  return reader_->run<std::vector<job_usage>>(
      [&](pqxx::work& tx) {
        std::vector<job_usage> out;
        for (const auto& row : tx.exec_prepared("job_usage", id_array)) {
          job_usage u;
          u.job_id = row["job_id"].as<std::int64_t>();
          // A user in no account has a usage record with no account.
          if (!row["account"].is_null() && !row["account"].as<std::string>().empty()) {
            u.account = row["account"].as<std::string>();
          }
          if (!row["cpu_seconds"].is_null()) u.alloc_cpu_seconds = row["cpu_seconds"].as<double>();
          u.measured_nodes = row["nodes"].as<std::int64_t>();
          if (u.measured_nodes > 0) {
            u.user_cpu_us = row["user_cpu_us"].as<std::int64_t>();
            u.system_cpu_us = row["system_cpu_us"].as<std::int64_t>();
            u.max_rss_kb = row["max_rss_kb"].as<std::int64_t>();
          }
          out.push_back(std::move(u));
        }
        return out;
      },
      no_resolve<std::vector<job_usage>>, true);
}

std::vector<history_event> pg_job_store::job_history(std::int64_t id) {
  std::lock_guard lk(reader_mu_);
  return reader_->run<std::vector<history_event>>(
      [&](pqxx::work& tx) { return read_events(tx.exec_prepared("job_history", id)); },
      no_resolve<std::vector<history_event>>, true);
}

std::vector<job_summary> pg_job_store::list_jobs(const job_filter& f) {
  if (f.user_name) check_text("user_name", *f.user_name);
  std::vector<std::string> states;
  for (job_state s : f.states) states.emplace_back(core::to_string(s));
  const std::string state_array = text_array_literal(states);
  std::string id_array = "{";
  for (std::size_t i = 0; i < f.job_ids.size(); ++i) id_array += (i ? "," : "") + std::to_string(f.job_ids[i]);
  id_array += "}";
  std::lock_guard lk(reader_mu_);
  return reader_->run<std::vector<job_summary>>(
      [&](pqxx::work& tx) {
        pqxx::result r;
        // The id bound: above after_id, or (newest) below before_id.
        const std::int64_t bound = f.newest ? f.before_id.value_or(std::numeric_limits<std::int64_t>::max())
                                            : f.after_id.value_or(0);
        auto shape = [&](std::string name) { return f.newest ? name + "_newest" : name; };
        if (!f.job_ids.empty()) {
          r = tx.exec_prepared(shape("list_ids"), id_array, f.limit, bound);
        } else if (!states.empty()) {
          r = f.user_name ? tx.exec_prepared(shape("list_user_states"), *f.user_name, state_array, f.limit, bound)
                          : tx.exec_prepared(shape("list_states"), state_array, f.limit, bound);
        } else if (f.user_name) {
          r = tx.exec_prepared(shape(f.include_finished ? "list_user_all" : "list_user_live"), *f.user_name, f.limit,
                               bound);
        } else {
          r = tx.exec_prepared(shape(f.include_finished ? "list_all" : "list_live"), f.limit, bound);
        }
        std::vector<job_summary> out;
        out.reserve(r.size());
        for (job_summary& js : read_summaries(r)) {
          if (!f.job_ids.empty()) {
            // The same meaning as the other shapes: a listed job still has to
            // match the user and state filters.
            if (f.user_name && js.user_name != *f.user_name) continue;
            const bool live = !core::is_final(js.status.state);
            if (!states.empty()) {
              if (std::find(f.states.begin(), f.states.end(), js.status.state) == f.states.end()) continue;
            } else if (!f.include_finished && !live) {
              continue;
            }
          }
          out.push_back(std::move(js));
        }
        if (f.newest) std::reverse(out.begin(), out.end());
        return out;
      },
      no_resolve<std::vector<job_summary>>, true);
}

live_state pg_job_store::load_live_state() {
  std::lock_guard lk(control_mu_);
  return control_->run<live_state>(
      [&](pqxx::work& tx) {
        tx.exec0(k_snapshot);  // jobs and nodes from one snapshot
        live_state st;
        tx.exec0(pg_declare_live_cursor());
        for (;;) {
          const pqxx::result r = tx.exec(k_fetch_live);
          if (r.empty()) break;
          append_summaries(r, st.jobs);
        }
        st.nodes = read_nodes(tx.exec_prepared("list_nodes"));
        st.cluster_id = tx.exec_prepared("cluster_id").at(0)["cluster_id"].as<std::string>();
        return st;
      },
      no_resolve<live_state>, true);
}

// ----------------------------------------------------------------- nodes --

node_record pg_job_store::register_node(const node_request& q) {
  check_node_request(q);
  std::lock_guard lk(control_mu_);
  // Idempotent (an upsert by name): after an unknown COMMIT, just run again.
  return control_->run<node_record>(
      [&](pqxx::work& tx) {
        // Numbering reads the last node: one registration at a time.
        tx.exec_prepared("lock_nodes");
        const pqxx::result found = tx.exec_prepared("find_node", q.name);
        pqxx::result r;
        if (found.empty()) {
          r = tx.exec_prepared("insert_node", q.name, q.address, q.nprocs, q.cpus, q.memory_mb, q.gpus);
        } else {
          const int had = found[0]["nprocs"].as<int>();
          if (had != q.nprocs) {
            throw invalid_job("node " + q.name + " registered again with " + std::to_string(q.nprocs) +
                              " processors, it had " + std::to_string(had) +
                              "; renumbering would move running jobs (remove the node first)");
          }
          r = tx.exec_prepared("update_node", q.name, q.address, q.cpus, q.memory_mb, q.gpus);
        }
        std::vector<node_record> node = read_nodes(tx.exec_prepared("get_node", r[0]["id"].as<std::int32_t>()));
        if (node.size() != 1) throw store_error("node " + q.name + " vanished during its registration");
        return node.front();
      },
      no_resolve<node_record>, false);
}

void pg_job_store::heartbeat(std::string_view name) {
  const std::string n(name);
  check_text("node name", n);
  std::lock_guard lk(control_mu_);
  const bool found = control_->run<bool>(
      [&](pqxx::work& tx) { return tx.exec_prepared("node_heartbeat", n).affected_rows() == 1; },
      no_resolve<bool>, false);
  if (!found) throw not_found("no node " + n);
}

void pg_job_store::set_node_state(std::string_view name, node_state state) {
  const std::string n(name);
  check_text("node name", n);
  std::lock_guard lk(control_mu_);
  const bool found = control_->run<bool>(
      [&](pqxx::work& tx) {
        return tx.exec_prepared("node_set_state", n, std::string(to_string(state))).affected_rows() == 1;
      },
      no_resolve<bool>, false);
  if (!found) throw not_found("no node " + n);
}

std::vector<node_record> pg_job_store::list_nodes() {
  std::lock_guard lk(reader_mu_);
  return reader_->run<std::vector<node_record>>(
      [&](pqxx::work& tx) { return read_nodes(tx.exec_prepared("list_nodes")); },
      no_resolve<std::vector<node_record>>, true);
}

}  // namespace aqs::store
