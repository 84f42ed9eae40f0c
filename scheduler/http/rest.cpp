// rest: routes, the REST submit body, statuses and the JSON of views.
#include "http/rest.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>
#include <stdexcept>

#include "core/time_limit.hpp"
#include "core/usage_error.hpp"
#include "core/enum_names.hpp"
#include "core/hostlist.hpp"
#include "core/job_state.hpp"
#include "core/partition.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/messages.hpp"

namespace aqs::http {

using nlohmann::json;

const std::vector<route>& routes() {
  using k = route_kind;
  static const std::vector<route> all = {
      {"GET", "/", access::anyone, k::dashboard},
      {"GET", "/api/v1/openapi.json", access::anyone, k::openapi},
      {"GET", "/api/v1/whoami", access::token, k::whoami},
      {"POST", "/api/v1/login", access::anyone, k::login},
      {"GET", "/api/v1/jobs", access::public_read, k::list_jobs},
      {"POST", "/api/v1/jobs", access::token, k::submit, body_size::job},
      {"GET", "/api/v1/jobs/{id}", access::public_read, k::show_job},
      {"DELETE", "/api/v1/jobs/{id}", access::token, k::cancel_job},
      {"PATCH", "/api/v1/jobs/{id}", access::token, k::update_job},
      {"POST", "/api/v1/jobs/{id}/hold", access::token, k::control_job, body_size::small, "hold"},
      {"POST", "/api/v1/jobs/{id}/release", access::token, k::control_job, body_size::small, "release"},
      {"POST", "/api/v1/jobs/{id}/suspend", access::token, k::control_job, body_size::small, "suspend"},
      {"POST", "/api/v1/jobs/{id}/resume", access::token, k::control_job, body_size::small, "resume"},
      {"POST", "/api/v1/jobs/{id}/requeue", access::token, k::control_job, body_size::small, "requeue"},
      {"GET", "/api/v1/jobs/{id}/history", access::token, k::job_history},
      {"GET", "/api/v1/jobs/{id}/values", access::token, k::job_values},
      {"GET", "/api/v1/jobs/{id}/values/events", access::token, k::job_values_events},
      {"GET", "/api/v1/nodes", access::public_read, k::nodes},
      {"GET", "/api/v1/partitions", access::public_read, k::partitions},
      {"GET", "/api/v1/partitions/{name}", access::public_read, k::partition},
      {"GET", "/api/v1/cluster/map", access::public_read, k::cluster_map},
      {"GET", "/api/v1/cluster/utilization", access::public_read, k::utilization},
      {"GET", "/api/v1/usage", access::token, k::usage},
      {"GET", "/api/v1/accounts", access::token, k::accounts},
      {"GET", "/api/v1/events", access::public_read, k::events},
      {"GET", "/metrics", access::public_read, k::metrics},
  };
  return all;
}

const route& route_of(route_kind kind, std::string_view action) {
  for (const route& r : routes()) {
    if (r.kind == kind && r.action == action) return r;
  }
  throw std::logic_error("no route declared for this kind");
}

std::string path_of(const route& r, std::int64_t id, std::string_view name) {
  std::string out(r.path);
  if (const auto at = out.find("{id}"); at != std::string::npos) out.replace(at, 4, std::to_string(id));
  if (const auto at = out.find("{name}"); at != std::string::npos) out.replace(at, 6, name);
  return out;
}

namespace {

// Matches "/api/v1/jobs/{id}" against "/api/v1/jobs/42", and
// "/api/v1/partitions/{name}" against "/api/v1/partitions/debug".
bool path_matches(std::string_view pattern, std::string_view path, std::optional<std::int64_t>& id, std::string& name) {
  while (!pattern.empty()) {
    const auto brace = pattern.find('{');
    if (brace == std::string_view::npos) return pattern == path;
    if (path.substr(0, brace) != pattern.substr(0, brace)) return false;
    path.remove_prefix(brace);
    pattern.remove_prefix(brace);
    const auto end = path.find('/');
    const std::string_view segment = path.substr(0, end);
    if (pattern.starts_with("{id}")) {
      pattern.remove_prefix(4);
      std::int64_t v = 0;
      const auto [p, ec] = std::from_chars(segment.data(), segment.data() + segment.size(), v);
      if (segment.empty() || ec != std::errc{} || p != segment.data() + segment.size() || v < 1 ||
          v > protocol::k_max_job_id) {
        return false;
      }
      id = v;
    } else if (pattern.starts_with("{name}")) {
      pattern.remove_prefix(6);
      const bool ok = !segment.empty() && segment.size() <= 64 && std::all_of(segment.begin(), segment.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
      });
      if (!ok) return false;
      name = std::string(segment);
    } else {
      return false;
    }
    path.remove_prefix(segment.size());
  }
  return path.empty();
}

}  // namespace

