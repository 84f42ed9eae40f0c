// pg_rows: reading the store's records from result rows, by column name.
#include "store/pg_rows.hpp"

#include <charconv>
#include <string_view>

#include "store/sql_text.hpp"
#include "store/store_errors.hpp"

namespace aqs::store {

using core::job_state;
using core::processor_set;

// Timestamps travel as text in UTC (set on every connection) and are parsed
// here: cheaper for the server than computing epoch numerics per row.
time_point micros(const pqxx::field& f) {
  return time_point{std::chrono::microseconds{parse_utc_timestamp(std::string_view(f.c_str(), f.size()))}};
}

namespace {

std::optional<time_point> opt_micros(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return micros(f);
}

std::optional<std::int32_t> opt_int(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<std::int32_t>();
}

}  // namespace

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

namespace {

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

const pg_column<job_summary> k_summary[] = {
    {"id", [](const pqxx::field& f, job_summary& j) { j.id = f.as<std::int64_t>(); }},
    {"user_name", [](const pqxx::field& f, job_summary& j) { j.user_name = f.as<std::string>(); }},
    {"uid", [](const pqxx::field& f, job_summary& j) { j.uid = f.as<std::int32_t>(); }},
    {"name", [](const pqxx::field& f, job_summary& j) { j.name = f.as<std::string>(); }},
    {"min_pe", [](const pqxx::field& f, job_summary& j) { j.min_pe = f.as<std::int32_t>(); }},
    {"max_pe", [](const pqxx::field& f, job_summary& j) { j.max_pe = f.as<std::int32_t>(); }},
    {"adaptive", [](const pqxx::field& f, job_summary& j) { j.adaptive = f.as<bool>(); }},
    {"walltime_s", [](const pqxx::field& f, job_summary& j) { j.walltime_s = opt_int(f); }},
    {"priority", [](const pqxx::field& f, job_summary& j) { j.priority = f.as<std::int32_t>(); }},
    {"requeue", [](const pqxx::field& f, job_summary& j) { j.requeue = f.as<bool>(); }},
    {"dependencies", [](const pqxx::field& f, job_summary& j) { j.dependencies = bigint_array(f); }},
    {"geometry",
     [](const pqxx::field& f, job_summary& j) {
       if (!f.is_null()) j.geometry = f.as<std::string>();
     }},
    {"state", [](const pqxx::field& f, job_summary& j) { j.status.state = state_of(f); }},
    {"submit_time", [](const pqxx::field& f, job_summary& j) { j.status.submit_time = micros(f); }},
    {"start_time", [](const pqxx::field& f, job_summary& j) { j.status.start_time = opt_micros(f); }},
    {"end_time", [](const pqxx::field& f, job_summary& j) { j.status.end_time = opt_micros(f); }},
    {"exit_code", [](const pqxx::field& f, job_summary& j) { j.status.exit_code = opt_int(f); }},
    {"term_signal", [](const pqxx::field& f, job_summary& j) { j.status.term_signal = opt_int(f); }},
    {"procs", [](const pqxx::field& f, job_summary& j) { j.status.procs = map_of(f); }},
    {"resize_procs",
     [](const pqxx::field& f, job_summary& j) {
       if (!f.is_null()) j.status.resize_procs = map_of(f);
     }},
    {"submit_token", [](const pqxx::field& f, job_summary& j) { j.submit_token = f.as<std::string>(); }},
    {"control",
     [](const pqxx::field& f, job_summary& j) {
       if (!f.is_null()) j.status.control = f.as<std::string>();
     }},
};

const pg_column<job_record> k_record[] = {
    {"gid", [](const pqxx::field& f, job_record& j) { j.request.gid = f.as<std::int32_t>(); }},
    {"script", [](const pqxx::field& f, job_record& j) { j.request.script = f.as<std::string>(); }},
    {"argv", [](const pqxx::field& f, job_record& j) { j.request.argv = text_array(f); }},
    {"workdir", [](const pqxx::field& f, job_record& j) { j.request.workdir = f.as<std::string>(); }},
    {"environment", [](const pqxx::field& f, job_record& j) { j.request.environment = text_array(f); }},
    {"stdout_pattern", [](const pqxx::field& f, job_record& j) { j.request.stdout_pattern = f.as<std::string>(); }},
    {"stderr_pattern", [](const pqxx::field& f, job_record& j) { j.request.stderr_pattern = f.as<std::string>(); }},
    {"umask", [](const pqxx::field& f, job_record& j) { j.request.umask = f.as<std::int32_t>(); }},
};

const pg_column<history_event> k_event[] = {
    {"id", [](const pqxx::field& f, history_event& e) { e.id = f.as<std::int64_t>(); }},
    {"job_id", [](const pqxx::field& f, history_event& e) { e.job_id = f.as<std::int64_t>(); }},
    {"time", [](const pqxx::field& f, history_event& e) { e.time = micros(f); }},
    {"old_state",
     [](const pqxx::field& f, history_event& e) {
       if (!f.is_null()) e.old_state = state_of(f);
     }},
    {"new_state", [](const pqxx::field& f, history_event& e) { e.new_state = state_of(f); }},
    {"old_procs", [](const pqxx::field& f, history_event& e) { e.old_procs = map_of(f); }},
    {"new_procs", [](const pqxx::field& f, history_event& e) { e.new_procs = map_of(f); }},
    {"reason", [](const pqxx::field& f, history_event& e) { e.reason = f.as<std::string>(); }},
    {"exit_code", [](const pqxx::field& f, history_event& e) { e.exit_code = opt_int(f); }},
    {"term_signal", [](const pqxx::field& f, history_event& e) { e.term_signal = opt_int(f); }},
};

const pg_column<node_record> k_node[] = {
    {"id", [](const pqxx::field& f, node_record& n) { n.id = f.as<std::int32_t>(); }},
    {"name", [](const pqxx::field& f, node_record& n) { n.name = f.as<std::string>(); }},
    {"address", [](const pqxx::field& f, node_record& n) { n.address = f.as<std::string>(); }},
    {"first_proc", [](const pqxx::field& f, node_record& n) { n.first_proc = f.as<std::int32_t>(); }},
    {"nprocs", [](const pqxx::field& f, node_record& n) { n.nprocs = f.as<std::int32_t>(); }},
    {"cpus", [](const pqxx::field& f, node_record& n) { n.cpus = f.as<std::string>(); }},
    {"memory_mb", [](const pqxx::field& f, node_record& n) { n.memory_mb = f.as<std::int64_t>(); }},
    {"gpus", [](const pqxx::field& f, node_record& n) { n.gpus = f.as<std::int32_t>(); }},
    {"state",
     [](const pqxx::field& f, node_record& n) {
       auto st = parse_node_state(f.c_str());
       if (!st) throw store_error(std::string("unknown node state in the database: ") + f.c_str());
       n.state = *st;
     }},
    {"registered_at", [](const pqxx::field& f, node_record& n) { n.registered_at = micros(f); }},
    {"last_heartbeat", [](const pqxx::field& f, node_record& n) { n.last_heartbeat = opt_micros(f); }},
};

template <class Record>
std::vector<Record> read_all(const pqxx::result& r, std::span<const pg_column<Record>> columns) {
  std::vector<Record> out;
  out.reserve(r.size());
  if (r.empty()) return out;
  const pg_row_reader<Record> reader(r, columns);
  for (const auto& row : r) reader.read(row, out.emplace_back());
  return out;
}

}  // namespace

std::span<const pg_column<job_summary>> summary_columns() { return k_summary; }
std::span<const pg_column<job_record>> record_columns() { return k_record; }
std::span<const pg_column<history_event>> event_columns() { return k_event; }
std::span<const pg_column<node_record>> node_columns() { return k_node; }

std::vector<job_summary> read_summaries(const pqxx::result& r) { return read_all(r, summary_columns()); }

void append_summaries(const pqxx::result& r, std::vector<job_summary>& out) {
  if (r.empty()) return;
  const pg_row_reader<job_summary> reader(r, summary_columns());
  for (const auto& row : r) reader.read(row, out.emplace_back());
}

job_record read_record(const pqxx::result& r, std::size_t row) {
  job_summary s;
  pg_row_reader<job_summary>(r, summary_columns()).read(r[static_cast<pqxx::result::size_type>(row)], s);
  job_record j = record_of(std::move(s));  // then the columns only a record has
  pg_row_reader<job_record>(r, record_columns()).read(r[static_cast<pqxx::result::size_type>(row)], j);
  return j;
}

std::vector<history_event> read_events(const pqxx::result& r) { return read_all(r, event_columns()); }
std::vector<node_record> read_nodes(const pqxx::result& r) { return read_all(r, node_columns()); }

}  // namespace aqs::store
