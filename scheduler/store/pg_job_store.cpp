// pg_job_store: prepared statements, the state machine, group commit and
// reconnection. Every value reaches PostgreSQL as a bound parameter.
#include "store/pg_job_store.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <unordered_map>

#include <pqxx/pqxx>

#include "store/job_rules.hpp"
#include "store/migrations.hpp"
#include "store/sql_text.hpp"

namespace aqs::store {

using core::job_state;
using core::processor_set;

namespace {

// ------------------------------------------------------------ statements --

// Timestamps travel as text in UTC (set on every connection) and are parsed
// here: cheaper for the server than computing epoch numerics per row.
#define AQS_MICROS(col) col

// Columns of a job_summary, in the order read_summary reads them.
#define AQS_SUMMARY_COLUMNS                                                              \
  "id, user_name, uid, name, min_pe, max_pe, adaptive, walltime_s, priority, requeue, " \
  "dependencies, state, " AQS_MICROS("submit_time") ", " AQS_MICROS("start_time") ", "  \
  AQS_MICROS("end_time") ", exit_code, term_signal, procs, resize_procs"

#define AQS_NODE_COLUMNS                                                                    \
  "id, name, address, first_proc, nprocs, cpus, memory_mb, gpus, state, " AQS_MICROS(      \
      "registered_at") ", " AQS_MICROS("last_heartbeat")

struct statement {
  const char* name;
  const char* sql;
};

// One transaction inserts a whole batch, each job with its PENDING event
// (one statement: no job without its event can ever exist). ON CONFLICT on
// the unique submit_token makes re-running a batch harmless: jobs that exist
// already are not inserted again and are looked up by token instead.
const std::array k_statements = {
    statement{"submit_batch",
              "WITH input AS ("
              "  SELECT * FROM jsonb_to_recordset($1::jsonb) AS x("
              "    ord integer, token text, user_name text, uid integer, gid integer, name text,"
              "    script text, argv jsonb, workdir text, environment jsonb, stdout_pattern text,"
              "    stderr_pattern text, min_pe integer, max_pe integer, adaptive boolean,"
              "    walltime_s integer, priority integer, requeue boolean, dependencies jsonb, umask integer)"
              "), ins AS ("
              "  INSERT INTO jobs (submit_token, user_name, uid, gid, name, script, argv, workdir,"
              "    environment, stdout_pattern, stderr_pattern, min_pe, max_pe, adaptive, walltime_s,"
              "    priority, requeue, dependencies, umask)"
              "  SELECT token, user_name, uid, gid, name, script,"
              "    ARRAY(SELECT e FROM jsonb_array_elements_text(argv) WITH ORDINALITY AS a(e, n) ORDER BY n),"
              "    workdir,"
              "    ARRAY(SELECT e FROM jsonb_array_elements_text(environment) WITH ORDINALITY AS a(e, n) ORDER BY n),"
              "    stdout_pattern, stderr_pattern, min_pe, max_pe, adaptive, walltime_s, priority, requeue,"
              "    ARRAY(SELECT e::bigint FROM jsonb_array_elements_text(dependencies) WITH ORDINALITY AS a(e, n) ORDER BY n),"
              "    coalesce(umask, 18)"
              "  FROM input ORDER BY ord"
              "  ON CONFLICT (submit_token) DO NOTHING"
              "  RETURNING id, submit_token"
              "), events AS ("
              "  INSERT INTO job_events (job_id, old_state, new_state, reason)"
              "  SELECT id, NULL, 'PENDING', 'submitted' FROM ins"
              ")"
              "SELECT id, submit_token FROM ins"},
    statement{"find_tokens", "SELECT id, submit_token FROM jobs WHERE submit_token = ANY($1::text[])"},
    statement{"lock_job", "SELECT state, procs, resize_procs FROM jobs WHERE id = $1 FOR UPDATE"},
    // A batch of transitions: every row locked in one round trip (in id
    // order, so two batches cannot deadlock), then every row updated and
    // every event appended by one statement.
    statement{"lock_jobs",
              "SELECT id, state, procs, resize_procs FROM jobs WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE"},
    statement{"apply_transitions",
              "WITH input AS ("
              "  SELECT * FROM json_to_recordset($1::json) AS x(ord integer, job_id bigint, state text, procs text,"
              "    resize_procs text, clear_start boolean, set_start boolean, set_end boolean, exit_code integer,"
              "    term_signal integer, old_state text, old_procs text, new_procs text, reason text)"
              "), u AS ("
              "  UPDATE jobs j SET state = i.state, procs = i.procs, resize_procs = i.resize_procs,"
              "    start_time = CASE WHEN i.clear_start THEN NULL WHEN i.set_start THEN coalesce(j.start_time, now())"
              "                      ELSE j.start_time END,"
              "    end_time = CASE WHEN i.set_end THEN now() ELSE NULL END,"
              "    exit_code = i.exit_code, term_signal = i.term_signal"
              "  FROM input i WHERE j.id = i.job_id RETURNING j.id"
              ")"
              "INSERT INTO job_events (job_id, old_state, new_state, old_procs, new_procs, reason,"
              "  exit_code, term_signal)"
              "SELECT i.job_id, i.old_state, i.state, i.old_procs, i.new_procs, i.reason, i.exit_code, i.term_signal"
              "  FROM input i JOIN u ON u.id = i.job_id ORDER BY i.ord"
              " RETURNING id, job_id, " AQS_MICROS("time")},
    statement{"job_state", "SELECT state, procs FROM jobs WHERE id = $1"},
    // $5: clear start_time (back to PENDING), $6: set it if unset (RUNNING),
    // $7: set end_time (final state), else it is cleared.
    statement{"apply_transition",
              "WITH u AS ("
              "  UPDATE jobs SET state = $2, procs = $3, resize_procs = $4,"
              "    start_time = CASE WHEN $5 THEN NULL WHEN $6 THEN coalesce(start_time, now())"
              "                      ELSE start_time END,"
              "    end_time = CASE WHEN $7 THEN now() ELSE NULL END,"
              "    exit_code = $8, term_signal = $9"
              "  WHERE id = $1 RETURNING id"
              ")"
              "INSERT INTO job_events (job_id, old_state, new_state, old_procs, new_procs, reason,"
              "  exit_code, term_signal)"
              "SELECT id, $10, $2, $11, $12, $13, $8, $9 FROM u"
              " RETURNING id, " AQS_MICROS("time")},
    statement{"get_job",
              "SELECT " AQS_SUMMARY_COLUMNS
              ", submit_token, gid, script, argv, workdir, environment, stdout_pattern, stderr_pattern, umask"
              " FROM jobs WHERE id = $1"},
    statement{"job_history",
              "SELECT id, job_id, " AQS_MICROS("time") ", old_state, new_state, old_procs, new_procs,"
              " reason, exit_code, term_signal FROM job_events WHERE job_id = $1 ORDER BY id"},
    statement{"last_event",
              "SELECT id, job_id, " AQS_MICROS("time") ", old_state, new_state, old_procs, new_procs,"
              " reason, exit_code, term_signal FROM job_events WHERE job_id = $1 ORDER BY id DESC LIMIT 1"},
    // fjobs listings; LIMIT NULL is no limit. One statement per filter shape
    // so that each gets a plan that uses its index.
    statement{"list_all", "SELECT " AQS_SUMMARY_COLUMNS " FROM jobs WHERE id > $2 ORDER BY id LIMIT $1"},
    statement{"list_live",
              "SELECT " AQS_SUMMARY_COLUMNS
              " FROM jobs WHERE state IN ('PENDING', 'RUNNING', 'RESIZING', 'SUSPENDED') AND id > $2 ORDER BY id LIMIT $1"},
    statement{"list_user_all",
              "SELECT " AQS_SUMMARY_COLUMNS " FROM jobs WHERE user_name = $1 AND id > $3 ORDER BY id LIMIT $2"},
    statement{"list_user_live",
              "SELECT " AQS_SUMMARY_COLUMNS
              " FROM jobs WHERE user_name = $1 AND state IN ('PENDING', 'RUNNING', 'RESIZING', 'SUSPENDED')"
              " AND id > $3 ORDER BY id LIMIT $2"},
    statement{"list_states",
              "SELECT " AQS_SUMMARY_COLUMNS
              " FROM jobs WHERE state = ANY($1::text[]) AND id > $3 ORDER BY id LIMIT $2"},
    statement{"list_user_states",
              "SELECT " AQS_SUMMARY_COLUMNS
              " FROM jobs WHERE user_name = $1 AND state = ANY($2::text[]) AND id > $4 ORDER BY id LIMIT $3"},
    // The same shapes from the newest down (fjobs --limit): id < the bound.
    statement{"list_all_newest", "SELECT " AQS_SUMMARY_COLUMNS " FROM jobs WHERE id < $2 ORDER BY id DESC LIMIT $1"},
    statement{"list_live_newest",
              "SELECT " AQS_SUMMARY_COLUMNS
              " FROM jobs WHERE state IN ('PENDING', 'RUNNING', 'RESIZING', 'SUSPENDED') AND id < $2"
              " ORDER BY id DESC LIMIT $1"},
    statement{"list_user_all_newest",
              "SELECT " AQS_SUMMARY_COLUMNS " FROM jobs WHERE user_name = $1 AND id < $3 ORDER BY id DESC LIMIT $2"},
    statement{"list_user_live_newest",
              "SELECT " AQS_SUMMARY_COLUMNS
              " FROM jobs WHERE user_name = $1 AND state IN ('PENDING', 'RUNNING', 'RESIZING', 'SUSPENDED')"
              " AND id < $3 ORDER BY id DESC LIMIT $2"},
    statement{"list_states_newest",
              "SELECT " AQS_SUMMARY_COLUMNS
              " FROM jobs WHERE state = ANY($1::text[]) AND id < $3 ORDER BY id DESC LIMIT $2"},
    statement{"list_user_states_newest",
              "SELECT " AQS_SUMMARY_COLUMNS
              " FROM jobs WHERE user_name = $1 AND state = ANY($2::text[]) AND id < $4 ORDER BY id DESC LIMIT $3"},
    statement{"list_ids_newest",
              "SELECT " AQS_SUMMARY_COLUMNS
              " FROM jobs WHERE id = ANY($1::bigint[]) AND id < $3 ORDER BY id DESC LIMIT $2"},
    // Listed ids: few, looked up by primary key; the other filters apply in C++.
    statement{"list_ids",
              "SELECT " AQS_SUMMARY_COLUMNS " FROM jobs WHERE id = ANY($1::bigint[]) AND id > $3 ORDER BY id LIMIT $2"},
    statement{"lock_nodes", "LOCK TABLE nodes IN SHARE ROW EXCLUSIVE MODE"},
    statement{"find_node", "SELECT nprocs FROM nodes WHERE name = $1"},
    statement{"insert_node",
              "INSERT INTO nodes (name, address, first_proc, nprocs, cpus, memory_mb, gpus, last_heartbeat)"
              " SELECT $1, $2, coalesce(max(first_proc + nprocs), 0), $3, $4, $5, $6, now() FROM nodes"
              " RETURNING id"},
    statement{"update_node",
              "UPDATE nodes SET address = $2, cpus = $3, memory_mb = $4, gpus = $5, state = 'UP',"
              " last_heartbeat = now() WHERE name = $1 RETURNING id"},
    statement{"node_heartbeat", "UPDATE nodes SET last_heartbeat = now() WHERE name = $1"},
    statement{"node_set_state", "UPDATE nodes SET state = $2 WHERE name = $1"},
    statement{"get_node", "SELECT " AQS_NODE_COLUMNS " FROM nodes WHERE id = $1"},
    statement{"list_nodes", "SELECT " AQS_NODE_COLUMNS " FROM nodes ORDER BY first_proc"},
};

// Not prepared: a cursor cannot run a prepared statement, and SET
// TRANSACTION takes no parameters. Constant text, no values.
constexpr const char* k_declare_live_cursor =
    "DECLARE aqs_live NO SCROLL CURSOR FOR SELECT " AQS_SUMMARY_COLUMNS
    " FROM jobs WHERE state IN ('PENDING', 'RUNNING', 'RESIZING', 'SUSPENDED') ORDER BY id";
constexpr const char* k_fetch_live = "FETCH FORWARD 10000 FROM aqs_live";
constexpr const char* k_snapshot = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY";

// ----------------------------------------------------------- conversions --

time_point micros(const pqxx::field& f) {
  return time_point{std::chrono::microseconds{parse_utc_timestamp(std::string_view(f.c_str(), f.size()))}};
}

std::optional<time_point> opt_micros(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return micros(f);
}

std::optional<std::int32_t> opt_int(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<std::int32_t>();
}

job_state state_of(const pqxx::field& f) {
  auto s = core::parse_job_state(f.c_str());
  if (!s) throw store_error(std::string("unknown job state in the database: ") + f.c_str());
  return *s;
}

processor_set map_of(const pqxx::field& f) {
  if (f.is_null()) return {};
  return processor_set::from_string(std::string_view(f.c_str(), f.size()));
}

std::optional<std::string> opt_text(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<std::string>();
}

std::vector<std::string> text_array(const pqxx::field& f) {
  return parse_array(std::string_view(f.c_str(), f.size()));
}

std::vector<std::int64_t> bigint_array(const pqxx::field& f) {
  std::vector<std::int64_t> out;
  for (const std::string& value : parse_array(std::string_view(f.c_str(), f.size()))) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || p != value.data() + value.size()) throw store_error("bad bigint[] element: " + value);
    out.push_back(v);
  }
  return out;
}