route_match match_route(std::string_view method, std::string_view path) {
  route_match m;
  for (const route& r : routes()) {
    std::optional<std::int64_t> id;
    std::string name;
    if (!path_matches(r.path, path, id, name)) continue;
    m.path_known = true;
    m.allow += (m.allow.empty() ? "" : ", ") + std::string(r.method);
    if (r.method == method) {
      m.r = &r;
      m.id = id;
      m.name = std::move(name);
    }
  }
  return m;
}

json update_from_rest(const json& body, std::int64_t job) {
  auto bad = [](const std::string& what) { throw protocol::protocol_error(protocol::error_code::bad_request, what); };
  if (!body.is_object()) bad("the body must be a JSON object");
  json c = {{"type", "control"}, {"id", 1}, {"action", "update"}, {"job_ids", json::array({job})}};
  for (const auto& [k, v] : body.items()) {
    if (k == "min_pe" || k == "max_pe") {
      c[k] = v;  // checked as the protocol checks fctl's
    } else if (k == "time_limit") {
      // Slurm's formats as text ("1:00:00", "UNLIMITED"), or seconds.
      if (v.is_number_integer()) {
        c["time_limit_s"] = v;
      } else if (v.is_string()) {
        const std::string t = v.get<std::string>();
        try {
          c["time_limit_s"] = t == "UNLIMITED" || t == "0" ? 0 : core::parse_time_limit(t);
        } catch (const core::usage_error& e) {
          bad(std::string("field 'time_limit': ") + e.what());
        }
      } else {
        bad("field 'time_limit' must be a time (\"1:00:00\") or seconds");
      }
    } else {
      bad("unknown field '" + k + "' (min_pe, max_pe, time_limit)");
    }
  }
  if (c.size() == 4) bad("nothing to change: give min_pe, max_pe or time_limit");
  return c;
}

json job_from_rest(const json& body) {
  auto bad = [](const std::string& what) { throw protocol::protocol_error(protocol::error_code::bad_request, what); };
  if (!body.is_object()) bad("the body must be a JSON object");
  static const std::set<std::string, std::less<>> protocol_fields = {
      "name", "script", "argv", "workdir", "stdout", "stderr", "min_pe", "max_pe", "adaptive",
      "walltime_s", "afterok", "requeue", "submit_token", "umask"};
  json job = json::object();
  for (const auto& [key, value] : body.items()) {
    if (protocol_fields.count(key) != 0) {
      job[key] = value;
    } else if (key != "ntasks" && key != "time" && key != "environment") {
      bad("unknown field '" + key + "' (see /api/v1/openapi.json)");
    }
  }
  if (const auto it = body.find("ntasks"); it != body.end() && !it->is_null()) {
    if (body.contains("min_pe") || body.contains("max_pe")) bad("field 'ntasks' goes without min_pe and max_pe");
    job["min_pe"] = *it;
    job["max_pe"] = *it;
  }
  if (!job.contains("min_pe") && !job.contains("max_pe")) {
    job["min_pe"] = 1;
    job["max_pe"] = 1;
  } else if (!job.contains("max_pe")) {
    job["max_pe"] = job["min_pe"];
  } else if (!job.contains("min_pe")) {
    job["min_pe"] = job["max_pe"];
  }
  if (const auto it = body.find("time"); it != body.end() && !it->is_null()) {
    if (body.contains("walltime_s")) bad("field 'time' goes without walltime_s");
    if (!it->is_string()) bad("field 'time' must be a string such as \"10\", \"1:30:00\" or \"2-00:00:00\"");
    try {
      const std::int64_t s = core::parse_time_limit(it->get<std::string>());
      if (s > 0) job["walltime_s"] = s;
    } catch (const core::usage_error& e) {
      bad(std::string("field 'time': ") + e.what());
    }
  }
  if (const auto it = body.find("environment"); it != body.end() && !it->is_null()) {
    if (it->is_object()) {
      json env = json::array();
      for (const auto& [k, v] : it->items()) {
        if (!v.is_string()) bad("field 'environment." + k + "' must be a string");
        env.push_back(k + "=" + v.get<std::string>());
      }
      job["environment"] = std::move(env);
    } else {
      job["environment"] = *it;
    }
  }
  return job;
}

