// The HTTP API's routes, held against its OpenAPI document both ways, and the
// pure translations: REST submit bodies, statuses, query strings.
#include <doctest/doctest.h>

#include <regex>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "http/http_server.hpp"
#include "http/rest.hpp"
#include "protocol/messages.hpp"

using namespace aqs;
using nlohmann::json;

TEST_CASE("every route the server answers is in the OpenAPI document, and every documented operation is served") {
  const json doc = json::parse(http::openapi_document());
  CHECK(doc.at("openapi").get<std::string>().starts_with("3."));
  std::set<std::pair<std::string, std::string>> documented;
  for (const auto& [path, item] : doc.at("paths").items()) {
    for (const auto& [method, op] : item.items()) {
      if (method == "parameters") continue;
      std::string upper = method;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      documented.emplace(upper, path);
    }
  }
  std::set<std::pair<std::string, std::string>> served;
  for (const auto& r : http::routes()) served.emplace(std::string(r.method), std::string(r.path));
  CHECK(documented == served);
  // Public routes say so (security: [] or an empty alternative); the others need the bearer scheme.
  for (const auto& r : http::routes()) {
    const json& op = doc.at("paths").at(std::string(r.path)).at([&] {
      std::string m(r.method);
      for (char& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return m;
    }());
    CAPTURE(r.path);
    const json security = op.value("security", doc.at("security"));
    const bool allows_none = security.empty() || std::any_of(security.begin(), security.end(), [](const json& s) { return s.empty(); });
    CHECK(allows_none == (r.who != http::access::token));
  }
}

TEST_CASE("routes match their paths and ids, and a known path with another method is told apart") {
  auto m = http::match_route("GET", "/api/v1/jobs/42");
  REQUIRE(m.r != nullptr);
  CHECK(m.r->path == "/api/v1/jobs/{id}");
  CHECK(m.id == 42);
  m = http::match_route("DELETE", "/api/v1/jobs/7");
  REQUIRE(m.r != nullptr);
  CHECK(m.r->method == "DELETE");
  m = http::match_route("GET", "/api/v1/jobs/7/history");
  REQUIRE(m.r != nullptr);
  CHECK(m.id == 7);
  m = http::match_route("PUT", "/api/v1/jobs/7");
  CHECK(m.r == nullptr);
  CHECK(m.path_known);
  CHECK(m.allow == "GET, DELETE, PATCH");
  for (const char* bad : {"/api/v1/jobs/x", "/api/v1/jobs/0", "/api/v1/jobs/-1", "/api/v1/jobs/42/", "/api/v2/jobs",
                          "/api/v1/jobs/99999999999999999999", "//", "/index.html"}) {
    CAPTURE(bad);
    CHECK_FALSE(http::match_route("GET", bad).path_known);
  }
}

TEST_CASE("every declared route is reached by its own path, once, and each kind of handler is declared") {
  std::set<std::pair<std::string, std::string>> seen;
  std::set<http::route_kind> kinds;
  for (const auto& r : http::routes()) {
    CAPTURE(r.method);
    CAPTURE(r.path);
    CHECK(seen.emplace(std::string(r.method), std::string(r.path)).second);  // declared once
    kinds.insert(r.kind);
    const auto m = http::match_route(r.method, http::path_of(r, 42, "debug"));
    REQUIRE(m.r == &r);
    if (r.path.find("{id}") != std::string_view::npos) CHECK(m.id == 42);
    if (r.path.find("{name}") != std::string_view::npos) CHECK(m.name == "debug");
    // route_of finds each declaration by what it does.
    CHECK(&http::route_of(r.kind, r.action) == &r);
    // Only a submission takes a job's body; fctl's actions name their action.
    CHECK((r.body == http::body_size::job) == (r.kind == http::route_kind::submit));
    CHECK(r.action.empty() == (r.kind != http::route_kind::control_job));
    if (!r.action.empty()) CHECK(r.path.ends_with(r.action));
  }
  CHECK(kinds.size() == static_cast<std::size_t>(http::route_kind::metrics) + 1);
  CHECK(http::path_of(http::route_of(http::route_kind::show_job), 7) == "/api/v1/jobs/7");
  CHECK_THROWS_AS(http::route_of(http::route_kind::control_job, "explode"), std::logic_error);
}

TEST_CASE("an undeclared route is no path (404), and a declared path with another method lists the declared ones (405)") {
  for (const char* bad : {"/api/v1", "/api/v1/", "/api/v1/job", "/api/v1/jobs/1/cancel", "/metrics/", "/api/v1/cluster"}) {
    CAPTURE(bad);
    CHECK_FALSE(http::match_route("GET", bad).path_known);
  }
  // For every declared path, a method it does not take: 405 with exactly the declared methods.
  for (const auto& r : http::routes()) {
    const std::string path = http::path_of(r, 1, "main");
    std::string declared;
    for (const auto& other : http::routes()) {
      if (http::path_of(other, 1, "main") == path) declared += (declared.empty() ? "" : ", ") + std::string(other.method);
    }
    const auto m = http::match_route("PUT", path);
    CAPTURE(path);
    CHECK(m.r == nullptr);
    CHECK(m.path_known);
    CHECK(m.allow == declared);
  }
}

TEST_CASE("a REST submit body becomes the protocol's job, validated by the protocol") {
  const json body = {{"name", "heat"},
                     {"script", "#!/bin/sh\nhostname\n"},
                     {"workdir", "/tmp"},
                     {"ntasks", 4},
                     {"time", "1:30:00"},
                     {"environment", {{"A", "1"}, {"B", "x=y"}}}};
  const json job = http::job_from_rest(body);
  CHECK(job.at("min_pe") == 4);
  CHECK(job.at("max_pe") == 4);
  CHECK(job.at("walltime_s") == 5400);
  CHECK(job.at("environment") == json::array({"A=1", "B=x=y"}));
  const auto m = protocol::parse_message(json{{"type", "submit"}, {"id", 1}, {"job", job}});
  const auto& s = std::get<protocol::submit>(m);
  CHECK(s.job.name == "heat");
  CHECK(s.job.min_pe == 4);

  const json adaptive = http::job_from_rest({{"name", "a"}, {"argv", {"x"}}, {"workdir", "/"}, {"min_pe", 2}, {"max_pe", 8}, {"adaptive", true}});
  CHECK(adaptive.at("min_pe") == 2);
  CHECK(adaptive.at("max_pe") == 8);
  CHECK(http::job_from_rest({{"name", "a"}, {"argv", {"x"}}, {"workdir", "/"}}).at("max_pe") == 1);
}

TEST_CASE("a REST submit body with an unknown field, conflicting sizes or a bad time is refused naming it") {
  auto refusal = [](const json& body) -> std::string {
    try {
      const json job = http::job_from_rest(body);
      (void)protocol::parse_message(json{{"type", "submit"}, {"id", 1}, {"job", job}});
    } catch (const protocol::protocol_error& e) {
      return e.what();
    }
    return "";
  };
  CHECK(refusal({{"name", "a"}, {"workdir", "/"}, {"argv", {"x"}}, {"ntask", 4}}).find("ntask") != std::string::npos);
  CHECK(refusal({{"name", "a"}, {"workdir", "/"}, {"argv", {"x"}}, {"ntasks", 4}, {"min_pe", 2}}).find("ntasks") != std::string::npos);
  CHECK(refusal({{"name", "a"}, {"workdir", "/"}, {"argv", {"x"}}, {"time", "soon"}}).find("time") != std::string::npos);
  CHECK(refusal({{"name", "a"}, {"workdir", "relative"}, {"argv", {"x"}}}).find("workdir") != std::string::npos);
  CHECK(refusal({{"name", "a"}, {"workdir", "/"}, {"argv", {"x"}}, {"min_pe", 2}, {"max_pe", 4}}).find("adaptive") != std::string::npos);
  CHECK(refusal({{"name", "a"}, {"workdir", "/"}, {"argv", {"x"}}, {"interactive", true}}).find("interactive") != std::string::npos);
  CHECK(refusal(json::array()) != "");
}

TEST_CASE("protocol error codes map to the HTTP statuses of the API") {
  using protocol::error_code;
  CHECK(http::status_of(error_code::bad_request) == 400);
  CHECK(http::status_of(error_code::unauthorized) == 401);
  CHECK(http::status_of(error_code::permission_denied) == 403);
  CHECK(http::status_of(error_code::not_found) == 404);
  CHECK(http::status_of(error_code::invalid_state) == 409);
  CHECK(http::status_of(error_code::too_large) == 413);
  CHECK(http::status_of(error_code::internal) == 500);
  CHECK(json::parse(http::error_body("no job 4")) == json{{"error", "no job 4"}});
}

TEST_CASE("query strings are split and percent-decoded, and a broken escape is a bad request") {
  const auto q = http::parse_query("state=RUNNING%2CPENDING&user=al+ice&&limit=5&flag");
  REQUIRE(q.size() == 4);
  CHECK(q[0] == std::pair<std::string, std::string>{"state", "RUNNING,PENDING"});
  CHECK(q[1].second == "al ice");
  CHECK(q[3] == std::pair<std::string, std::string>{"flag", ""});
  CHECK_THROWS_AS(http::parse_query("a=%4"), protocol::protocol_error);
  CHECK_THROWS_AS(http::parse_query("a=%zz"), protocol::protocol_error);
}

TEST_CASE("the processor map shows every processor's holder and the live jobs") {
  daemon::cluster_snapshot s;
  daemon::snapshot_node n;
  n.name = "n1";
  n.state = "UP";
  n.first_proc = 0;
  n.nprocs = 4;
  n.holder = {0, 5, 5, 0};
  n.reserved = {false, false, false, true};
  s.nodes.push_back(n);
  daemon::snapshot_job j;
  j.id = 5;
  j.user = "alice";
  j.state = core::job_state::resizing;
  j.adaptive = true;
  j.procs = "0111";
  j.target = "0110";
  s.jobs.push_back(j);
  const json m = json::parse(http::cluster_map_json(s));
  CHECK(m["nodes"][0]["processors"] == json::array({nullptr, 5, 5, nullptr}));
  CHECK(m["nodes"][0]["reserved"] == json::array({3}));
  CHECK(m["jobs"][0]["target"] == "0110");
  CHECK(m["jobs"][0]["state"] == "RESIZING");
}

TEST_CASE("the dashboard page loads nothing from elsewhere: no URL outside aqsd") {
  std::string page(http::dashboard_document());
  CHECK(page.starts_with("<!doctype html>"));
  // The SVG namespace is a name, never fetched: the one URL-looking text allowed.
  for (std::size_t at; (at = page.find("\"http://www.w3.org/2000/svg\"")) != std::string::npos;) page.erase(at, 28);
  for (const char* outside : {"http://", "https://", "src=\"//", "href=\"//", "@import"}) {
    CAPTURE(outside);
    CHECK(page.find(outside) == std::string::npos);
  }
  // It uses the API it is served with: every path it fetches is a declared
  // route ("/api/v1/jobs/" + id taken with an id; POST /api/v1/login too).
  const std::regex fetched(R"re(["'`](/api/v1/[^"'`?]*))re");
  std::size_t paths = 0;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), fetched); it != std::sregex_iterator(); ++it, ++paths) {
    std::string path = (*it)[1];
    if (path.ends_with('/')) path += "1";
    CAPTURE(path);
    const auto m = http::match_route("GET", path);
    CHECK((m.r != nullptr || http::match_route("POST", path).r != nullptr));
  }
  CHECK(paths >= 5);
  CHECK(page.find(http::route_of(http::route_kind::cluster_map).path) != std::string::npos);
  CHECK(page.find(http::route_of(http::route_kind::events).path) != std::string::npos);
}

TEST_CASE("an acknowledged resize's reason gives its phases, and the history counts each event's processors") {
  const json r = http::resize_phases(
      "resize acknowledged: map 3, delivered in 1.2 ms, waited 40.0 ms for MPI_Migrate, spawn 0.0 ms, data 3.1 ms, "
      "total 44.3 ms");
  CHECK(r == json{{"map", 3}, {"delivered_ms", 1.2}, {"wait_ms", 40.0}, {"spawn_ms", 0.0}, {"data_ms", 3.1},
                  {"total_ms", 44.3}});
  CHECK(http::resize_phases("resize acknowledged: map 2, total 5.0 ms") == json{{"map", 2}, {"total_ms", 5.0}});
  CHECK(http::resize_phases("resize to 4 processors").is_null());
  CHECK(http::resize_phases("resize acknowledged: map x").is_null());

  json h = {{"job", {{"id", 7}}},
            {"events",
             {{{"new_state", "RUNNING"}, {"new_procs", "11110000"}, {"reason", "started"}},
              {{"new_state", "RESIZING"}, {"new_procs", "11110000"}, {"reason", "resize to 2 processors"}},
              {{"new_state", "RUNNING"}, {"new_procs", "11"}, {"reason", "resize acknowledged: map 1, total 2.5 ms"}},
              {{"new_state", "COMPLETED"}, {"new_procs", ""}, {"reason", ""}}}}};
  const json out = http::history_json(h);
  CHECK(out["events"][0]["nprocs"] == 4);
  CHECK(out["events"][2]["nprocs"] == 2);
  CHECK(out["events"][3]["nprocs"] == 0);
  CHECK_FALSE(out["events"][1].contains("resize"));
  CHECK(out["events"][2]["resize"] == json{{"map", 1}, {"total_ms", 2.5}});
}

TEST_CASE("a claim and other updates during a resize are no new resize, and show the processors the job has then") {
  // What the store writes for a resize of 16 to 8 that the job claims
  // (resize_begin) before applying it: the claim is an update of the
  // RESIZING job (old and new state the same), with no map of its own.
  json h = {{"job", {{"id", 9}}},
            {"events",
             {{{"old_state", "PENDING"}, {"new_state", "RUNNING"}, {"new_procs", std::string(16, '1')}, {"reason", "started"}},
              {{"old_state", "RUNNING"}, {"new_state", "RESIZING"}, {"old_procs", std::string(16, '1')},
               {"new_procs", std::string(8, '1')}, {"reason", "resize to 8 processors"}},
              {{"old_state", "RESIZING"}, {"new_state", "RESIZING"}, {"reason", "map 1 claimed by the job: applying it"}},
              {{"old_state", "RESIZING"}, {"new_state", "RUNNING"}, {"old_procs", std::string(16, '1')},
               {"new_procs", std::string(8, '1')}, {"reason", "resize acknowledged: map 1, total 2.5 ms"}},
              {{"old_state", "RUNNING"}, {"new_state", "RUNNING"}, {"reason", "range 2..16"}},
              {{"old_state", "RUNNING"}, {"new_state", "COMPLETED"}, {"old_procs", std::string(8, '1')}, {"reason", ""}}}}};
  const json out = http::history_json(h);
  const auto& ev = out["events"];
  CHECK(ev[1]["nprocs"] == 8);
  CHECK(ev[1]["held"] == 16);  // the job keeps its 16 until it applies the map
  CHECK_FALSE(ev[1].value("update", false));
  // The claim: the map out (8), not 0; the job still holds its 16.
  CHECK(ev[2]["update"] == true);
  CHECK(ev[2]["nprocs"] == 8);
  CHECK(ev[2]["held"] == 16);
  CHECK(ev[3]["nprocs"] == 8);
  CHECK(ev[3]["held"] == 8);
  CHECK(ev[4]["update"] == true);
  CHECK(ev[4]["nprocs"] == 8);
  CHECK(ev[5]["nprocs"] == 0);
  CHECK(ev[5]["held"] == 0);
  CHECK_FALSE(ev[5].value("update", false));
}

TEST_CASE("utilisation samples are listed oldest first from `since`, one row per sample") {
  std::vector<http::utilization_sample> s = {{100.0, 2, 0, 8, 0}, {110.5, 6, 2, 8, 0}, {120.25, 8, 0, 8, 4}};
  json u = json::parse(http::utilization_json(s, 0, 10));
  CHECK(u["interval_s"] == 10.0);
  CHECK(u["columns"] == json::array({"time", "alloc", "reserved", "total", "unavailable"}));
  REQUIRE(u["samples"].size() == 3);
  CHECK(u["samples"][1] == json::array({110.5, 6, 2, 8, 0}));
  u = json::parse(http::utilization_json(s, 110, 10));
  REQUIRE(u["samples"].size() == 2);
  CHECK(u["samples"][0][0] == 110.5);
  CHECK(json::parse(http::utilization_json({}, 0, 10))["samples"].empty());
  daemon::cluster_snapshot snap;
  snap.taken_at = 5;
  snap.cpus_alloc = 3;
  snap.cpus_reserved = 1;
  snap.cpus_total = 8;
  snap.cpus_unavailable = 2;
  CHECK(http::sample_of(snap) == http::utilization_sample{5, 3, 1, 8, 2});
}

TEST_CASE("partition routes take a name, and a name that is not one is no path") {
  auto m = http::match_route("GET", "/api/v1/partitions/debug-2.x_y");
  REQUIRE(m.r != nullptr);
  CHECK(m.r->path == "/api/v1/partitions/{name}");
  CHECK(m.name == "debug-2.x_y");
  CHECK(m.r->who == http::access::public_read);
  m = http::match_route("GET", "/api/v1/partitions");
  REQUIRE(m.r != nullptr);
  CHECK(m.name.empty());
  CHECK(http::match_route("DELETE", "/api/v1/partitions/debug").allow == "GET");
  for (const char* bad : {"/api/v1/partitions/", "/api/v1/partitions/a/b", "/api/v1/partitions/a%20b",
                          "/api/v1/partitions/a b"}) {
    CAPTURE(bad);
    CHECK_FALSE(http::match_route("GET", bad).path_known);
  }
}

TEST_CASE("partitions show their nodes, node states, processors, limits and live jobs") {
  protocol::list_nodes_reply r;
  auto node = [](std::string name, protocol::node_state st, std::int64_t n, std::int64_t alloc,
                 std::vector<std::string> parts) {
    protocol::listed_node x;
    x.name = std::move(name);
    x.state = st;
    x.nprocs = n;
    x.alloc = alloc;
    x.partitions = std::move(parts);
    return x;
  };
  r.nodes = {node("node2", protocol::node_state::up, 4, 1, {"debug", "batch"}),
             node("node10", protocol::node_state::up, 8, 0, {"batch"}),
             node("node1", protocol::node_state::drain, 4, 2, {"debug"})};
  r.jobs_pending = 5;
  r.jobs_running = 3;
  SUBCASE("without partitions configured: the implicit one of every node, with the cluster's jobs") {
    const json all = http::partitions_json(r, std::nullopt);
    REQUIRE(all.at("partitions").size() == 1);
    const json& p = all["partitions"][0];
    CHECK(p["name"] == "main");
    CHECK(p["default"] == true);
    CHECK(p["state"] == "UP");
    CHECK(p["node_list"] == "node[1-2,10]");
    CHECK(p["node_count"] == 3);
    CHECK(p["node_states"] == json{{"UP", 2}, {"DRAIN", 1}, {"DOWN", 0}});
    CHECK(p["cpus"] == json{{"total", 16}, {"alloc", 3}, {"free", 11}});
    CHECK(p["limits"]["max_time_s"].is_null());
    CHECK(p["jobs"] == json{{"pending", 5}, {"running", 3}});
    CHECK(http::partitions_json(r, "main") == p);
  }
  SUBCASE("configured: each with its own nodes and counts; an unknown name is not found, listing them") {
    protocol::partition_info debug;
    debug.name = "debug";
    debug.is_default = true;
    debug.nodes = "node[1-2]";
    debug.max_time_s = 1800;
    debug.max_nodes = 1;
    debug.jobs_pending = 2;
    debug.jobs_running = 1;
    protocol::partition_info batch;
    batch.name = "batch";
    batch.state = "DOWN";
    batch.nodes = "ALL";
    r.partitions = {debug, batch};
    const json all = http::partitions_json(r, std::nullopt);
    REQUIRE(all.at("partitions").size() == 2);
    const json& d = all["partitions"][0];
    CHECK(d["name"] == "debug");
    CHECK(d["node_names"] == json::array({"node1", "node2"}));
    CHECK(d["cpus"] == json{{"total", 8}, {"alloc", 3}, {"free", 3}});
    CHECK(d["limits"] == json{{"max_time_s", 1800}, {"default_time_s", nullptr}, {"max_nodes", 1},
                              {"max_cpus_per_job", nullptr}});
    CHECK(d["jobs"] == json{{"pending", 2}, {"running", 1}});
    const json b = http::partitions_json(r, "batch");
    CHECK(b["state"] == "DOWN");
    CHECK(b["default"] == false);
    CHECK(b["node_list"] == "node[2,10]");
    CHECK(b["cpus"]["free"] == 11);
    try {
      (void)http::partitions_json(r, "gpu");
      FAIL("an unknown partition was found");
    } catch (const protocol::protocol_error& e) {
      CHECK(e.code() == protocol::error_code::not_found);
      CHECK(std::string(e.what()) == "no partition 'gpu' (partitions: debug, batch)");
    }
  }
}

TEST_CASE("a job's published values read as series of [time, value], newest values per name, and events by name") {
  daemon::job_values v;
  v.job_id = 7;
  v.accepted = 3;
  v.dropped = 1;
  v.series = {{"ranks", {{100.0, 8}, {130.5, 4}}, 2}, {"residual", {{101.0004, 0.5}}, 9}};
  daemon::telemetry_limits l;
  const json j = http::values_json(v, l);
  CHECK(j["job_id"] == 7);
  CHECK(j["ended"] == false);
  CHECK(j["accepted"] == 3);
  CHECK(j["dropped"] == 1);
  CHECK(j["limits"]["max_points"] == l.max_points);
  CHECK(j["series"]["ranks"]["points"] == json::array({json::array({100.0, 8.0}), json::array({130.5, 4.0})}));
  CHECK(j["series"]["residual"]["total"] == 9);
  CHECK(j["series"]["residual"]["points"][0][0] == 101.0);  // milliseconds are enough
  const json last = http::latest_values_json(v);
  CHECK(last["ranks"]["value"] == 4.0);
  CHECK(last["ranks"]["total"] == 2);
  CHECK(last["residual"]["time"] == 101.0);
  const json ev = json::parse(http::values_event_json(7, {{"a", {1.0, 2.0}}, {"b", {1.0, 3.0}}, {"a", {2.0, 4.0}}}));
  CHECK(ev == json{{"job_id", 7}, {"points", {{"a", {{1.0, 2.0}, {2.0, 4.0}}}, {"b", {{1.0, 3.0}}}}}});
}
