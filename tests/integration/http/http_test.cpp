// http: aqsd --http against a real aqsd and real agents: tokens from ftoken
// run as throwaway unprivileged users, every refusal (no token, expired,
// forged, revoked, another user's job) checked to change nothing, the REST
// views, the event stream, TLS, and a real Prometheus scraping /metrics.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <pwd.h>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "e2e.hpp"
#include "http/rest.hpp"
#include "http_client.hpp"
#include "protocol/base64.hpp"
#include "temp_dir.hpp"

using nlohmann::json;
using test::http_request;

namespace {

constexpr const char* k_alice = "aqshttp-alice";
constexpr const char* k_bob = "aqshttp-bob";

struct issued {
  std::string token;
  std::string id;
};

struct setup {
  test::test_database db;
  std::unique_ptr<test::cluster> c;
  test::test_user alice, bob;
  test::http_target web;

  explicit setup(std::vector<std::string> http_args = {"--http", "127.0.0.1:0"}, int nodes = 2) {
    auto o = test::nodes_of(db, nodes, 4);
    o.aqsd_args = std::move(http_args);
    c = std::make_unique<test::cluster>(o);
    alice = c->user(k_alice);
    bob = c->user(k_bob);
    read_port();
    c->wait_nodes_up(nodes);
  }
  // Port 0 picks a free port (again at each start of aqsd).
  void read_port() { web.port = c->http_port(); }

  // ftoken as `u` (root when null): the token on the last line, its id on the first.
  issued token(const test::test_user* u, std::vector<std::string> args = {}) {
    const auto r = c->cmd(AQS_FTOKEN_BINARY, std::move(args), u);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    issued t;
    t.token = test::last_line(r.out);
    const auto first = r.out.substr(0, r.out.find('\n'));
    REQUIRE(first.starts_with("token "));
    t.id = first.substr(6, first.find(' ', 6) - 6);
    return t;
  }
  test::http_reply get(const std::string& target, const std::optional<std::string>& token) {
    return http_request(web, "GET", target, token);
  }
  // GET /api/v1/partitions (200 required): its list of partitions.
  json partitions(const std::optional<std::string>& token) {
    const auto r = get("/api/v1/partitions", token);
    REQUIRE_MESSAGE(r.status == 200, r.body);
    return r.json().at("partitions");
  }
  // A job of `u`'s submitted over REST that runs until cancelled.
  std::int64_t rest_job(const test::test_user& u, const std::string& token, const std::string& name = "sleeper") {
    const json body = {{"name", name},
                       {"script", "#!/bin/sh\nsleep 300\n"},
                       {"workdir", u.home.string()},
                       {"ntasks", 1},
                       {"time", "10"}};
    const auto r = http_request(web, "POST", "/api/v1/jobs", token, body.dump());
    REQUIRE_MESSAGE(r.status == 201, r.body);
    CHECK(r.headers.at("Location") == "/api/v1/jobs/" + std::to_string(r.json().at("job_id").get<std::int64_t>()));
    return r.json().at("job_id").get<std::int64_t>();
  }
};

// The token with its payload's uid replaced, keeping the signature.
std::string with_uid(const std::string& token, std::int64_t uid) {
  const auto dot1 = token.find('.');
  const auto dot2 = token.rfind('.');
  std::string b64 = token.substr(dot1 + 1, dot2 - dot1 - 1);
  for (char& ch : b64) {
    if (ch == '-') ch = '+';
    if (ch == '_') ch = '/';
  }
  while (b64.size() % 4 != 0) b64 += '=';
  json payload = json::parse(*protocol::base64_decode(b64));
  payload["uid"] = uid;
  payload["user"] = "root";
  std::string enc = protocol::base64_encode(payload.dump());
  while (!enc.empty() && enc.back() == '=') enc.pop_back();
  for (char& ch : enc) {
    if (ch == '+') ch = '-';
    if (ch == '/') ch = '_';
  }
  return token.substr(0, dot1 + 1) + enc + token.substr(dot2);
}

unsigned short free_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

}  // namespace