json partitions_json(const protocol::list_nodes_reply& r, const std::optional<std::string>& only) {
  std::vector<protocol::partition_info> parts = r.partitions;
  const bool implicit = parts.empty();
  if (implicit) {
    protocol::partition_info p;
    p.name = std::string(core::k_implicit_partition);
    p.is_default = true;
    p.nodes = "ALL";
    p.jobs_pending = r.jobs_pending;
    p.jobs_running = r.jobs_running;
    parts.push_back(std::move(p));
  }
  auto limit = [](std::int64_t v) { return v == 0 ? json(nullptr) : json(v); };
  json out = json::array();
  for (const auto& p : parts) {
    if (only && p.name != *only) continue;
    std::vector<std::string> names;
    std::int64_t total = 0, alloc = 0, free = 0, up = 0, drain = 0, down = 0;
    for (const auto& n : r.nodes) {
      if (!implicit && std::find(n.partitions.begin(), n.partitions.end(), p.name) == n.partitions.end()) continue;
      names.push_back(n.name);
      total += n.nprocs;
      alloc += n.alloc;
      switch (n.state) {
        case protocol::node_state::up:
          ++up;
          free += std::max<std::int64_t>(0, n.nprocs - n.alloc);
          break;
        case protocol::node_state::drain: ++drain; break;
        case protocol::node_state::down: ++down; break;
      }
    }
    std::sort(names.begin(), names.end(), core::host_order);
    out.push_back({{"name", p.name},
                   {"state", p.state},
                   {"default", p.is_default},
                   {"nodes", p.nodes},
                   {"node_list", core::compress_hostlist(names)},
                   {"node_names", names},
                   {"node_count", static_cast<std::int64_t>(names.size())},
                   {"node_states", {{"UP", up}, {"DRAIN", drain}, {"DOWN", down}}},
                   {"cpus", {{"total", total}, {"alloc", alloc}, {"free", free}}},
                   {"limits",
                    {{"max_time_s", limit(p.max_time_s)},
                     {"default_time_s", limit(p.default_time_s)},
                     {"max_nodes", limit(p.max_nodes)},
                     {"max_cpus_per_job", limit(p.max_cpus_per_job)}}},
                   {"jobs", {{"pending", p.jobs_pending}, {"running", p.jobs_running}}}});
  }
  if (!only) return json{{"partitions", std::move(out)}};
  if (out.empty()) {
    std::string known;
    for (const auto& p : parts) known += (known.empty() ? "" : ", ") + p.name;
    throw protocol::protocol_error(protocol::error_code::not_found,
                                   "no partition '" + *only + "' (partitions: " + known + ")");
  }
  return out.at(0);
}

unsigned status_of(protocol::error_code code) {
  using protocol::error_code;
  switch (code) {
    case error_code::bad_request: return 400;
    case error_code::unknown_type: return 400;
    case error_code::unsupported_version: return 400;
    case error_code::unauthorized: return 401;
    case error_code::permission_denied: return 403;
    case error_code::not_found: return 404;
    case error_code::invalid_state: return 409;
    case error_code::too_large: return 413;
    case error_code::internal: return 500;
  }
  return 500;
}

std::string error_body(std::string_view message) {
  return json{{"error", protocol::utf8_safe(message, protocol::k_max_text)}}.dump() + "\n";
}

