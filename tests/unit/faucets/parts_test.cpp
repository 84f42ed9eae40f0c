// faucetsd's parts without PostgreSQL or sockets: the users' API over a fake
// backend (every declared route reachable, undeclared ones refused with the
// right status, someone else's job absent), the hub's view of clusters that
// never connected, and the admin's user table.
#include <doctest/doctest.h>

#include <map>

#include <future>
#include <utility>  // before Boost.Asio's awaitable.hpp, which needs std::exchange

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/http.hpp>

#include "server/cluster_hub.hpp"
#include "server/user_api.hpp"
#include "server/user_map.hpp"

using namespace aqs::faucets;
namespace bhttp = boost::beast::http;
using nlohmann::json;

namespace {

constexpr std::int64_t k_now_us = 1'800'000'000'000'000;

// The jobs of two users in memory; what the API asked for, recorded.
class fake_backend final : public user_backend {
public:
  fake_backend() {
    for (const char* owner : {"alice", "bob"}) {
      stored_job j;
      j.id = static_cast<std::int64_t>(jobs_.size()) + 1;
      j.owner = owner;
      j.name = std::string(owner) + "-job";
      jobs_.push_back(j);
    }
  }
  std::int64_t submit(const std::string& owner, const std::string& cluster, json message, std::string* error) override {
    if (cluster != "auto") {
      *error = "no cluster '" + cluster + "'";
      return 0;
    }
    stored_job j;
    j.id = static_cast<std::int64_t>(jobs_.size()) + 1;
    j.owner = owner;
    j.submit = message.dump();
    jobs_.push_back(j);
    return j.id;
  }
  std::optional<std::string> cancel(const stored_job& j) override {
    for (auto& k : jobs_) {
      if (k.id != j.id) continue;
      if (k.state == "CANCELLED") return "already ended";
      k.state = "CANCELLED";
    }
    return std::nullopt;
  }
  json clusters() const override { return json{{"clusters", json::array()}, {"policy", "fake"}}; }
  std::vector<stored_job> jobs(const std::optional<std::string>& owner, bool, const std::optional<std::string>&) override {
    std::vector<stored_job> out;
    for (const auto& j : jobs_) {
      if (!owner || j.owner == *owner) out.push_back(j);
    }
    return out;
  }
  std::optional<stored_job> job(std::int64_t id) override {
    for (const auto& j : jobs_) {
      if (j.id == id) return j;
    }
    return std::nullopt;
  }
  std::vector<history_line> history(std::int64_t) override { return {history_line{"2026-01-01T00:00:00Z", "submitted", ""}}; }
  std::map<std::string, std::int64_t> balances() override {
    std::map<std::string, std::int64_t> b;
    for (const auto& e : entries_) {
      b[e.payee] += e.amount_micro;
      b[e.payer] -= e.amount_micro;
    }
    return b;
  }
  std::vector<ledger_entry> ledger_entries(const std::optional<std::string>& owner, std::int64_t limit) override {
    std::vector<ledger_entry> out;
    for (const auto& e : entries_) {
      if ((!owner || e.payer == *owner || e.payee == *owner) && static_cast<std::int64_t>(out.size()) < limit) {
        out.push_back(e);
      }
    }
    return out;
  }

  // The page's questions: a quote names the asker; a view the job and what.
  boost::asio::awaitable<desk_answer> quote(const std::string& owner, const json& body) override {
    if (body.value("cluster", std::string("auto")) != "auto") co_return std::string("no such cluster");
    co_return json{{"owner", owner}, {"clusters", json::array()}};
  }
  boost::asio::awaitable<desk_answer> view(const stored_job& j, const std::string& what, double,
                                           std::int64_t) override {
    co_return json{{"id", j.id}, {"what", what}};
  }
  json staged_outputs(std::int64_t id) override {
    if (id != 1) return nullptr;  // staged nothing
    return json{{"outputs", "waiting"}, {"detail", ""}, {"in_bytes", 0}, {"out_bytes", 0}, {"files", json::array()}};
  }