// Walks a row's columns in order through one field: row[i] makes a new
// field holding copies of the result's shared pointers, and those atomic
// copies were a third of aqsd's time listing 100,000 jobs.
class column_cursor {
public:
  explicit column_cursor(const pqxx::row& r) : it_(r.begin()) {}
  // The next column (the first on the first call).
  const pqxx::field& next() {
    if (started_) ++it_;
    started_ = true;
    return it_;  // the iterator is the field it points at
  }

private:
  pqxx::const_row_iterator it_;
  bool started_ = false;
};

// Reads AQS_SUMMARY_COLUMNS in order.
job_summary read_summary(const pqxx::row& r) {
  column_cursor c(r);
  job_summary j;
  j.id = c.next().as<std::int64_t>();
  j.user_name = c.next().as<std::string>();
  j.uid = c.next().as<std::int32_t>();
  j.name = c.next().as<std::string>();
  j.min_pe = c.next().as<std::int32_t>();
  j.max_pe = c.next().as<std::int32_t>();
  j.adaptive = c.next().as<bool>();
  j.walltime_s = opt_int(c.next());
  j.priority = c.next().as<std::int32_t>();
  j.requeue = c.next().as<bool>();
  j.dependencies = bigint_array(c.next());
  job_status& st = j.status;
  st.state = state_of(c.next());
  st.submit_time = micros(c.next());
  st.start_time = opt_micros(c.next());
  st.end_time = opt_micros(c.next());
  st.exit_code = opt_int(c.next());
  st.term_signal = opt_int(c.next());
  st.procs = map_of(c.next());
  if (const pqxx::field& resize = c.next(); !resize.is_null()) st.resize_procs = map_of(resize);
  return j;
}

