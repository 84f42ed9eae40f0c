// pg_statements: the store's SQL, every statement prepared by name on each
// connection; SELECT lists come from the record descriptions in pg_rows.
#include "store/pg_statements.hpp"

#include <array>

#include "store/pg_rows.hpp"

namespace aqs::store {

namespace {

struct statement {
  const char* name;
  // {summary}, {record}, {event} and {node} stand for the column lists of
  // those records.
  const char* sql;
};

// One transaction inserts a whole batch, each job with its PENDING event
// (one statement: no job without its event can ever exist). ON CONFLICT on
// the unique submit_token makes re-running a batch harmless: jobs that exist
// already are not inserted again and are looked up by token instead.
const std::array k_templates = {
    statement{"submit_batch",
              "WITH input AS ("
              "  SELECT * FROM jsonb_to_recordset($1::jsonb) AS x("
              "    ord integer, token text, user_name text, uid integer, gid integer, name text,"
              "    script text, argv jsonb, workdir text, environment jsonb, stdout_pattern text,"
              "    stderr_pattern text, min_pe integer, max_pe integer, adaptive boolean,"
              "    walltime_s integer, priority integer, requeue boolean, dependencies jsonb, umask integer,"
              "    geometry jsonb)"
              "), ins AS ("
              "  INSERT INTO jobs (submit_token, user_name, uid, gid, name, script, argv, workdir,"
              "    environment, stdout_pattern, stderr_pattern, min_pe, max_pe, adaptive, walltime_s,"
              "    priority, requeue, dependencies, umask, geometry)"
              "  SELECT token, user_name, uid, gid, name, script,"
              "    ARRAY(SELECT e FROM jsonb_array_elements_text(argv) WITH ORDINALITY AS a(e, n) ORDER BY n),"
              "    workdir,"
              "    ARRAY(SELECT e FROM jsonb_array_elements_text(environment) WITH ORDINALITY AS a(e, n) ORDER BY n),"
              "    stdout_pattern, stderr_pattern, min_pe, max_pe, adaptive, walltime_s, priority, requeue,"
              "    ARRAY(SELECT e::bigint FROM jsonb_array_elements_text(dependencies) WITH ORDINALITY AS a(e, n) ORDER BY n),"
              "    coalesce(umask, 18), geometry"
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
              " RETURNING id, job_id, time"},
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
              " RETURNING id, time"},
    statement{"get_job", "SELECT {summary}, {record} FROM jobs WHERE id = $1"},
    statement{"job_history",
              "SELECT {event} FROM job_events WHERE job_id = $1 ORDER BY id"},
    statement{"last_event",
              "SELECT {event} FROM job_events WHERE job_id = $1 ORDER BY id DESC LIMIT 1"},
    // fjobs listings; LIMIT NULL is no limit. One statement per filter shape
    // so that each gets a plan that uses its index.
    statement{"list_all", "SELECT {summary} FROM jobs WHERE id > $2 ORDER BY id LIMIT $1"},
    statement{"list_live",
              "SELECT {summary}"
              " FROM jobs WHERE state IN ('PENDING', 'RUNNING', 'RESIZING', 'SUSPENDED') AND id > $2 ORDER BY id LIMIT $1"},
    statement{"list_user_all",
              "SELECT {summary} FROM jobs WHERE user_name = $1 AND id > $3 ORDER BY id LIMIT $2"},
    statement{"list_user_live",
              "SELECT {summary}"
              " FROM jobs WHERE user_name = $1 AND state IN ('PENDING', 'RUNNING', 'RESIZING', 'SUSPENDED')"
              " AND id > $3 ORDER BY id LIMIT $2"},
    statement{"list_states",
              "SELECT {summary}"
              " FROM jobs WHERE state = ANY($1::text[]) AND id > $3 ORDER BY id LIMIT $2"},
    statement{"list_user_states",
              "SELECT {summary}"
              " FROM jobs WHERE user_name = $1 AND state = ANY($2::text[]) AND id > $4 ORDER BY id LIMIT $3"},
    // The same shapes from the newest down (fjobs --limit): id < the bound.
    statement{"list_all_newest", "SELECT {summary} FROM jobs WHERE id < $2 ORDER BY id DESC LIMIT $1"},
    statement{"list_live_newest",
              "SELECT {summary}"
              " FROM jobs WHERE state IN ('PENDING', 'RUNNING', 'RESIZING', 'SUSPENDED') AND id < $2"
              " ORDER BY id DESC LIMIT $1"},
    statement{"list_user_all_newest",
              "SELECT {summary} FROM jobs WHERE user_name = $1 AND id < $3 ORDER BY id DESC LIMIT $2"},
    statement{"list_user_live_newest",
              "SELECT {summary}"
              " FROM jobs WHERE user_name = $1 AND state IN ('PENDING', 'RUNNING', 'RESIZING', 'SUSPENDED')"
              " AND id < $3 ORDER BY id DESC LIMIT $2"},
    statement{"list_states_newest",
              "SELECT {summary}"
              " FROM jobs WHERE state = ANY($1::text[]) AND id < $3 ORDER BY id DESC LIMIT $2"},
    statement{"list_user_states_newest",
              "SELECT {summary}"
              " FROM jobs WHERE user_name = $1 AND state = ANY($2::text[]) AND id < $4 ORDER BY id DESC LIMIT $3"},
    statement{"list_ids_newest",
              "SELECT {summary}"
              " FROM jobs WHERE id = ANY($1::bigint[]) AND id < $3 ORDER BY id DESC LIMIT $2"},
    // Listed ids: few, looked up by primary key; the other filters apply in C++.
    statement{"list_ids",
              "SELECT {summary} FROM jobs WHERE id = ANY($1::bigint[]) AND id > $3 ORDER BY id LIMIT $2"},
    // Issue 32: a node's measurement of a job, and the usage of listed jobs
    // (its usage record, read here beside the measurements so that a
    // listing asks once; account_store writes usage_records).
    statement{"record_measurement",
              "INSERT INTO job_measurements (job_id, node, user_cpu_us, system_cpu_us, max_rss_kb)"
              " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (job_id, node) DO UPDATE SET"
              " user_cpu_us = EXCLUDED.user_cpu_us, system_cpu_us = EXCLUDED.system_cpu_us,"
              " max_rss_kb = EXCLUDED.max_rss_kb, recorded_at = now()"},
    statement{"job_usage",
              "SELECT i.id AS job_id, u.account, u.cpu_seconds, m.user_cpu_us, m.system_cpu_us, m.max_rss_kb,"
              "  m.nodes"
              " FROM unnest($1::bigint[]) AS i(id)"
              " LEFT JOIN usage_records u ON u.job_id = i.id"
              " CROSS JOIN LATERAL ("
              "  SELECT sum(x.user_cpu_us)::bigint AS user_cpu_us, sum(x.system_cpu_us)::bigint AS system_cpu_us,"
              "    max(x.max_rss_kb) AS max_rss_kb, count(*) AS nodes"
              "  FROM job_measurements x LEFT JOIN jobs j ON j.id = x.job_id"
              "  WHERE x.job_id = i.id AND (j.start_time IS NULL OR x.recorded_at >= j.start_time)) m"
              " WHERE u.job_id IS NOT NULL OR m.nodes > 0"},
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
    statement{"get_node", "SELECT {node} FROM nodes WHERE id = $1"},
    statement{"list_nodes", "SELECT {node} FROM nodes ORDER BY first_proc"},
    statement{"cluster_id", "SELECT cluster_id FROM cluster_identity"},
};

// Not prepared: a cursor cannot run a prepared statement.
constexpr const char* k_declare_live_cursor =
    "DECLARE aqs_live NO SCROLL CURSOR FOR SELECT {summary}"
    " FROM jobs WHERE state IN ('PENDING', 'RUNNING', 'RESIZING', 'SUSPENDED') ORDER BY id";

// The template with its column lists filled in.
std::string expand(std::string_view sql) {
  static const std::array<std::pair<std::string_view, std::string>, 4> lists = {{
      {"{summary}", column_list(summary_columns())},
      {"{record}", column_list(record_columns())},
      {"{event}", column_list(event_columns())},
      {"{node}", column_list(node_columns())},
  }};
  std::string out(sql);
  for (const auto& [mark, columns] : lists) {
    for (auto at = out.find(mark); at != std::string::npos; at = out.find(mark, at + columns.size())) {
      out.replace(at, mark.size(), columns);
    }
  }
  return out;
}

}  // namespace

const std::vector<pg_statement>& pg_statements() {
  static const std::vector<pg_statement> all = [] {
    std::vector<pg_statement> v;
    for (const statement& s : k_templates) v.push_back({s.name, expand(s.sql)});
    return v;
  }();
  return all;
}

const std::string& pg_declare_live_cursor() {
  static const std::string sql = expand(k_declare_live_cursor);
  return sql;
}

void prepare_statements(pqxx::connection& c) {
  for (const pg_statement& s : pg_statements()) c.prepare(s.name, s.sql);
}

}  // namespace aqs::store