  std::vector<stored_job> jobs_;
  std::vector<ledger_entry> entries_;
};

struct fixture {
  aqs::daemon::token_authority tokens{std::string(64, 'k'), std::nullopt};
  fake_backend backend;
  std::string alice = tokens.issue(1000, "alice", 3600, k_now_us).first;
  std::string root = tokens.issue(0, "root", 3600, k_now_us).first;

  // The whole path of one request: authorize on the head, then answer.
  api_response send(const std::string& method, const std::string& target, const std::optional<std::string>& token,
                    const std::string& body = "") {
    api_request req{bhttp::string_to_verb(method), target, 11};
    if (token) req.set(bhttp::field::authorization, "Bearer " + *token);
    req.body() = body;
    req.prepare_payload();
    auto verdict = authorize(tokens, req, k_now_us);
    if (auto* refusal = std::get_if<api_response>(&verdict)) return std::move(*refusal);
    boost::asio::io_context io;
    auto done = boost::asio::co_spawn(io, answer_async(backend, std::get<user_call>(verdict), req),
                                      boost::asio::use_future);
    io.run();
    return done.get();
  }
};

// `r`'s path with {id} as `id`.
std::string path_with(const user_route& r, std::int64_t id) {
  std::string p(r.path);
  if (const auto at = p.find("{id}"); at != std::string::npos) p.replace(at, 4, std::to_string(id));
  return p;
}

}  // namespace

TEST_CASE("every declared route of faucetsd's users' API is reached and answered by its own handler") {
  fixture f;
  for (const auto& r : user_routes()) {
    CAPTURE(r.method);
    CAPTURE(r.path);
    const std::string path = path_with(r, 1);
    const auto m = match_user_route(r.method, path);
    REQUIRE(m.route == &r);
    const auto res = f.send(std::string(r.method), path, f.alice, r.job_body ? R"({"job": {"ntasks": 1}})" : "");
    CHECK(res.result_int() / 100 == 2);
    if (!r.token) CHECK(f.send(std::string(r.method), path, std::nullopt).result_int() / 100 == 2);
  }
  // Only the submission takes a job's body.
  for (const auto& r : user_routes()) {
    CHECK(r.job_body == (r.method == "POST" && (r.path == "/api/v1/jobs" || r.path == "/api/v1/quote")));
  }
}

TEST_CASE("faucetsd refuses undeclared routes: 404 outside the API, 401 then 404 inside, 405 with Allow for a known path") {
  fixture f;
  CHECK(f.send("GET", "/index.html", std::nullopt).result_int() == 404);
  CHECK(f.send("GET", "/api/v1/nothing", std::nullopt).result_int() == 401);
  const auto unknown = f.send("GET", "/api/v1/nothing", f.alice);
  CHECK(unknown.result_int() == 404);
  CHECK(json::parse(unknown.body()).at("error").get<std::string>() == "no such route: GET /api/v1/nothing");
  CHECK(f.send("GET", "/api/v1/jobs/x", f.alice).result_int() == 404);
  CHECK(f.send("GET", "/api/v1/jobs/1/nothing", f.alice).result_int() == 404);
  auto wrong = f.send("PUT", "/api/v1/jobs", f.alice);
  CHECK(wrong.result_int() == 405);
  CHECK(wrong[bhttp::field::allow] == "GET, POST");
  wrong = f.send("POST", "/", std::nullopt);
  CHECK(wrong.result_int() == 405);
  CHECK(wrong[bhttp::field::allow] == "GET");
  CHECK(f.send("GET", "/api/v1/jobs", "forged").result_int() == 401);
  CHECK(f.send("GET", "/api/v1/jobs", std::nullopt)[bhttp::field::www_authenticate] == "Bearer realm=\"faucetsd\"");
}

