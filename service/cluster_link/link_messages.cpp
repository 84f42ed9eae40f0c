// link_messages: field readers and the report's and job update's JSON.
#include "cluster_link/link_messages.hpp"

#include <cmath>

#include "core/job_state.hpp"
#include "cluster_link/link_channel.hpp"

namespace aqs::faucets {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const json& m, const char* key, const std::string& what) {
  throw link_error(type_of(m) + "." + key + " " + what);
}

const json* find(const json& m, const char* key) {
  const auto it = m.find(key);
  return it == m.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

std::optional<std::int64_t> opt_int_field(const json& m, const char* key, std::int64_t lo, std::int64_t hi) {
  const json* v = find(m, key);
  if (v == nullptr) return std::nullopt;
  const std::string range = "must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
  if (!v->is_number_integer()) bad(m, key, range);
  if (v->is_number_unsigned()) {
    const auto u = v->get<std::uint64_t>();
    if (hi < 0 || u > static_cast<std::uint64_t>(hi) || static_cast<std::int64_t>(u) < lo) bad(m, key, range);
    return static_cast<std::int64_t>(u);
  }
  const auto s = v->get<std::int64_t>();
  if (s < lo || s > hi) bad(m, key, range);
  return s;
}

std::int64_t int_field(const json& m, const char* key, std::int64_t lo, std::int64_t hi) {
  auto v = opt_int_field(m, key, lo, hi);
  if (!v) bad(m, key, "is missing");
  return *v;
}

double number_field(const json& m, const char* key, double lo, double hi) {
  const json* v = find(m, key);
  if (v == nullptr) bad(m, key, "is missing");
  if (!v->is_number()) bad(m, key, "must be a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) bad(m, key, "is out of range");
  return d;
}

std::optional<std::string> opt_string_field(const json& m, const char* key, std::size_t max_len) {
  const json* v = find(m, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) bad(m, key, "must be a string");
  auto s = v->get<std::string>();
  if (s.size() > max_len) bad(m, key, "is longer than " + std::to_string(max_len) + " bytes");
  if (s.find('\0') != std::string::npos) bad(m, key, "contains NUL");
  return s;
}

std::string string_field(const json& m, const char* key, std::size_t max_len) {
  auto s = opt_string_field(m, key, max_len);
  if (!s) bad(m, key, "is missing");
  return *s;
}

json to_json(const cluster_report& r) {
  return json{{"type", "report"},
              {"procs_total", r.procs_total},
              {"procs_free", r.procs_free},
              {"gpus_total", r.gpus_total},
              {"gpus_free", r.gpus_free},
              {"shrinkable", r.shrinkable},
              {"running_jobs", r.running_jobs},
              {"pending_jobs", r.pending_jobs},
              {"pending_procs", r.pending_procs},
              {"pending_by_partition", r.pending_by_partition},
              {"max_job_procs", r.max_job_procs},
              {"max_job_gpus", r.max_job_gpus},
              {"speed", r.speed},
              {"datasets", r.datasets},
              {"nodes_up", r.nodes_up},
              {"price", r.price}};
}

cluster_report parse_report(const json& m) {
  constexpr std::int64_t big = std::int64_t{1} << 40;
  cluster_report r;
  r.procs_total = int_field(m, "procs_total", 0, big);
  r.procs_free = int_field(m, "procs_free", 0, big);
  r.gpus_total = opt_int_field(m, "gpus_total", 0, big).value_or(0);
  r.gpus_free = opt_int_field(m, "gpus_free", 0, big).value_or(0);
  r.shrinkable = opt_int_field(m, "shrinkable", 0, big).value_or(0);
  r.running_jobs = opt_int_field(m, "running_jobs", 0, big).value_or(0);
  r.pending_jobs = opt_int_field(m, "pending_jobs", 0, big).value_or(0);
  r.pending_procs = opt_int_field(m, "pending_procs", 0, big).value_or(0);
  r.max_job_procs = opt_int_field(m, "max_job_procs", 0, big).value_or(r.procs_total);
  r.max_job_gpus = opt_int_field(m, "max_job_gpus", 0, big).value_or(r.gpus_total);
  r.nodes_up = opt_int_field(m, "nodes_up", 0, big).value_or(0);
  if (find(m, "speed") != nullptr) r.speed = number_field(m, "speed", 0.001, 1000.0);
  if (find(m, "price") != nullptr) r.price = number_field(m, "price", 0, 1e9);
  if (const json* p = find(m, "pending_by_partition")) {
    if (!p->is_object() || p->size() > 1024) bad(m, "pending_by_partition", "must be an object of at most 1024 counts");
    for (const auto& [name, n] : p->items()) {
      if (!n.is_number_integer() || n.get<std::int64_t>() < 0 || name.size() > 256) {
        bad(m, "pending_by_partition", "must map partition names to counts");
      }
      r.pending_by_partition[name] = n.get<std::int64_t>();
    }
  }
  if (const json* d = find(m, "datasets")) {
    if (!d->is_array() || d->size() > 4096) bad(m, "datasets", "must be an array of at most 4096 names");
    for (const auto& v : *d) {
      if (!v.is_string() || v.get<std::string>().size() > 256) bad(m, "datasets", "must hold names");
      r.datasets.push_back(v.get<std::string>());
    }
  }
  if (r.procs_free > r.procs_total) bad(m, "procs_free", "is more than procs_total");
  return r;
}

json to_json(const job_update& u) {
  json j{{"type", "job_update"}, {"fid", u.fid}, {"job_id", u.job_id}, {"state", u.state}, {"nprocs", u.nprocs}};
  j["exit_code"] = u.exit_code ? json(*u.exit_code) : json(nullptr);
  j["start_time"] = u.start_time ? json(*u.start_time) : json(nullptr);
  j["end_time"] = u.end_time ? json(*u.end_time) : json(nullptr);
  if (u.attempt) j["attempt"] = *u.attempt;
  if (u.proc_seconds) j["proc_seconds"] = *u.proc_seconds;
  return j;
}

job_update parse_job_update(const json& m) {
  constexpr std::int64_t big = (std::int64_t{1} << 53) - 1;
  job_update u;
  u.fid = int_field(m, "fid", 1, big);
  u.job_id = int_field(m, "job_id", 1, big);
  u.state = string_field(m, "state", 32);
  if (!core::parse_job_state(u.state) && u.state != "UNKNOWN") bad(m, "state", "is not a job state");
  u.nprocs = opt_int_field(m, "nprocs", 0, big).value_or(0);
  u.exit_code = opt_int_field(m, "exit_code", -1024, 1024);
  u.start_time = opt_string_field(m, "start_time", 64);
  u.end_time = opt_string_field(m, "end_time", 64);
  u.attempt = opt_int_field(m, "attempt", 0, big);
  if (find(m, "proc_seconds") != nullptr) u.proc_seconds = number_field(m, "proc_seconds", 0, 1e15);
  return u;
}

}  // namespace aqs::faucets