job_record read_record(const pqxx::row& r) {
  job_record j;
  const job_summary s = read_summary(r);
  j.id = s.id;
  j.status = s.status;
  job_request& q = j.request;
  q.user_name = s.user_name;
  q.uid = s.uid;
  q.name = s.name;
  q.min_pe = s.min_pe;
  q.max_pe = s.max_pe;
  q.adaptive = s.adaptive;
  q.walltime_s = s.walltime_s;
  q.priority = s.priority;
  q.requeue = s.requeue;
  q.dependencies = s.dependencies;
  q.submit_token = r[19].as<std::string>();
  q.gid = r[20].as<std::int32_t>();
  q.script = r[21].as<std::string>();
  q.argv = text_array(r[22]);
  q.workdir = r[23].as<std::string>();
  q.environment = text_array(r[24]);
  q.stdout_pattern = r[25].as<std::string>();
  q.stderr_pattern = r[26].as<std::string>();
  q.umask = r[27].as<std::int32_t>();
  return j;
}

job_event read_event(const pqxx::row& r) {
  job_event e;
  e.id = r[0].as<std::int64_t>();
  e.job_id = r[1].as<std::int64_t>();
  e.time = micros(r[2]);
  if (!r[3].is_null()) e.old_state = state_of(r[3]);
  e.new_state = state_of(r[4]);
  e.old_procs = map_of(r[5]);
  e.new_procs = map_of(r[6]);
  e.reason = r[7].as<std::string>();
  e.exit_code = opt_int(r[8]);
  e.term_signal = opt_int(r[9]);
  return e;
}