TEST_CASE("another user's job is as absent as a missing one, except to root; the list shows one's own") {
  fixture f;
  CHECK(f.send("GET", "/api/v1/jobs/2", f.alice).result_int() == 404);
  CHECK(f.send("POST", "/api/v1/jobs/2/cancel", f.alice).result_int() == 404);
  CHECK(f.backend.jobs_.at(1).state == "PENDING");
  CHECK(f.send("GET", "/api/v1/jobs/2", f.root).result_int() == 200);
  CHECK(f.send("POST", "/api/v1/jobs/2/cancel", f.root).result_int() == 200);
  CHECK(f.backend.jobs_.at(1).state == "CANCELLED");
  CHECK(f.send("POST", "/api/v1/jobs/2/cancel", f.root).result_int() == 409);
  const auto mine = json::parse(f.send("GET", "/api/v1/jobs", f.alice).body());
  REQUIRE(mine.at("jobs").size() == 1);
  CHECK(mine["jobs"][0]["user"] == "alice");
  CHECK(json::parse(f.send("GET", "/api/v1/jobs", f.root).body()).at("jobs").size() == 2);
}

TEST_CASE("a submission is the token's user's, and a bad body or a refused job is 400 with the reason") {
  fixture f;
  const auto ok = f.send("POST", "/api/v1/jobs", f.alice, R"({"job": {"ntasks": 2}})");
  REQUIRE(ok.result_int() == 201);
  CHECK(f.backend.jobs_.back().owner == "alice");
  CHECK(json::parse(f.backend.jobs_.back().submit).at("job").at("ntasks") == 2);
  CHECK(f.send("POST", "/api/v1/jobs", f.alice, "not json").result_int() == 400);
  CHECK(f.send("POST", "/api/v1/jobs", f.alice, R"({"cluster": "auto"})").result_int() == 400);
  const auto refused = f.send("POST", "/api/v1/jobs", f.alice, R"({"cluster": "mars", "job": {}})");
  CHECK(refused.result_int() == 400);
  CHECK(json::parse(refused.body()).at("error") == "no cluster 'mars'");
  // A contract travels with the job to the router (which checks it).
  const auto with_contract =
      f.send("POST", "/api/v1/jobs", f.alice, R"({"job": {"ntasks": 1}, "contract": {"deadline": 2e9, "max_price": 1, "value": 3}})");
  REQUIRE(with_contract.result_int() == 201);
  CHECK(json::parse(f.backend.jobs_.back().submit).at("contract").at("value") == 3);
}

TEST_CASE("the hub knows its clusters before any connects: none up, none reported, nothing to send to") {
  boost::asio::io_context io;
  hub_options o;
  o.cluster_keys = {{"one", "k1"}, {"two", "k2"}};
  cluster_hub hub(io, o);
  CHECK(hub.names() == std::vector<std::string>{"one", "two"});
  CHECK(hub.knows("one"));
  CHECK_FALSE(hub.knows("three"));
  CHECK_FALSE(hub.connected("one"));
  CHECK_FALSE(hub.send("one", json{{"type", "ping"}}));
  CHECK_FALSE(hub.all_reported());
  hub.note_placed("one", 4);  // counted against its next report, not shown without one
  for (const auto& v : hub.views()) {
    CHECK_FALSE(v.up);
    CHECK(v.procs_free == 0);
  }
  const auto listed = hub.clusters_json();
  REQUIRE(listed.size() == 2);
  CHECK(listed[0]["state"] == "NEVER_SEEN");
  CHECK_FALSE(listed[0].contains("report"));
}

TEST_CASE("the user table maps users per cluster, never to root, and says when root is why") {
  const auto m = user_map::parse("alice * alice_local\n* two *\nbob one root\n", "test");
  CHECK(m.local_user("alice", "one") == "alice_local");
  CHECK(m.local_user("carol", "two") == "carol");
  CHECK(m.local_user("carol", "one") == std::nullopt);
  CHECK(m.local_user("bob", "one") == std::nullopt);
  CHECK(m.maps_to_root("bob", "one"));
  CHECK(m.local_user("bob", "two") == "bob");
  CHECK(m.local_user("root", "two") == std::nullopt);
  CHECK(m.maps_to_root("root", "two"));
  CHECK_THROWS_AS(user_map::parse("only two\n", "test"), std::runtime_error);
}

