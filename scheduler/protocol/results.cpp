// results: JSON for listed jobs and nodes, validated like every message.
#include "protocol/results.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "core/enum_names.hpp"
#include "core/json_string.hpp"
#include "protocol/field_reader.hpp"
#include "protocol/messages.hpp"

namespace aqs::protocol {

using detail::reader;
using nlohmann::json;

namespace {

constexpr reader::str_rule k_name{k_max_name, true, true};
constexpr reader::str_rule k_time{64, true, true};

template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

reader object_reader(const json& j, const std::string& where) {
  if (!j.is_object()) {
    throw protocol_error(error_code::bad_request,
                         "field '" + (where.empty() ? std::string("(top)") : where) + "' must be an object");
  }
  return reader(j, where.empty() ? std::string() : where + ".");
}

const json& list_of(const json& result, const char* key) {
  const reader r = object_reader(result, "");
  const json* a = r.array(key, k_max_ids, true);
  return *a;
}

}  // namespace

namespace {
// The wire says DRAIN (fnodes --json), the store and the core DRAINED.
constexpr core::enum_table<node_state, 3> k_node_states = {{
    {node_state::up, "UP"},
    {node_state::down, "DOWN"},
    {node_state::drain, "DRAIN"},
}};
}  // namespace

std::string_view to_string(node_state s) noexcept { return core::name_in(k_node_states, s, "DOWN"); }

std::optional<node_state> parse_node_state(std::string_view text) noexcept {
  return core::value_in(k_node_states, text);
}

json to_json(const job_info& j) {
  json out{{"id", j.id},
              {"name", j.name},
              {"user", j.user},
              {"state", core::to_string(j.state)},
              {"adaptive", j.adaptive},
              {"min_pe", j.min_pe},
              {"max_pe", j.max_pe},
              {"procs", j.procs},
              {"nprocs", j.nprocs},
              {"nodes", j.nodes},
              {"submit_time", opt(j.submit_time)},
              {"start_time", opt(j.start_time)},
              {"end_time", opt(j.end_time)},
              {"exit_code", opt(j.exit_code)},
              {"walltime_s", opt(j.walltime_s)},
              {"array_job_id", opt(j.array_job_id)},
              {"array_task_id", opt(j.array_task_id)},
              {"partition", opt(j.partition)},
              {"reason", opt(j.reason)}};
  // Only an adaptive job that declared one (issue 34): older readers see nothing new.
  if (j.pref_pe) out["pref_pe"] = *j.pref_pe;
  // Usage (list_jobs with `usage`): each only when known.
  if (j.account) out["account"] = *j.account;
  const std::pair<const char*, const std::optional<std::int64_t>*> usage[] = {
      {"alloc_cpu_ms", &j.alloc_cpu_ms},   {"mem_per_node_mb", &j.mem_per_node_mb}, {"mem_per_cpu_mb", &j.mem_per_cpu_mb},
      {"user_cpu_us", &j.user_cpu_us},     {"system_cpu_us", &j.system_cpu_us},     {"max_rss_kb", &j.max_rss_kb},
      {"measured_nodes", &j.measured_nodes}};
  for (const auto& [key, v] : usage) {
    if (*v) out[key] = **v;
  }
  return out;
}

json to_json(const node_info& n) {
  json j{{"name", n.name},   {"state", to_string(n.state)}, {"first_proc", n.first_proc},
         {"nprocs", n.nprocs}, {"procs", n.procs},          {"jobs", n.jobs},
         {"memory_mb", n.memory_mb}, {"gpus", n.gpus}};
  if (!n.partitions.empty()) j["partitions"] = n.partitions;
  if (!n.containment.empty()) j["containment"] = n.containment;
  if (!n.latency.empty()) {
    json& l = j["latency"] = json::array();
    for (const auto& s : n.latency) l.push_back({{"node", s.node}, {"rtt_us", s.rtt_us}});
  }
  return j;
}

namespace {

using core::append_json_string;

void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_opt(std::string& out, const std::optional<std::string>& v) {
  if (v) {
    append_json_string(out, *v);
  } else {
    out += "null";
  }
}

void append_opt(std::string& out, const std::optional<std::int64_t>& v) {
  if (v) {
    append_int(out, *v);
  } else {
    out += "null";
  }
}

// ,"key":N only when v is set (the usage fields).
void append_if(std::string& out, const char* key, const std::optional<std::int64_t>& v) {
  if (!v) return;
  out += ",\"";
  out += key;
  out += "\":";
  append_int(out, *v);
}

}  // namespace

void append_json(std::string& out, const job_info& j) {
  // The members in nlohmann's order (sorted by key), as to_json(j).dump().
  out += '{';
  if (j.account) {
    out += "\"account\":";
    append_json_string(out, *j.account);
    out += ',';
  }
  out += j.adaptive ? "\"adaptive\":true" : "\"adaptive\":false";
  append_if(out, "alloc_cpu_ms", j.alloc_cpu_ms);
  out += ",\"array_job_id\":";
  append_opt(out, j.array_job_id);
  out += ",\"array_task_id\":";
  append_opt(out, j.array_task_id);
  out += ",\"end_time\":";
  append_opt(out, j.end_time);
  out += ",\"exit_code\":";
  append_opt(out, j.exit_code);
  out += ",\"id\":";
  append_int(out, j.id);
  out += ",\"max_pe\":";
  append_int(out, j.max_pe);
  append_if(out, "max_rss_kb", j.max_rss_kb);
  append_if(out, "measured_nodes", j.measured_nodes);
  append_if(out, "mem_per_cpu_mb", j.mem_per_cpu_mb);
  append_if(out, "mem_per_node_mb", j.mem_per_node_mb);
  out += ",\"min_pe\":";
  append_int(out, j.min_pe);
  out += ",\"name\":";
  append_json_string(out, j.name);
  out += ",\"nodes\":";
  append_json_string(out, j.nodes);
  out += ",\"nprocs\":";
  append_int(out, j.nprocs);
  out += ",\"partition\":";
  append_opt(out, j.partition);
  if (j.pref_pe) {
    out += ",\"pref_pe\":";
    append_int(out, *j.pref_pe);
  }
  out += ",\"procs\":";
  append_json_string(out, j.procs);
  out += ",\"reason\":";
  append_opt(out, j.reason);
  out += ",\"start_time\":";
  append_opt(out, j.start_time);
  out += ",\"state\":";
  append_json_string(out, core::to_string(j.state));
  out += ",\"submit_time\":";
  append_opt(out, j.submit_time);
  append_if(out, "system_cpu_us", j.system_cpu_us);
  out += ",\"user\":";
  append_json_string(out, j.user);
  append_if(out, "user_cpu_us", j.user_cpu_us);
  out += ",\"walltime_s\":";
  append_opt(out, j.walltime_s);
  out += '}';
}

job_info parse_job_info(const json& j, const std::string& where) {
  const reader r = object_reader(j, where);
  job_info out;
  out.id = r.integer("id", 1, k_max_job_id);
  out.name = r.string("name", k_name);
  out.user = r.string("user", k_name);
  out.state = r.state_of("state", r.need("state"));
  out.adaptive = r.boolean("adaptive", false);
  out.min_pe = r.integer("min_pe", 1, k_max_pe);
  out.max_pe = r.integer("max_pe", 1, k_max_pe);
  if (out.max_pe < out.min_pe) r.fail("max_pe", "must be >= min_pe");
  out.procs = r.opt_string("procs", {static_cast<std::size_t>(k_max_pe), false, true}).value_or("");
  if (out.procs.find_first_not_of("01") != std::string::npos) r.fail("procs", "must contain only 0 and 1");
  out.nprocs = r.integer_or("nprocs", 0, k_max_pe, 0);
  if (static_cast<std::int64_t>(std::count(out.procs.begin(), out.procs.end(), '1')) != out.nprocs) {
    r.fail("nprocs", "must equal the number of 1s in 'procs'");
  }
  out.nodes = r.opt_string("nodes", {k_max_path * 16, false, true}).value_or("");
  out.submit_time = r.opt_string("submit_time", k_time);
  out.start_time = r.opt_string("start_time", k_time);
  out.end_time = r.opt_string("end_time", k_time);
  out.exit_code = r.opt_integer("exit_code", 0, 255);
  out.walltime_s = r.opt_integer("walltime_s", 1, k_max_walltime_s);
  out.array_job_id = r.opt_integer("array_job_id", 1, k_max_job_id);
  out.array_task_id = r.opt_integer("array_task_id", 0, 4'000'000);
  out.partition = r.opt_string("partition", k_name);
  out.reason = r.opt_string("reason", k_name);
  out.pref_pe = r.opt_integer("pref_pe", 1, k_max_pe);
  out.account = r.opt_string("account", k_name);
  constexpr std::int64_t k_big = std::int64_t{1} << 53;
  out.alloc_cpu_ms = r.opt_integer("alloc_cpu_ms", 0, k_big);
  out.mem_per_node_mb = r.opt_integer("mem_per_node_mb", 0, k_big);
  out.mem_per_cpu_mb = r.opt_integer("mem_per_cpu_mb", 0, k_big);
  out.user_cpu_us = r.opt_integer("user_cpu_us", 0, k_big);
  out.system_cpu_us = r.opt_integer("system_cpu_us", 0, k_big);
  out.max_rss_kb = r.opt_integer("max_rss_kb", 0, k_big);
  out.measured_nodes = r.opt_integer("measured_nodes", 0, k_max_pe);
  return out;
}

node_info parse_node_info(const json& j, const std::string& where) {
  const reader r = object_reader(j, where);
  node_info out;
  out.name = r.string("name", k_name);
  const std::string state = r.string("state", k_name);
  const auto st = parse_node_state(state);
  if (!st) r.fail("state", "must be UP, DOWN or DRAIN");
  out.state = *st;
  out.first_proc = r.integer_or("first_proc", 0, k_max_pe, 0);
  out.nprocs = r.integer_or("nprocs", 0, k_max_pe, 0);
  out.procs = r.opt_string("procs", {k_max_path, false, true}).value_or("");
  out.jobs = r.integers("jobs", k_max_ids, 1, k_max_job_id);
  out.memory_mb = r.integer_or("memory_mb", 0, std::int64_t{1} << 40, 0);
  out.gpus = r.integer_or("gpus", 0, 1 << 16, 0);
  out.partitions = r.strings("partitions", 4096, k_name);
  out.containment = r.opt_string("containment", {k_max_text, false, true}).value_or("");
  if (const json* a = r.array("latency", k_max_latency_peers, false)) {
    out.latency.reserve(a->size());
    for (std::size_t i = 0; i < a->size(); ++i) {
      const reader s = r.nested("latency[" + std::to_string(i) + "]", (*a)[i]);
      out.latency.push_back({s.string("node", k_name), s.integer("rtt_us", 0, k_max_rtt_us)});
    }
  }
  return out;
}

namespace {

// Each entry of the list result[key] read by `parse`, named "key[i]" in its
// errors.
template <class Parse>
auto parse_list(const json& result, const char* key, Parse parse) {
  const json& a = list_of(result, key);
  std::vector<decltype(parse(a, std::string()))> out;
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(parse(a[i], key + ("[" + std::to_string(i) + "]")));
  return out;
}

}  // namespace

std::vector<job_info> parse_job_list(const json& result) { return parse_list(result, "jobs", parse_job_info); }

std::vector<node_info> parse_node_list(const json& result) { return parse_list(result, "nodes", parse_node_info); }

}  // namespace aqs::protocol