TEST_CASE("without a token the API answers 401 with a JSON error, except its OpenAPI document") {
  setup s;
  const auto doc = s.get("/api/v1/openapi.json", std::nullopt);
  CHECK(doc.status == 200);
  CHECK(doc.json().at("openapi").get<std::string>().starts_with("3."));
  // Every declared route that is not public to anyone (rest.cpp routes()).
  for (const auto& r : http::routes()) {
    if (r.who == http::access::anyone) continue;
    const std::string method(r.method), target = http::path_of(r, 1, "main");
    CAPTURE(method);
    CAPTURE(target);
    const auto res = http_request(s.web, method, target, std::nullopt, method == "POST" ? "{}" : "");
    CHECK(res.status == 401);
    CHECK_FALSE(res.error().empty());
    CHECK(res.headers.count("WWW-Authenticate") == 1);
  }
  CHECK(s.get("/nothing", std::nullopt).status == 404);
  const auto r = http_request(s.web, "PUT", "/api/v1/jobs", std::nullopt);
  CHECK(r.status == 405);
  CHECK(r.headers.at("Allow") == "GET, POST");

  // With a token, every declared route reaches its own handler: never the
  // router's 404 or 405 (the event streams, which stay open, have their own
  // cases: here and in integration_values).
  const auto alice = s.token(&s.alice);
  const std::int64_t job = s.rest_job(s.alice, alice.token);
  for (const auto& route : http::routes()) {
    if (route.kind == http::route_kind::events || route.kind == http::route_kind::job_values_events) continue;
    const std::string method(route.method), target = http::path_of(route, job, "main");
    CAPTURE(method);
    CAPTURE(target);
    const std::string body = route.kind == http::route_kind::update_job ? R"({"time_limit": "5"})"
                              : method == "POST" || method == "PATCH"   ? "{}"
                                                                        : "";
    const auto res = http_request(s.web, method, target, alice.token, body);
    CHECK(res.status != 405);
    CHECK_FALSE(res.error().starts_with("no such resource"));
    CHECK(res.status != 401);
  }
}

TEST_CASE("an expired, forged or revoked token is refused with 401 and changes nothing") {
  setup s;
  const issued good = s.token(&s.alice);
  const std::int64_t job = s.rest_job(s.alice, good.token);
  s.c->wait_state(job, {job_state::running});

  // Expired: a one-second token, tried until it has run out.
  const issued brief = s.token(&s.alice, {"--lifespan", "1"});
  test::http_reply r;
  for (int i = 0; i < 100; ++i) {
    r = s.get("/api/v1/whoami", brief.token);
    if (r.status != 200) break;
    std::this_thread::sleep_for(100ms);
  }
  CHECK(r.status == 401);
  CHECK(r.error() == "token expired");
  CHECK(http_request(s.web, "DELETE", "/api/v1/jobs/" + std::to_string(job), brief.token).status == 401);

  // Forged: alice's token claiming root, and a token with a made-up signature.
  const std::string as_root = with_uid(good.token, 0);
  r = http_request(s.web, "DELETE", "/api/v1/jobs/" + std::to_string(job), as_root);
  CHECK(r.status == 401);
  CHECK(r.error() == "bad token signature");
  CHECK(s.get("/api/v1/jobs", good.token.substr(0, good.token.rfind('.') + 1) + std::string(64, 'a')).status == 401);
  CHECK(s.get("/api/v1/jobs", std::string("not-a-token")).status == 401);

  // Revoked by id, then every other token of the user.
  const issued spare = s.token(&s.alice);
  const issued doomed = s.token(&s.alice);
  CHECK(s.get("/api/v1/whoami", doomed.token).status == 200);
  const auto rv = s.c->cmd(AQS_FTOKEN_BINARY, {"--revoke", doomed.id}, &s.alice);
  REQUIRE_MESSAGE(rv.status == 0, rv.err);
  r = http_request(s.web, "DELETE", "/api/v1/jobs/" + std::to_string(job), doomed.token);
  CHECK(r.status == 401);
  CHECK(r.error() == "token revoked");
  CHECK(s.get("/api/v1/whoami", spare.token).status == 200);
  REQUIRE(s.c->cmd(AQS_FTOKEN_BINARY, {"--revoke-all"}, &s.alice).status == 0);
  CHECK(s.get("/api/v1/whoami", spare.token).status == 401);
  CHECK(s.get("/api/v1/whoami", good.token).status == 401);
  CHECK(s.get("/api/v1/whoami", s.token(&s.alice).token).status == 200);  // a new one works

  // Revocations survive a restart of aqsd.
  s.c->stop_aqsd();
  s.c->start_aqsd();
  s.read_port();
  CHECK(s.get("/api/v1/whoami", spare.token).status == 401);

  // Nothing of the above touched the job.
  CHECK(s.c->job(job)->state == job_state::running);
}