node_record read_node(const pqxx::row& r) {
  node_record n;
  n.id = r[0].as<std::int32_t>();
  n.name = r[1].as<std::string>();
  n.address = r[2].as<std::string>();
  n.first_proc = r[3].as<std::int32_t>();
  n.nprocs = r[4].as<std::int32_t>();
  n.cpus = r[5].as<std::string>();
  n.memory_mb = r[6].as<std::int64_t>();
  n.gpus = r[7].as<std::int32_t>();
  auto st = parse_node_state(r[8].c_str());
  if (!st) throw store_error(std::string("unknown node state in the database: ") + r[8].c_str());
  n.state = *st;
  n.registered_at = micros(r[9]);
  n.last_heartbeat = opt_micros(r[10]);
  return n;
}


void append_batch_json(std::string& out, std::size_t ord, const job_request& q) {
  out += "{\"ord\":" + std::to_string(ord) + ",\"token\":";
  append_json_string(out, q.submit_token);
  out += ",\"user_name\":";
  append_json_string(out, q.user_name);
  out += ",\"uid\":" + std::to_string(q.uid) + ",\"gid\":" + std::to_string(q.gid) + ",\"name\":";
  append_json_string(out, q.name);
  out += ",\"script\":";
  append_json_string(out, q.script);
  out += ",\"argv\":[";
  for (std::size_t i = 0; i < q.argv.size(); ++i) {
    if (i) out.push_back(',');
    append_json_string(out, q.argv[i]);
  }
  out += "],\"workdir\":";
  append_json_string(out, q.workdir);
  out += ",\"environment\":[";
  for (std::size_t i = 0; i < q.environment.size(); ++i) {
    if (i) out.push_back(',');
    append_json_string(out, q.environment[i]);
  }
  out += "],\"stdout_pattern\":";
  append_json_string(out, q.stdout_pattern);
  out += ",\"stderr_pattern\":";
  append_json_string(out, q.stderr_pattern);
  out += ",\"min_pe\":" + std::to_string(q.min_pe) + ",\"max_pe\":" + std::to_string(q.max_pe);
  out += ",\"adaptive\":";
  out += q.adaptive ? "true" : "false";
  out += ",\"walltime_s\":" + (q.walltime_s ? std::to_string(*q.walltime_s) : std::string("null"));
  out += ",\"priority\":" + std::to_string(q.priority) + ",\"requeue\":";
  out += q.requeue ? "true" : "false";
  out += ",\"dependencies\":[";
  for (std::size_t i = 0; i < q.dependencies.size(); ++i) {
    if (i) out.push_back(',');
    out += '"' + std::to_string(q.dependencies[i]) + '"';
  }
  out += "],\"umask\":" + std::to_string(q.umask) + "}";
}

// A COMMIT whose outcome we cannot know.
struct commit_unknown {};

bool is_connection_state(const std::string& sqlstate) {
  return sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03";
}

// PostgreSQL notices and libpqxx's own warnings (e.g. "connection lost while
// committing") are handled by the store itself; keep them off stderr.
class quiet_errorhandler final : public pqxx::errorhandler {
public:
  using pqxx::errorhandler::errorhandler;
  bool operator()(const char*) noexcept override { return false; }
};

}  // namespace

// --------------------------------------------------------------- session --

class pg_job_store::session {
public:
  session(const pg_job_store_options& options, pg_job_store& owner) : options_(options), owner_(owner) {}

  // The connection, (re)connecting with backoff until `deadline` if there is
  // none. Throws store_unavailable at the deadline, schema_mismatch from the
  // schema check.
  pqxx::connection& connect(std::chrono::steady_clock::time_point deadline) {
    if (conn_) return *conn_;
    auto delay = options_.backoff_initial;
    for (;;) {
      try {
        auto c = std::make_unique<pqxx::connection>(options_.conninfo);
        auto handler = std::make_unique<quiet_errorhandler>(*c);
        check_schema_version(*c);
        // What parse_utc_timestamp reads.
        c->set_variable("TimeZone", "'UTC'");
        c->set_variable("DateStyle", "'ISO, YMD'");
        for (const statement& s : k_statements) c->prepare(s.name, s.sql);
        handler_ = std::move(handler);
        conn_ = std::move(c);
        owner_.unreachable_ = false;
        if (ever_connected_) {
          std::lock_guard lk(owner_.stats_mu_);
          ++owner_.stats_.reconnects;
        }
        ever_connected_ = true;
        return *conn_;
      } catch (const pqxx::broken_connection& e) {
        last_error_ = e.what();
      } catch (const pqxx::sql_error& e) {
        if (!is_connection_state(e.sqlstate())) throw;
        last_error_ = e.what();
      }
      owner_.unreachable_ = true;
      if (owner_.giving_up_ || std::chrono::steady_clock::now() + delay > deadline) {
        std::string msg = last_error_;
        while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
        throw store_unavailable("cannot reach the job database: " + msg);
      }
      std::this_thread::sleep_for(delay);
      delay = std::min(delay * 2, options_.backoff_max);
    }
  }

  void drop() noexcept {
    handler_.reset();
    conn_.reset();
  }
  bool is_open() const noexcept { return conn_ && conn_->is_open(); }
  int backend_pid() const noexcept { return conn_ ? conn_->backendpid() : 0; }

  ~session() { drop(); }

private:
  const pg_job_store_options& options_;
  pg_job_store& owner_;
  std::unique_ptr<pqxx::connection> conn_;
  std::unique_ptr<quiet_errorhandler> handler_;  // destroyed before conn_
  bool ever_connected_ = false;
  std::string last_error_;
};