TEST_CASE("the ledger route: balances to every token holder, entries of one's own jobs only (root: all), bad limit 400") {
  fixture f;
  ledger_entry a;
  a.id = 1;
  a.job_id = 1;
  a.user = "alice";
  a.payer = "uni";
  a.payee = "lab";
  a.amount_micro = 2'500'000;
  ledger_entry b = a;
  b.id = 2;
  b.job_id = 2;
  b.user = "bob";
  b.payer = "lab";
  b.payee = "uni";
  b.amount_micro = 1'000'000;
  f.backend.entries_ = {a, b};
  CHECK(f.send("GET", "/api/v1/ledger", std::nullopt).result_int() == 401);
  const auto mine = json::parse(f.send("GET", "/api/v1/ledger", f.alice).body());
  CHECK(mine.at("balances").at("lab").at("balance_micro") == 1'500'000);
  CHECK(mine.at("balances").at("uni").at("balance_micro") == -1'500'000);
  CHECK(mine.at("total_micro") == 0);
  REQUIRE(mine.at("entries").size() == 1);
  CHECK(mine.at("entries")[0].at("job_id") == 1);
  const auto all = json::parse(f.send("GET", "/api/v1/ledger?owner=lab", f.root).body());
  CHECK(all.at("entries").size() == 2);
  const auto bad = f.send("GET", "/api/v1/ledger?limit=0", f.alice);
  CHECK(bad.result_int() == 400);
  CHECK(json::parse(bad.body()).at("error") == "limit must be a number in 1..100000");
  CHECK(f.send("POST", "/api/v1/ledger", f.alice).result_int() == 405);
}

TEST_CASE("the browser's routes: a job's page opens without a token, its values and output only for its owner or root, "
          "a quote only with a token and for the asker") {
  fixture f;
  // The page itself holds no data: anyone may load it; its data need the token.
  CHECK(f.send("GET", "/jobs/2", std::nullopt).result_int() == 200);
  for (const char* path : {"/api/v1/jobs/1/values", "/api/v1/jobs/1/output"}) {
    CAPTURE(path);
    CHECK(f.send("GET", path, std::nullopt).result_int() == 401);
    CHECK(f.send("GET", path, "forged").result_int() == 401);
    CHECK(f.send("GET", path, f.alice).result_int() == 200);
  }
  // bob's job: absent to alice, there for root.
  CHECK(f.send("GET", "/api/v1/jobs/2/values", f.alice).result_int() == 404);
  CHECK(f.send("GET", "/api/v1/jobs/2/output", f.alice).result_int() == 404);
  CHECK(f.send("GET", "/api/v1/jobs/2/output", f.root).result_int() == 200);
  CHECK(f.send("GET", "/api/v1/jobs/1/output?bytes=0", f.alice).result_int() == 400);
  CHECK(f.send("GET", "/api/v1/jobs/1/values?since=x", f.alice).result_int() == 400);
  CHECK(f.send("POST", "/api/v1/quote", std::nullopt, R"({"job": {}})").result_int() == 401);
  const auto q = f.send("POST", "/api/v1/quote", f.alice, R"({"job": {}})");
  REQUIRE(q.result_int() == 200);
  CHECK(json::parse(q.body()).at("owner") == "alice");
  const auto bad = f.send("POST", "/api/v1/quote", f.alice, R"({"cluster": "nowhere", "job": {}})");
  CHECK(bad.result_int() == 400);
  CHECK(json::parse(bad.body()).at("error") == "no such cluster");
  CHECK(f.send("POST", "/api/v1/quote", f.alice, "{").result_int() == 400);
}