TEST_CASE("a token acts as its user: their own job is submitted, read and cancelled; another user's is 403 and unchanged") {
  setup s;
  const issued alice = s.token(&s.alice);
  const issued bob = s.token(&s.bob);
  const std::int64_t job = s.rest_job(s.alice, alice.token, "alices");
  s.c->wait_state(job, {job_state::running});

  auto r = s.get("/api/v1/jobs/" + std::to_string(job), bob.token);  // the queue is public to users, as fjobs
  REQUIRE(r.status == 200);
  CHECK(r.json().at("user") == k_alice);
  CHECK(r.json().at("name") == "alices");
  CHECK(r.json().at("state") == "RUNNING");

  r = http_request(s.web, "DELETE", "/api/v1/jobs/" + std::to_string(job), bob.token);
  CHECK(r.status == 403);
  CHECK(r.error().find("belongs to " + std::string(k_alice)) != std::string::npos);
  CHECK(s.get("/api/v1/jobs/" + std::to_string(job) + "/history", bob.token).status == 403);
  CHECK(s.c->job(job)->state == job_state::running);

  r = s.get("/api/v1/jobs/" + std::to_string(job) + "/history", alice.token);
  CHECK(r.status == 200);
  CHECK(r.json().at("events").size() >= 2);
  // fctl's actions: another user's token changes nothing (403); the owner's
  // suspends and resumes the job, and a bad update is 400.
  for (const char* action : {"suspend", "hold", "requeue"}) {
    r = http_request(s.web, "POST", "/api/v1/jobs/" + std::to_string(job) + "/" + action, bob.token);
    CHECK(r.status == 403);
  }
  r = http_request(s.web, "PATCH", "/api/v1/jobs/" + std::to_string(job), bob.token, json{{"time_limit", 60}}.dump());
  CHECK(r.status == 403);
  CHECK(s.c->job(job)->state == job_state::running);
  r = http_request(s.web, "POST", "/api/v1/jobs/" + std::to_string(job) + "/suspend", alice.token);
  CHECK(r.status == 200);
  CHECK(r.json().at("done") == json::array({job}));
  s.c->wait_state(job, {job_state::suspended});
  r = http_request(s.web, "POST", "/api/v1/jobs/" + std::to_string(job) + "/hold", alice.token);
  CHECK(r.status == 409);
  CHECK(r.error().find("is not pending") != std::string::npos);
  r = http_request(s.web, "POST", "/api/v1/jobs/" + std::to_string(job) + "/resume", alice.token);
  CHECK(r.status == 200);
  s.c->wait_state(job, {job_state::running});
  r = http_request(s.web, "PATCH", "/api/v1/jobs/" + std::to_string(job), alice.token, json{{"max_pe", 0}}.dump());
  CHECK(r.status == 400);
  r = http_request(s.web, "PATCH", "/api/v1/jobs/" + std::to_string(job), alice.token, json{{"colour", 1}}.dump());
  CHECK(r.status == 400);
  CHECK(r.error().find("unknown field 'colour'") != std::string::npos);
  r = http_request(s.web, "PATCH", "/api/v1/jobs/" + std::to_string(job), alice.token, json{{"time_limit", 60}}.dump());
  CHECK(r.status == 409);  // it has started
  CHECK(http_request(s.web, "POST", "/api/v1/jobs/999999/hold", alice.token).status == 404);

  r = http_request(s.web, "DELETE", "/api/v1/jobs/" + std::to_string(job), alice.token);
  CHECK(r.status == 200);
  CHECK(r.json().at("cancelled") == json::array({job}));
  s.c->wait_state(job, {job_state::cancelled});
  r = http_request(s.web, "DELETE", "/api/v1/jobs/" + std::to_string(job), alice.token);
  CHECK(r.status == 409);
  CHECK(http_request(s.web, "DELETE", "/api/v1/jobs/999999", alice.token).status == 404);
  CHECK(s.get("/api/v1/jobs/999999", alice.token).status == 404);

  // Bad submissions are refused naming the field, and make no job.
  const auto before = s.c->jobs().size();
  r = http_request(s.web, "POST", "/api/v1/jobs", alice.token,
                   json{{"name", "x"}, {"script", "#!/bin/sh\n"}, {"workdir", "relative"}}.dump());
  CHECK(r.status == 400);
  CHECK(r.error().find("workdir") != std::string::npos);
  r = http_request(s.web, "POST", "/api/v1/jobs", alice.token, "{not json");
  CHECK(r.status == 400);
  r = http_request(s.web, "POST", "/api/v1/jobs", alice.token,
                   json{{"name", "x"}, {"argv", {"true"}}, {"workdir", "/"}, {"ntask", 2}}.dump());
  CHECK(r.status == 400);
  CHECK(r.error().find("ntask") != std::string::npos);
  r = http_request(s.web, "POST", "/api/v1/jobs", alice.token, std::string(std::size_t{17} << 20, ' '));
  CHECK(r.status == 413);
  CHECK(s.c->jobs().size() == before);

  // An adaptive job from REST runs as alice, in her directory.
  r = http_request(s.web, "POST", "/api/v1/jobs", alice.token,
                   json{{"name", "adapt"}, {"script", "#!/bin/sh\nid -un > whoami.txt\n"}, {"workdir", s.alice.home.string()},
                        {"min_pe", 1}, {"max_pe", 4}, {"adaptive", true}}
                       .dump());
  REQUIRE(r.status == 201);
  const std::int64_t adaptive = r.json().at("job_id");
  s.c->wait_state(adaptive, {job_state::completed});
  CHECK(test::slurp(s.alice.home / "whoami.txt") == std::string(k_alice) + "\n");
}