// ------------------------------------------------------------- retrying --

// Runs body(tx) in a transaction and commits it, retrying when that is safe:
// - connection lost before COMMIT: reconnect, run again;
// - serialization failure or deadlock: run again (bounded);
// - COMMIT outcome unknown: reconnect, ask resolve_in_doubt(tx) whether it
//   landed (it returns the result if so) and run again only if not. For
//   read-only work the outcome does not matter: run again.
template <class R, class Body, class Resolve>
R pg_job_store::run(session& s, Body&& body, Resolve&& resolve_in_doubt, bool read_only) {
  const auto deadline = std::chrono::steady_clock::now() + options_.reconnect_timeout;
  int rollbacks = 0;
  bool in_doubt = false;
  for (;;) {
    try {
      pqxx::connection& c = s.connect(deadline);
      if (in_doubt) {
        pqxx::work check(c);
        std::optional<R> landed = resolve_in_doubt(check);
        check.commit();
        in_doubt = false;
        {
          std::lock_guard lk(stats_mu_);
          ++stats_.in_doubt;
        }
        if (landed) return std::move(*landed);
      }
      pqxx::work tx(c);
      R result = body(tx);
      if (!read_only && hooks_.before_commit) hooks_.before_commit(s.backend_pid());
      try {
        tx.commit();
      } catch (const pqxx::in_doubt_error&) {
        throw commit_unknown{};
      } catch (const pqxx::broken_connection&) {
        throw commit_unknown{};
      } catch (const pqxx::transaction_rollback&) {
        throw;  // definitely rolled back
      } catch (const pqxx::sql_error& e) {
        if (!s.is_open() || is_connection_state(e.sqlstate())) throw commit_unknown{};
        throw;
      }
      if (!read_only && hooks_.fake_in_doubt_after_commit && hooks_.fake_in_doubt_after_commit()) {
        throw commit_unknown{};
      }
      return result;
    } catch (const commit_unknown&) {
      s.drop();
      in_doubt = !read_only;
    } catch (const pqxx::broken_connection&) {
      s.drop();
    } catch (const pqxx::transaction_rollback&) {
      if (!s.is_open()) {
        s.drop();
      } else if (++rollbacks > 20) {
        throw;
      }
    } catch (const pqxx::sql_error& e) {
      if (s.is_open() && !is_connection_state(e.sqlstate())) throw;
      s.drop();
    }
    if (giving_up_) throw store_unavailable("the job database is unreachable and the store is shutting down");
    if (std::chrono::steady_clock::now() > deadline) {
      throw store_unavailable("the job database stayed unreachable for " +
                              std::to_string(options_.reconnect_timeout.count()) + " ms");
    }
  }
}

// ------------------------------------------------------------- lifetime --

pg_job_store::pg_job_store(pg_job_store_options options) : pg_job_store(std::move(options), test_hooks{}) {}

pg_job_store::pg_job_store(pg_job_store_options options, test_hooks hooks)
    : options_(std::move(options)), hooks_(std::move(hooks)) {
  if (options_.committers == 0) options_.committers = 1;
  if (options_.max_batch == 0) options_.max_batch = 1;
  control_ = std::make_unique<session>(options_, *this);
  control_->connect(std::chrono::steady_clock::now() + options_.reconnect_timeout);
  reader_ = std::make_unique<session>(options_, *this);
  for (unsigned i = 0; i < options_.committers; ++i) {
    committer_sessions_.push_back(std::make_unique<session>(options_, *this));
  }
  for (unsigned i = 0; i < options_.committers; ++i) {
    committers_.emplace_back([this, i] { committer_loop(i); });
  }
}

pg_job_store::~pg_job_store() { shutdown(); }

void pg_job_store::shutdown() noexcept {
  std::call_once(shutdown_once_, [this] {
    giving_up_ = true;
    std::deque<pending_submit> unsent;
    {
      std::lock_guard lk(queue_mu_);
      stopping_ = true;
      unsent.swap(queue_);
    }
    queue_cv_.notify_all();
    // Committers finish the batch in hand (its callbacks run) and return.
    for (auto& t : committers_) t.join();
    for (auto& p : unsent) {
      try {
        throw store_unavailable("the scheduler is stopping: the job was not stored (submit it again)");
      } catch (...) {
        try {
          p.reject(std::current_exception());
        } catch (...) {
          // A callback that throws cannot stop the others from hearing.
        }
      }
    }
  });
}

pg_job_store::counters pg_job_store::stats() const {
  std::lock_guard lk(stats_mu_);
  return stats_;
}

// ---------------------------------------------------------- submissions --

void pg_job_store::pending_submit::resolve(std::int64_t id, bool created) {
  if (done) {
    done(id, created, nullptr);
  } else {
    promise.set_value(id);
  }
}

void pg_job_store::pending_submit::reject(std::exception_ptr e) {
  if (done) {
    done(0, false, e);
  } else {
    promise.set_exception(e);
  }
}

void pg_job_store::enqueue(pending_submit p) {
  check_request(p.request);
  if (p.request.submit_token.empty()) p.request.submit_token = make_submit_token();
  {
    std::lock_guard lk(queue_mu_);
    if (stopping_) throw store_unavailable("the job store is shutting down");
    queue_.push_back(std::move(p));
  }
  queue_cv_.notify_one();
}

std::future<std::int64_t> pg_job_store::submit_async(job_request request) {
  pending_submit p{std::move(request), {}, {}};
  auto future = p.promise.get_future();
  enqueue(std::move(p));
  return future;
}

void pg_job_store::submit_then(job_request request, submit_callback done) {
  enqueue(pending_submit{std::move(request), {}, std::move(done)});
}

