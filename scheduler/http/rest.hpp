// rest: the HTTP API's routes and its pure translations: a REST submit body
// into the protocol's job, protocol error codes into HTTP statuses, and the
// JSON of processor maps and job changes. No I/O (tested alone).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/job_telemetry.hpp"
#include "daemon/observe.hpp"
#include "protocol/errors.hpp"
#include "protocol/replies.hpp"

namespace aqs::http {

// Who may call a route without a bearer token.
enum class access : unsigned char {
  anyone,       // always public (the API's own description)
  public_read,  // with --http-public, else a token is needed
  token,        // always a token
};

// What a route does: each has exactly one handler in http_server.cpp, in a
// switch without default (the compiler holds the handlers to this list).
enum class route_kind : unsigned char {
  dashboard,
  openapi,
  whoami,
  login,  // POST /api/v1/login: a one-time code from ftoken --login (header X-AQS-Login-Code) for a token
  list_jobs,
  submit,
  show_job,
  cancel_job,
  update_job,
  control_job,  // route::action names fctl's action
  job_history,
  job_values,         // GET /api/v1/jobs/{id}/values: what the job published (AQS_Publish, aqs-publish)
  job_values_events,  // GET /api/v1/jobs/{id}/values/events: the same as server-sent events, live
  nodes,
  partitions,
  partition,
  cluster_map,
  utilization,
  usage,     // GET /api/v1/usage: processor-seconds per user and account (accounting)
  accounts,  // GET /api/v1/accounts: the account tree
  events,
  metrics,
};

// How large a body a route takes (with a token; without one, none).
enum class body_size : unsigned char {
  small,  // http_options::max_body
  job,    // http_options::max_submit_body: a job with its script
};

// One route of aqsd's HTTP front, declared once: the router, the 404/405
// answers, the body limits, the OpenAPI document's test and the REST tests
// read this, never a path string of their own.
struct route {
  std::string_view method;  // GET, POST, DELETE, PATCH
  std::string_view path;    // OpenAPI form: "/api/v1/jobs/{id}", "/api/v1/partitions/{name}"
  access who;
  route_kind kind;
  body_size body = body_size::small;
  std::string_view action = {};  // control_job: "hold", "release", ...
};

// Every route the server answers, in the form the OpenAPI document uses
// (tests hold the document and this table to each other).
const std::vector<route>& routes();
// The declared route of this kind (and action, for control_job). Throws
// std::logic_error when none is declared (a programming error).
const route& route_of(route_kind kind, std::string_view action = {});
// `r`'s path with {id} and {name} filled in: "/api/v1/jobs/42".
std::string path_of(const route& r, std::int64_t id = 0, std::string_view name = {});

// The route matching `method` and `target`'s path, with {id} read into
// `id` and {name} (letters, digits, "_", "-", ".") into `name`.
// path_known false: no such path (404); path_known with `r` null: the path
// takes other methods only (405, `allow` lists them: "GET, DELETE").
struct route_match {
  const route* r = nullptr;
  std::optional<std::int64_t> id;
  std::string name;
  bool path_known = false;
  std::string allow;  // "GET, DELETE" when the path exists
};
route_match match_route(std::string_view method, std::string_view path);

// The JSON object of a REST submit (docs/http-api.md) as the protocol's
// "job" object: the fields fsub sends, plus "ntasks" (min = max), "time"
// (Slurm's formats, as fsub -t) and "environment" also as an object. Unknown
// fields are refused (a misspelt "ntask" must not give one processor).
// Throws protocol::protocol_error(bad_request) naming the field; the result
// is validated by the protocol's own parse_message afterwards.
nlohmann::json job_from_rest(const nlohmann::json& body);

// PATCH /api/v1/jobs/{id}'s body ({"min_pe", "max_pe", "time_limit"}) as
// the protocol's control update (fctl update). Throws protocol_error
// bad_request naming the field.
nlohmann::json update_from_rest(const nlohmann::json& body, std::int64_t job);

// GET /api/v1/partitions (`only` unset: {"partitions": [...]}) and
// /api/v1/partitions/{name} (that one's object), from a list_nodes reply:
// each partition with its state, whether it is the default, its nodes (as
// configured and the registered ones by name), their states, processors
// (total, alloc, free: idle on UP nodes), limits (null: unlimited) and live
// jobs (pending, running). Without partitions configured, the implicit one
// ("main", every node). An unknown name throws protocol_error(not_found).
nlohmann::json partitions_json(const protocol::list_nodes_reply& r, const std::optional<std::string>& only);

// The HTTP status of a protocol error code.
unsigned status_of(protocol::error_code code);

// {"error": message}.
std::string error_body(std::string_view message);

// GET /api/v1/cluster/map.
std::string cluster_map_json(const daemon::cluster_snapshot& s);
// One server-sent event's data.
std::string change_json(const daemon::job_change& c);

// GET /api/v1/jobs/{id}/history: the protocol's job_history result with,
// on each event, "nprocs" (processors of new_procs: on a RESIZING event the
// map sent), "held" (the processors the job holds after it: on a RESIZING
// event still its old map's) and, on an update (old and new state the
// same, no map of its own: a claimed map, a new range, a hold), "update":
// true with the "nprocs" and "held" of the event before; on an acknowledged
// resize, "resize": the phases the shim reported, parsed from the event's
// reason ("resize acknowledged: map 3, delivered in 1.2 ms, waited 40.0 ms
// for MPI_Migrate, spawn 0.0 ms, data 3.1 ms, total 44.3 ms") into
// {"map": 3, "delivered_ms": 1.2, "wait_ms": 40.0, "spawn_ms": 0.0,
// "data_ms": 3.1, "total_ms": 44.3} (only the parts present). Other events
// are left as they are.
nlohmann::json history_json(nlohmann::json history);
// The "resize" object of one acknowledged resize's reason, or null.
nlohmann::json resize_phases(std::string_view reason);

// GET /api/v1/jobs/{id}/values: {"job_id", "ended", "accepted", "dropped",
// "limits": {"max_series", "max_points", "rate", "burst"}, "series": {NAME:
// {"total": N, "points": [[t, v], ...]}}} (t in Unix seconds, oldest first).
nlohmann::json values_json(const daemon::job_values& v, const daemon::telemetry_limits& limits);
// The "values" member of GET /api/v1/jobs/{id}: {NAME: {"value": v, "time": t,
// "total": N}} of each series' newest point.
nlohmann::json latest_values_json(const daemon::job_values& v);
// One server-sent event's data of newly published points:
// {"job_id": 7, "points": {NAME: [[t, v], ...]}}.
std::string values_event_json(std::int64_t job, const std::vector<std::pair<std::string, daemon::value_point>>& kept);

// One sample of the cluster's processors (GET /api/v1/cluster/utilization).
struct utilization_sample {
  double time = 0;  // Unix seconds
  std::int64_t alloc = 0, reserved = 0, total = 0, unavailable = 0;
  friend bool operator==(const utilization_sample&, const utilization_sample&) = default;
};
utilization_sample sample_of(const daemon::cluster_snapshot& s);
// {"interval_s": .., "columns": ["time","alloc","reserved","total","unavailable"],
//  "samples": [[t, a, r, T, u], ...]}: the samples at or after `since`, oldest first.
std::string utilization_json(const std::vector<utilization_sample>& samples, double since, double interval_s);

// The query string's parameters ("a=1&b=x%20y"), percent-decoded; a
// malformed escape throws protocol_error(bad_request).
std::vector<std::pair<std::string, std::string>> parse_query(std::string_view query);

}  // namespace aqs::http