std::string cluster_map_json(const daemon::cluster_snapshot& s) {
  json nodes = json::array();
  for (const auto& n : s.nodes) {
    json holders = json::array();
    for (std::int64_t h : n.holder) holders.push_back(h == 0 ? json(nullptr) : json(h));
    json reserved = json::array();
    for (std::size_t i = 0; i < n.reserved.size(); ++i) {
      if (n.reserved[i]) reserved.push_back(n.first_proc + static_cast<std::int64_t>(i));
    }
    nodes.push_back({{"name", n.name},
                     {"state", n.state},
                     {"first_proc", n.first_proc},
                     {"nprocs", n.nprocs},
                     {"connected", n.connected},
                     {"processors", std::move(holders)},
                     {"reserved", std::move(reserved)}});
  }
  json jobs = json::array();
  for (const auto& j : s.jobs) {
    json o = {{"id", j.id},           {"user", j.user},     {"state", core::to_string(j.state)},
              {"adaptive", j.adaptive}, {"min_pe", j.min_pe}, {"max_pe", j.max_pe},
              {"procs", j.procs}};
    if (!j.target.empty()) o["target"] = j.target;
    jobs.push_back(std::move(o));
  }
  json out = {{"nodes", std::move(nodes)},
              {"jobs", std::move(jobs)},
              {"counts",
               {{"PENDING", s.jobs_pending},
                {"RUNNING", s.jobs_running},
                {"RESIZING", s.jobs_resizing},
                {"SUSPENDED", s.jobs_suspended}}},
              {"cpus",
               {{"total", s.cpus_total},
                {"alloc", s.cpus_alloc},
                {"idle", s.cpus_idle},
                {"reserved", s.cpus_reserved},
                {"unavailable", s.cpus_unavailable}}},
              {"time", s.taken_at}};
  return out.dump() + "\n";
}

std::string change_json(const daemon::job_change& c) {
  json o = {{"job_id", c.job_id}, {"state", core::to_string(c.state)}, {"procs", c.procs}, {"time", c.time}};
  if (!c.target.empty()) o["target"] = c.target;
  if (c.exit_code) o["exit_code"] = *c.exit_code;
  if (c.signal) o["signal"] = *c.signal;
  return o.dump();
}

json resize_phases(std::string_view reason) {
  static constexpr std::string_view head = "resize acknowledged: map ";
  if (!reason.starts_with(head)) return nullptr;
  json out = json::object();
  std::string_view rest = reason.substr(head.size());
  std::int64_t map = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), map);
  if (ec != std::errc{}) return nullptr;
  out["map"] = map;
  rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
  // ", <words> <number> ms[ <words>]" parts, in the order the daemon's resize_manager writes them.
  static const std::pair<std::string_view, std::string_view> parts[] = {
      {"delivered in ", "delivered_ms"}, {"waited ", "wait_ms"}, {"spawn ", "spawn_ms"},
      {"data ", "data_ms"},              {"total ", "total_ms"}};
  while (rest.starts_with(", ")) {
    rest.remove_prefix(2);
    bool matched = false;
    for (const auto& [prefix, key] : parts) {
      if (!rest.starts_with(prefix)) continue;
      std::string_view num = rest.substr(prefix.size());
      const auto stop = num.find(" ms");
      if (stop == std::string_view::npos) return out;
      try {
        out[std::string(key)] = std::stod(std::string(num.substr(0, stop)));
      } catch (const std::exception&) {
        return out;
      }
      matched = true;
      break;
    }
    const auto next = rest.find(", ");
    if (!matched || next == std::string_view::npos) break;
    rest.remove_prefix(next);
  }
  return out;
}