TEST_CASE("an unprivileged user gets a token for themselves only, and cannot revoke another user's") {
  setup s;
  const issued alice = s.token(&s.alice);
  auto r = s.get("/api/v1/whoami", alice.token);
  REQUIRE(r.status == 200);
  CHECK(r.json().at("user") == k_alice);
  CHECK(r.json().at("uid") == s.alice.uid);
  CHECK(r.json().at("token_id") == alice.id);
  // ftoken has no way to name a user: the daemon issues for the socket's peer.
  const auto other = s.c->cmd(AQS_FTOKEN_BINARY, {"--user", "root"}, &s.alice);
  CHECK(other.status == 2);
  // No HTTP route issues tokens: a token cannot beget one.
  CHECK(http_request(s.web, "POST", "/api/v1/token", alice.token, "{}").status == 404);
  // Alice naming bob's token id is refused (never "revoked") and changes nothing for bob.
  const issued bob = s.token(&s.bob);
  const auto named = s.c->cmd(AQS_FTOKEN_BINARY, {"--revoke", bob.id}, &s.alice);
  CHECK(named.status != 0);
  CHECK(named.out.empty());
  CHECK(named.err.find("you have no valid token with id") != std::string::npos);
  CHECK(s.get("/api/v1/whoami", bob.token).status == 200);
  // Root's token is root's.
  const issued root = s.token(nullptr);
  CHECK(s.get("/api/v1/whoami", root.token).json().at("uid") == 0);
  // Bad input: one line, non-zero.
  const auto bad = s.c->cmd(AQS_FTOKEN_BINARY, {"--lifespan", "forever"}, &s.alice);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--lifespan") != std::string::npos);
  CHECK(s.c->cmd(AQS_FTOKEN_BINARY, {"--revoke", "nothex"}, &s.alice).status == 1);
}