std::int64_t pg_job_store::submit(job_request request) { return submit_async(std::move(request)).get(); }

void pg_job_store::committer_loop(unsigned index) {
  session& s = *committer_sessions_[index];
  std::vector<pending_submit> batch;
  for (;;) {
    {
      std::unique_lock lk(queue_mu_);
      queue_cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued is done
      const std::size_t n = std::min(queue_.size(), options_.max_batch);
      batch.clear();
      batch.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    commit_batch(s, batch);
  }
}

// The batch is one statement (jobs and their events through data-modifying
// CTEs) run in autocommit mode: one round trip that is also the COMMIT, so a
// batch costs one WAL flush and no BEGIN/COMMIT round trips. Any connection
// loss while it runs leaves the outcome unknown; it is then resolved by the
// batch's submit_tokens before anything is sent again.
std::vector<std::int64_t> pg_job_store::insert_batch(session& s, const std::vector<pending_submit>& batch,
                                                  std::vector<bool>& created) {
  created.assign(batch.size(), true);
  std::string json = "[";
  std::vector<std::string> tokens;
  tokens.reserve(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (i) json.push_back(',');
    append_batch_json(json, i, batch[i].request);
    tokens.push_back(batch[i].request.submit_token);
  }
  json.push_back(']');
  const std::string token_array = text_array_literal(tokens);

  // Ids in the batch's order, if every token is in the map.
  auto ids_in_order = [&](const std::unordered_map<std::string, std::int64_t>& by_token)
      -> std::optional<std::vector<std::int64_t>> {
    std::vector<std::int64_t> ids;
    ids.reserve(batch.size());
    for (const auto& p : batch) {
      auto it = by_token.find(p.request.submit_token);
      if (it == by_token.end()) return std::nullopt;
      ids.push_back(it->second);
    }
    return ids;
  };
  auto find_tokens = [&](pqxx::nontransaction& tx, std::unordered_map<std::string, std::int64_t>& by_token) {
    for (const auto& row : tx.exec_prepared("find_tokens", token_array)) {
      by_token.emplace(row[1].as<std::string>(), row[0].as<std::int64_t>());
    }
  };

  const auto deadline = std::chrono::steady_clock::now() + options_.reconnect_timeout;
  bool in_doubt = false;
  int rollbacks = 0;
  for (;;) {
    try {
      pqxx::connection& c = s.connect(deadline);
      pqxx::nontransaction tx(c);
      std::unordered_map<std::string, std::int64_t> by_token;
      if (in_doubt) {
        // All or nothing: if the batch landed, every token is there. If not,
        // running it again is safe anyway (ON CONFLICT on the token).
        find_tokens(tx, by_token);
        in_doubt = false;
        {
          std::lock_guard lk(stats_mu_);
          ++stats_.in_doubt;
        }
        if (auto ids = ids_in_order(by_token)) return *ids;
        by_token.clear();
      }
      if (hooks_.before_commit) hooks_.before_commit(s.backend_pid());
      bool committed = false;
      try {
        for (const auto& row : tx.exec_prepared("submit_batch", json)) {
          by_token.emplace(row[1].as<std::string>(), row[0].as<std::int64_t>());
        }
        committed = true;
        if (hooks_.fake_in_doubt_after_commit && hooks_.fake_in_doubt_after_commit()) throw commit_unknown{};
        // Tokens that existed already (a client's retry): their jobs' ids.
        if (by_token.size() < batch.size()) {
          for (std::size_t i = 0; i < batch.size(); ++i) {
            created[i] = by_token.count(batch[i].request.submit_token) != 0;
          }
          find_tokens(tx, by_token);
        }
      } catch (const pqxx::broken_connection&) {
        throw commit_unknown{};
      } catch (const pqxx::in_doubt_error&) {
        throw commit_unknown{};
      } catch (const pqxx::transaction_rollback&) {
        if (committed || !s.is_open()) throw commit_unknown{};
        throw;
      } catch (const pqxx::sql_error& e) {
        if (committed || !s.is_open() || is_connection_state(e.sqlstate())) throw commit_unknown{};
        throw;  // refused: the statement, hence the whole batch, rolled back
      }
      auto ids = ids_in_order(by_token);
      if (!ids) throw store_error("a submitted job vanished after its commit");
      return *ids;
    } catch (const commit_unknown&) {
      s.drop();
      in_doubt = true;
    } catch (const pqxx::broken_connection&) {
      s.drop();  // lost while resolving: still in doubt if we were
    } catch (const pqxx::transaction_rollback&) {
      // A deadlock between two committers inserting the same token: retry.
      if (++rollbacks > 20) throw;
    } catch (const pqxx::sql_error& e) {
      if (s.is_open() && !is_connection_state(e.sqlstate())) throw;
      s.drop();
    }
    if (giving_up_) throw store_unavailable("the job database is unreachable and the store is shutting down");
    if (std::chrono::steady_clock::now() > deadline) {
      throw store_unavailable("the job database stayed unreachable for " +
                              std::to_string(options_.reconnect_timeout.count()) + " ms");
    }
  }
}

void pg_job_store::commit_batch(session& s, std::vector<pending_submit>& batch) {
  try {
    std::vector<bool> created;
    const std::vector<std::int64_t> ids = insert_batch(s, batch, created);
    {
      std::lock_guard lk(stats_mu_);
      ++stats_.batches;
      stats_.submissions += batch.size();
    }
    for (std::size_t i = 0; i < batch.size(); ++i) batch[i].resolve(ids[i], created[i]);
  } catch (const store_unavailable&) {
    for (auto& p : batch) p.reject(std::current_exception());
  } catch (const std::exception& e) {
    if (batch.size() > 1) {
      // The database refused something in the batch (validation should have
      // caught it): commit each job on its own so only the culprit fails.
      for (auto& p : batch) {
        std::vector<pending_submit> one;
        one.push_back(std::move(p));
        commit_batch(s, one);
      }
      return;
    }
    const std::string what = e.what();
    try {
      throw store_error("the database refused job " + batch[0].request.submit_token + ": " + what);
    } catch (...) {
      batch[0].reject(std::current_exception());
    }
  }
}

// ---------------------------------------------------------- transitions --

namespace {


// One transition inside the caller's transaction: lock, check, update the
// row and append the event. `before` receives the state the job was in.
job_event apply_transition(pqxx::work& tx, const job_transition& t, std::optional<job_state>& before) {
  const pqxx::result cur = tx.exec_prepared("lock_job", t.job_id);
  if (cur.empty()) throw not_found("no job " + std::to_string(t.job_id));
  before = state_of(cur[0][0]);
  const planned_transition p = plan_transition(t, *before, cur[0][1].as<std::string>(), opt_text(cur[0][2]));
  const bool clear_start = t.to == job_state::pending;
  const bool set_start = t.to == job_state::running;
  const bool set_end = core::is_final(t.to);
  const pqxx::result ev = tx.exec_prepared(
      "apply_transition", t.job_id, std::string(core::to_string(t.to)), p.procs, p.resize_procs,
      clear_start, set_start, set_end, t.exit_code, t.term_signal, std::string(core::to_string(p.from)),
      p.old_procs, p.event_new, t.reason);
  if (ev.size() != 1) throw store_error("job " + std::to_string(t.job_id) + " vanished during its transition");
  return event_of(t, p, ev[0][0].as<std::int64_t>(), micros(ev[0][1]));
}

void append_optional_int(std::string& out, const std::optional<std::int32_t>& v) {
  out += v ? std::to_string(*v) : std::string("null");
}

// Several transitions of different jobs inside the caller's transaction, in
// two round trips whatever their number. `before[i]` receives the state job
// i was in.
std::vector<job_event> apply_transitions(pqxx::work& tx, const std::vector<job_transition>& ts,
                                         std::vector<std::optional<job_state>>& before) {
  std::string ids = "{";
  for (std::size_t i = 0; i < ts.size(); ++i) ids += (i ? "," : "") + std::to_string(ts[i].job_id);
  ids += "}";
  const pqxx::result rows = tx.exec_prepared("lock_jobs", ids);
  std::unordered_map<std::int64_t, std::size_t> row_of;
  for (std::size_t r = 0; r < rows.size(); ++r) row_of.emplace(rows[r][0].as<std::int64_t>(), r);
  std::vector<planned_transition> plans;
  plans.reserve(ts.size());
  std::string json = "[";
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const job_transition& t = ts[i];
    auto found = row_of.find(t.job_id);
    if (found == row_of.end()) throw not_found("no job " + std::to_string(t.job_id));
    const pqxx::row row = rows[found->second];
    before[i] = state_of(row[1]);
    plans.push_back(plan_transition(t, *before[i], row[2].as<std::string>(), opt_text(row[3])));
    const planned_transition& p = plans.back();
    if (i) json.push_back(',');
    json += "{\"ord\":" + std::to_string(i) + ",\"job_id\":" + std::to_string(t.job_id) + ",\"state\":";
    append_json_string(json, std::string(core::to_string(t.to)));
    json += ",\"procs\":";
    append_json_string(json, p.procs);
    json += ",\"resize_procs\":";
    if (p.resize_procs) {
      append_json_string(json, *p.resize_procs);
    } else {
      json += "null";
    }
    json += std::string(",\"clear_start\":") + (t.to == job_state::pending ? "true" : "false");
    json += std::string(",\"set_start\":") + (t.to == job_state::running ? "true" : "false");
    json += std::string(",\"set_end\":") + (core::is_final(t.to) ? "true" : "false");
    json += ",\"exit_code\":";
    append_optional_int(json, t.exit_code);
    json += ",\"term_signal\":";
    append_optional_int(json, t.term_signal);
    json += ",\"old_state\":";
    append_json_string(json, std::string(core::to_string(p.from)));
    json += ",\"old_procs\":";
    append_json_string(json, p.old_procs);
    json += ",\"new_procs\":";
    append_json_string(json, p.event_new);
    json += ",\"reason\":";
    append_json_string(json, t.reason);
    json += "}";
  }
  json += "]";
  const pqxx::result ev = tx.exec_prepared("apply_transitions", json);
  if (ev.size() != ts.size()) throw store_error("a job vanished during a batch of transitions");
  std::unordered_map<std::int64_t, std::pair<std::int64_t, time_point>> by_job;
  for (const auto& r : ev) by_job.emplace(r[1].as<std::int64_t>(), std::make_pair(r[0].as<std::int64_t>(), micros(r[2])));
  std::vector<job_event> events;
  events.reserve(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto& [id, time] = by_job.at(ts[i].job_id);
    events.push_back(event_of(ts[i], plans[i], id, time));
  }
  return events;
}

// After an unknown COMMIT: the event if the transition landed, nullopt if
// the job is still where the attempt found it; anything else cannot be told.
std::optional<job_event> transition_landed(pqxx::work& tx, const job_transition& t, std::optional<job_state> before) {
  // Only this store moves jobs: the job is either still where the attempt
  // found it (not landed: run again, which re-checks) or in the target state
  // with our event last.
  const pqxx::result cur = tx.exec_prepared("job_state", t.job_id);
  if (cur.empty()) throw not_found("no job " + std::to_string(t.job_id));
  const job_state now = state_of(cur[0][0]);
  if (before && now == *before) return std::nullopt;
  if (now == t.to) {
    const pqxx::result last = tx.exec_prepared("last_event", t.job_id);
    if (!last.empty()) {
      job_event e = read_event(last[0]);
      if (e.new_state == t.to) return e;
    }
  }
  throw store_unavailable("lost the connection while committing job " + std::to_string(t.job_id) +
                          "'s transition and cannot tell whether it landed (job is now " +
                          std::string(core::to_string(now)) + ")");
}

}  // namespace