json history_json(json history) {
  if (!history.contains("events") || !history["events"].is_array()) return history;
  auto ones = [](const json& e, const char* key) {
    const std::string procs = e.contains(key) && e[key].is_string() ? e[key].get<std::string>() : std::string();
    return static_cast<std::int64_t>(std::count(procs.begin(), procs.end(), '1'));
  };
  // The processors of the event before: an update (a claim of a map, a new
  // range, a hold: the state stays and the store keeps no map with it) has
  // the job's as they were, not none.
  std::int64_t nprocs = 0, held = 0;
  for (auto& e : history["events"]) {
    const std::string from = e.contains("old_state") && e["old_state"].is_string() ? e["old_state"].get<std::string>() : "";
    const std::string to = e.value("new_state", std::string());
    const bool update = !from.empty() && from == to && ones(e, "new_procs") == 0;
    if (update) {
      e["update"] = true;
    } else {
      nprocs = ones(e, "new_procs");
      // RESIZING: the map sent; the job holds its old one until it applies it.
      held = to == "RESIZING" ? ones(e, "old_procs") : nprocs;
    }
    e["nprocs"] = nprocs;
    e["held"] = held;
    json r = resize_phases(e.value("reason", std::string()));
    if (!r.is_null()) e["resize"] = std::move(r);
  }
  return history;
}

namespace {
json point_json(const daemon::value_point& p) {
  // Milliseconds are enough for a chart, and keep the text short.
  return json::array({std::round(p.time * 1000.0) / 1000.0, p.value});
}
}  // namespace

json values_json(const daemon::job_values& v, const daemon::telemetry_limits& limits) {
  json series = json::object();
  for (const auto& s : v.series) {
    json points = json::array();
    for (const auto& p : s.points) points.push_back(point_json(p));
    series[s.name] = {{"total", s.total}, {"points", std::move(points)}};
  }
  return {{"job_id", v.job_id},
          {"ended", v.ended},
          {"accepted", v.accepted},
          {"dropped", v.dropped},
          {"limits",
           {{"max_series", limits.max_series},
            {"max_points", limits.max_points},
            {"rate", limits.rate},
            {"burst", limits.burst}}},
          {"series", std::move(series)}};
}

json latest_values_json(const daemon::job_values& v) {
  json out = json::object();
  for (const auto& s : v.series) {
    if (s.points.empty()) continue;
    const auto& p = s.points.back();
    out[s.name] = {{"value", p.value}, {"time", std::round(p.time * 1000.0) / 1000.0}, {"total", s.total}};
  }
  return out;
}

std::string values_event_json(std::int64_t job, const std::vector<std::pair<std::string, daemon::value_point>>& kept) {
  json points = json::object();
  for (const auto& [name, p] : kept) {
    if (!points.contains(name)) points[name] = json::array();
    points[name].push_back(point_json(p));
  }
  return json{{"job_id", job}, {"points", std::move(points)}}.dump();
}

utilization_sample sample_of(const daemon::cluster_snapshot& s) {
  return {s.taken_at, s.cpus_alloc, s.cpus_reserved, s.cpus_total, s.cpus_unavailable};
}

std::string utilization_json(const std::vector<utilization_sample>& samples, double since, double interval_s) {
  std::string out = "{\"interval_s\":" + json(interval_s).dump() +
                    ",\"columns\":[\"time\",\"alloc\",\"reserved\",\"total\",\"unavailable\"],\"samples\":[";
  bool first = true;
  for (const auto& x : samples) {
    if (x.time < since) continue;
    out += first ? "[" : ",[";
    first = false;
    out += json(std::round(x.time * 1000.0) / 1000.0).dump() + "," + std::to_string(x.alloc) + "," +
           std::to_string(x.reserved) + "," + std::to_string(x.total) + "," + std::to_string(x.unavailable) + "]";
  }
  return out + "]}\n";
}

std::vector<std::pair<std::string, std::string>> parse_query(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  auto decode = [](std::string_view s) {
    std::string r;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '+') {
        r += ' ';
      } else if (s[i] == '%') {
        unsigned v = 0;
        if (i + 2 >= s.size() || std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16).ptr != s.data() + i + 3) {
          throw protocol::protocol_error(protocol::error_code::bad_request, "malformed %-escape in the query string");
        }
        r += static_cast<char>(v);
        i += 2;
      } else {
        r += s[i];
      }
    }
    return r;
  };
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty()) continue;
    const auto eq = part.find('=');
    out.emplace_back(decode(part.substr(0, eq)), eq == std::string_view::npos ? "" : decode(part.substr(eq + 1)));
  }
  return out;
}

}  // namespace aqs::http