TEST_CASE("the job list filters by state and user and pages; nodes and the processor map show who holds what") {
  setup s;
  const issued alice = s.token(&s.alice);
  const issued bob = s.token(&s.bob);
  const std::int64_t a1 = s.rest_job(s.alice, alice.token);
  const std::int64_t a2 = s.rest_job(s.alice, alice.token);
  const std::int64_t b1 = s.rest_job(s.bob, bob.token);
  for (auto id : {a1, a2, b1}) s.c->wait_state(id, {job_state::running});

  auto r = s.get("/api/v1/jobs?user=" + std::string(k_alice), bob.token);
  REQUIRE(r.status == 200);
  CAPTURE(r.body);
  std::vector<std::int64_t> ids;
  const json listed = r.json();  // not in the for's range: a temporary's member would dangle
  for (const auto& j : listed.at("jobs")) ids.push_back(j.at("id"));
  CHECK(ids == std::vector<std::int64_t>{a1, a2});
  r = s.get("/api/v1/jobs?limit=1", bob.token);
  CHECK(r.json().at("jobs").size() == 1);
  CHECK(r.json().at("more") == true);
  r = s.get("/api/v1/jobs?limit=1&after=" + std::to_string(a1), bob.token);
  CHECK(r.json().at("jobs").at(0).at("id") == a2);
  r = s.get("/api/v1/jobs?state=running", bob.token);
  CHECK(r.json().at("jobs").size() == 3);
  CHECK(s.get("/api/v1/jobs?state=SLEEPING", bob.token).status == 400);
  CHECK(s.get("/api/v1/jobs?limit=0", bob.token).status == 400);
  CHECK(s.get("/api/v1/jobs?colour=red", bob.token).status == 400);

  r = s.get("/api/v1/nodes", bob.token);
  REQUIRE(r.status == 200);
  CHECK(r.json().at("nodes").size() == 2);
  r = s.get("/api/v1/cluster/map", bob.token);
  REQUIRE(r.status == 200);
  CAPTURE(r.body);
  std::set<std::int64_t> holders;
  const json map = r.json();
  for (const auto& n : map.at("nodes")) {
    CHECK(n.at("processors").size() == 4);
    for (const auto& h : n.at("processors")) {
      if (!h.is_null()) holders.insert(h.get<std::int64_t>());
    }
  }
  CHECK(holders == std::set<std::int64_t>{a1, a2, b1});
  CHECK(r.json().at("cpus").at("alloc") == 3);
  CHECK(r.json().at("cpus").at("idle") == 5);
}