job_event pg_job_store::transition(const job_transition& t) {
  check_transition(t);
  std::optional<job_state> before;  // the state the (last) attempt moved from
  std::lock_guard lk(control_mu_);
  return run<job_event>(
      *control_, [&](pqxx::work& tx) { return apply_transition(tx, t, before); },
      [&](pqxx::work& tx) { return transition_landed(tx, t, before); }, false);
}

std::vector<job_event> pg_job_store::transition_all(const std::vector<job_transition>& ts) {
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
  return run<std::vector<job_event>>(
      *control_,
      [&](pqxx::work& tx) {
        return apply_transitions(tx, ts, before);
      },
      [&](pqxx::work& tx) -> std::optional<std::vector<job_event>> {
        // One transaction: all landed or none did.
        std::vector<job_event> events;
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

// ------------------------------------------------------------- queries --

namespace {
template <class R>
std::optional<R> no_resolve(pqxx::work&) {
  return std::nullopt;
}
}  // namespace

std::optional<job_record> pg_job_store::get_job(std::int64_t id) {
  std::lock_guard lk(reader_mu_);
  return run<std::optional<job_record>>(
      *reader_,
      [&](pqxx::work& tx) -> std::optional<job_record> {
        const pqxx::result r = tx.exec_prepared("get_job", id);
        if (r.empty()) return std::nullopt;
        return read_record(r[0]);
      },
      no_resolve<std::optional<job_record>>, true);
}

std::vector<job_event> pg_job_store::job_history(std::int64_t id) {
  std::lock_guard lk(reader_mu_);
  return run<std::vector<job_event>>(
      *reader_,
      [&](pqxx::work& tx) {
        std::vector<job_event> out;
        for (const auto& row : tx.exec_prepared("job_history", id)) out.push_back(read_event(row));
        return out;
      },
      no_resolve<std::vector<job_event>>, true);
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
  return run<std::vector<job_summary>>(
      *reader_,
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
        for (const auto& row : r) {
          job_summary js = read_summary(row);
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
  return run<live_state>(
      *control_,
      [&](pqxx::work& tx) {
        tx.exec0(k_snapshot);  // jobs and nodes from one snapshot
        live_state st;
        tx.exec0(k_declare_live_cursor);
        for (;;) {
          const pqxx::result r = tx.exec(k_fetch_live);
          if (r.empty()) break;
          for (const auto& row : r) st.jobs.push_back(read_summary(row));
        }
        for (const auto& row : tx.exec_prepared("list_nodes")) st.nodes.push_back(read_node(row));
        return st;
      },
      no_resolve<live_state>, true);
}

// ---------------------------------------------------------------- nodes --

node_record pg_job_store::register_node(const node_request& q) {
  check_node_request(q);
  std::lock_guard lk(control_mu_);
  // Idempotent (an upsert by name): after an unknown COMMIT, just run again.
  return run<node_record>(
      *control_,
      [&](pqxx::work& tx) {
        // Numbering reads the last node: one registration at a time.
        tx.exec_prepared("lock_nodes");
        const pqxx::result found = tx.exec_prepared("find_node", q.name);
        pqxx::result r;
        if (found.empty()) {
          r = tx.exec_prepared("insert_node", q.name, q.address, q.nprocs, q.cpus, q.memory_mb, q.gpus);
        } else {
          const int had = found[0][0].as<int>();
          if (had != q.nprocs) {
            throw invalid_job("node " + q.name + " registered again with " + std::to_string(q.nprocs) +
                              " processors, it had " + std::to_string(had) +
                              "; renumbering would move running jobs (remove the node first)");
          }
          r = tx.exec_prepared("update_node", q.name, q.address, q.cpus, q.memory_mb, q.gpus);
        }
        return read_node(tx.exec_prepared1("get_node", r[0][0].as<std::int32_t>()));
      },
      no_resolve<node_record>, false);
}

void pg_job_store::heartbeat(std::string_view name) {
  const std::string n(name);
  check_text("node name", n);
  std::lock_guard lk(control_mu_);
  const bool found = run<bool>(
      *control_, [&](pqxx::work& tx) { return tx.exec_prepared("node_heartbeat", n).affected_rows() == 1; },
      no_resolve<bool>, false);
  if (!found) throw not_found("no node " + n);
}

void pg_job_store::set_node_state(std::string_view name, node_state state) {
  const std::string n(name);
  check_text("node name", n);
  std::lock_guard lk(control_mu_);
  const bool found = run<bool>(
      *control_,
      [&](pqxx::work& tx) {
        return tx.exec_prepared("node_set_state", n, std::string(to_string(state))).affected_rows() == 1;
      },
      no_resolve<bool>, false);
  if (!found) throw not_found("no node " + n);
}

std::vector<node_record> pg_job_store::list_nodes() {
  std::lock_guard lk(reader_mu_);
  return run<std::vector<node_record>>(
      *reader_,
      [&](pqxx::work& tx) {
        std::vector<node_record> out;
        for (const auto& row : tx.exec_prepared("list_nodes")) out.push_back(read_node(row));
        return out;
      },
      no_resolve<std::vector<node_record>>, true);
}

}  // namespace aqs::store