TEST_CASE("partitions list their nodes, processors, limits and jobs; the implicit one without aqs.conf") {
  SUBCASE("no aqs.conf: main, every node") {
    setup s;
    const issued bob = s.token(&s.bob);
    const std::int64_t b1 = s.rest_job(s.bob, bob.token);
    s.c->wait_state(b1, {job_state::running});
    const json all = s.partitions(bob.token);
    CAPTURE(all.dump());
    REQUIRE(all.size() == 1);
    const json& p = all[0];
    CHECK(p.at("name") == "main");
    CHECK(p.at("default") == true);
    CHECK(p.at("node_count") == 2);
    CHECK(p.at("cpus") == json{{"total", 8}, {"alloc", 1}, {"free", 7}});
    CHECK(p.at("jobs") == json{{"pending", 0}, {"running", 1}});
    CHECK(s.get("/api/v1/partitions/main", bob.token).json() == p);
    const auto r = s.get("/api/v1/partitions/gpu", bob.token);
    CHECK(r.status == 404);
    CHECK(r.error() == "no partition 'gpu' (partitions: main)");
  }
  SUBCASE("aqs.conf: each partition with its own nodes and jobs") {
    test::temp_dir conf_dir("aqs-http-partitions");
    const fs::path conf = conf_dir.path() / "aqs.conf";
    std::ofstream(conf) << "PartitionName=debug Nodes=node0 Default=YES MaxTime=30:00 MaxNodes=1\n"
                           "PartitionName=batch Nodes=node[0-1] MaxTime=2:00:00 State=DOWN\n";
    setup s({"--http", "127.0.0.1:0", "--http-public", "--config", conf.string()});
    const issued alice = s.token(&s.alice);
    const std::int64_t a1 = s.rest_job(s.alice, alice.token);
    s.c->wait_state(a1, {job_state::running});
    // debug has 3 processors left: a job of 4 waits there.
    const auto sub = http_request(s.web, "POST", "/api/v1/jobs", alice.token,
                                  json{{"name", "waits"}, {"script", "#!/bin/sh\nsleep 300\n"}, {"ntasks", 4},
                                       {"time", "10"}, {"workdir", s.alice.home.string()}}.dump());
    REQUIRE(sub.status == 201);
    // Public views: partitions as /api/v1/nodes, without a token.
    const json all = s.partitions(std::nullopt);
    CAPTURE(all.dump());
    REQUIRE(all.size() == 2);
    const json& d = all[0];
    CHECK(d.at("name") == "debug");
    CHECK(d.at("default") == true);
    CHECK(d.at("node_list") == "node0");
    CHECK(d.at("cpus") == json{{"total", 4}, {"alloc", 1}, {"free", 3}});
    CHECK(d.at("limits").at("max_time_s") == 1800);
    CHECK(d.at("limits").at("max_nodes") == 1);
    CHECK(d.at("limits").at("max_cpus_per_job").is_null());
    CHECK(d.at("jobs") == json{{"pending", 1}, {"running", 1}});
    const json b = s.get("/api/v1/partitions/batch", std::nullopt).json();
    CHECK(b.at("state") == "DOWN");
    CHECK(b.at("node_names") == json::array({"node0", "node1"}));
    CHECK(b.at("cpus") == json{{"total", 8}, {"alloc", 1}, {"free", 7}});
    CHECK(b.at("jobs") == json{{"pending", 0}, {"running", 0}});
    CHECK(s.get("/api/v1/partitions/main", std::nullopt).status == 404);
  }
}

TEST_CASE("the event stream reports a job's start and end, and --http-public opens the read-only views only") {
  setup s({"--http", "127.0.0.1:0", "--http-public"});
  test::event_stream events(s.web, std::nullopt);  // public: no token
  REQUIRE(events.read_until([](const std::string& t) { return t.find("aqsd job events") != std::string::npos; }, 30s));
  CHECK(events.text().starts_with("HTTP/1.1 200"));
  CHECK(events.text().find("text/event-stream") != std::string::npos);
  const issued alice = s.token(&s.alice);
  const auto r = http_request(s.web, "POST", "/api/v1/jobs", alice.token,
                              json{{"name", "brief"}, {"script", "#!/bin/sh\nsleep 1\n"}, {"workdir", s.alice.home.string()}}.dump());
  REQUIRE(r.status == 201);
  const std::string id = std::to_string(r.json().at("job_id").get<std::int64_t>());
  const std::string running = "{\"job_id\":" + id + ",\"procs\":";
  CHECK(events.read_until([&](const std::string& t) {
    return t.find(running) != std::string::npos && t.find("\"RUNNING\"") != std::string::npos;
  }, 60s));
  CHECK(events.read_until([&](const std::string& t) { return t.find("\"state\":\"COMPLETED\"") != std::string::npos; }, 60s));
  CHECK(events.text().find("event: job\ndata: {\"job_id\":" + id) != std::string::npos);

  // Public: the read-only views answer without a token; acting still needs one.
  CHECK(s.get("/api/v1/jobs", std::nullopt).status == 200);
  CHECK(s.get("/api/v1/cluster/map", std::nullopt).status == 200);
  CHECK(s.get("/metrics", std::nullopt).status == 200);
  CHECK(s.get("/api/v1/jobs/" + id + "/history", std::nullopt).status == 401);
  CHECK(http_request(s.web, "DELETE", "/api/v1/jobs/" + id, std::nullopt).status == 401);
  CHECK(http_request(s.web, "POST", "/api/v1/jobs", std::nullopt, "{}").status == 401);
}

TEST_CASE("one user's requests under way are capped with 429 while other users still get in") {
  setup s({"--http", "127.0.0.1:0", "--max-connections-per-user", "2"});
  const issued alice = s.token(&s.alice);
  const issued bob = s.token(&s.bob);
  test::event_stream e1(s.web, alice.token), e2(s.web, alice.token);
  REQUIRE(e1.read_until([](const std::string& t) { return t.find("aqsd job events") != std::string::npos; }, 30s));
  REQUIRE(e2.read_until([](const std::string& t) { return t.find("aqsd job events") != std::string::npos; }, 30s));
  const auto r = s.get("/api/v1/jobs", alice.token);
  CHECK(r.status == 429);
  CHECK(r.error().find("too many") != std::string::npos);
  CHECK(s.get("/api/v1/jobs", bob.token).status == 200);
  // Closed connections give their place back: more than the per-address
  // limit (256), one after the other, all get in (they once leaked).
  int answered = 0;
  for (int i = 0; i < 300; ++i) answered += s.get("/api/v1/openapi.json", std::nullopt).status == 200 ? 1 : 0;
  CHECK(answered == 300);
}

TEST_CASE("with a certificate the API speaks TLS, and plain HTTP off loopback without TLS is refused at start") {
  test::temp_dir dir("aqs-http-tls", 0755);
  const auto cert = dir.path() / "cert.pem";
  const auto key = dir.path() / "key.pem";
  const std::string gen = "openssl req -x509 -newkey rsa:2048 -nodes -keyout " + key.string() + " -out " + cert.string() +
                          " -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1";
  REQUIRE(std::system(gen.c_str()) == 0);
  {
    setup s({"--http", "127.0.0.1:0", "--http-cert", cert.string(), "--http-key", key.string()});
    test::http_target tls = s.web;
    tls.ca_file = cert.string();
    CHECK(http_request(tls, "GET", "/api/v1/openapi.json").status == 200);
    const issued alice = s.token(&s.alice);
    const auto r = http_request(tls, "GET", "/api/v1/whoami", alice.token);
    CHECK(r.status == 200);
    CHECK(r.json().at("user") == k_alice);
    // Plain HTTP to the TLS port gets no answer.
    bool plain_answered = false;
    try {
      plain_answered = http_request(s.web, "GET", "/api/v1/openapi.json").status == 200;
    } catch (const std::exception&) {
    }
    CHECK_FALSE(plain_answered);
  }
  const auto r = test::run({bin().aqsd, "--state-dir", (dir.path() / "state").string(), "--foreground", "--http", "0.0.0.0:0"});
  CHECK(r.status == 2);
  CHECK(r.err.find("--http-insecure") != std::string::npos);
  const auto half = test::run({bin().aqsd, "--state-dir", (dir.path() / "state").string(), "--foreground", "--http",
                               "127.0.0.1:0", "--http-cert", cert.string()});
  CHECK(half.status == 2);
  CHECK(half.err.find("go together") != std::string::npos);
}

TEST_CASE("a real Prometheus scrapes /metrics with a token and sees the running jobs") {
  if (std::system("command -v prometheus >/dev/null 2>&1") != 0) {
    MESSAGE("prometheus is not installed (Debian package prometheus): skipped");
    return;
  }
  setup s;
  const issued root = s.token(nullptr, {"--lifespan", "3600"});
  const issued alice = s.token(&s.alice);
  const std::int64_t j1 = s.rest_job(s.alice, alice.token);
  const std::int64_t j2 = s.rest_job(s.alice, alice.token);
  s.c->wait_state(j1, {job_state::running});
  s.c->wait_state(j2, {job_state::running});
  // What Prometheus will read, as it reads it (it asks for OpenMetrics).
  const auto m = http_request(s.web, "GET", "/metrics", root.token, "",
                              {{"Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"}});
  REQUIRE(m.status == 200);
  CHECK(m.headers.at("Content-Type") == "application/openmetrics-text; version=1.0.0; charset=utf-8");
  CHECK(m.body.ends_with("# EOF\n"));
  CHECK(m.body.find("aqs_jobs_running 2\n") != std::string::npos);

  test::temp_dir dir("aqs-prometheus", 0700);
  const auto token_file = dir.path() / "token";
  std::ofstream(token_file) << root.token;
  const unsigned short prom_port = free_port();
  std::ofstream(dir.path() / "prometheus.yml")
      << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
      << "scrape_configs:\n  - job_name: aqs\n    metrics_path: /metrics\n"
      << "    authorization:\n      type: Bearer\n      credentials_file: " << token_file.string() << "\n"
      << "    static_configs:\n      - targets: ['127.0.0.1:" << s.web.port << "']\n";
  const pid_t prom = ::fork();
  REQUIRE(prom >= 0);
  if (prom == 0) {
    const int out = ::open((dir.path() / "prometheus.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out, 1);
    ::dup2(out, 2);
    const std::string cfg = "--config.file=" + (dir.path() / "prometheus.yml").string();
    const std::string data = "--storage.tsdb.path=" + (dir.path() / "data").string();
    const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(prom_port);
    ::execlp("prometheus", "prometheus", cfg.c_str(), data.c_str(), listen.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  struct stopper {
    pid_t pid;
    ~stopper() {
      ::kill(pid, SIGTERM);
      int st = 0;
      for (int i = 0; i < 100 && ::waitpid(pid, &st, WNOHANG) == 0; ++i) std::this_thread::sleep_for(100ms);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
    }
  } stop_prometheus{prom};

  test::http_target p;
  p.port = prom_port;
  std::string seen;
  bool ok = false;
  for (int i = 0; i < 600 && !ok; ++i) {
    try {
      const auto q = http_request(p, "GET", "/api/v1/query?query=aqs_jobs_running");
      if (q.status == 200) {
        const auto res = q.json().at("data").at("result");
        seen = res.dump();
        ok = !res.empty() && res.at(0).at("value").at(1) == "2";
      }
    } catch (const std::exception& e) {
      seen = e.what();
    }
    if (!ok) std::this_thread::sleep_for(100ms);
  }
  CAPTURE(seen);
  CAPTURE(test::slurp(dir.path() / "prometheus.log"));
  CHECK(ok);
  // The scrape itself is healthy (the target's last scrape has no error).
  const auto t = http_request(p, "GET", "/api/v1/targets");
  CHECK(t.json().at("data").at("activeTargets").at(0).at("health") == "up");
}
