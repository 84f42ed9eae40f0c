// values: live application values end to end: a job's script publishes
// with aqs-publish over the job's own channel to a real aqsd; REST shows
// them to the job's owner (and root) only, live as server-sent events; bad
// input gets one line and changes nothing; another local user cannot
// publish into the job; a job flooding values is capped. Also the
// dashboard's one-time login codes (ftoken --login).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <sys/stat.h>
#include <unistd.h>
#include <fstream>
#include <thread>

#include "e2e.hpp"
#include "http_client.hpp"

using nlohmann::json;
using test::http_request;

namespace {

// Names unique to this branch's tests (other tests make throwaway users too).
constexpr const char* k_owner = "aqs-live-a";
constexpr const char* k_other = "aqs-live-b";

struct setup {
  test::test_database db;
  std::unique_ptr<test::cluster> c;
  test::test_user owner, other;
  test::http_target web;

  setup() {
    auto o = test::nodes_of(db, 1, 4);
    o.aqsd_args = {"--http", "127.0.0.1:0"};
    c = std::make_unique<test::cluster>(o);
    owner = c->user(k_owner);
    other = c->user(k_other);
    web.port = c->http_port();
    c->wait_nodes_up(1);
  }
  std::string token(const test::test_user* u, std::vector<std::string> args = {}) {
    const auto r = c->cmd(AQS_FTOKEN_BINARY, std::move(args), u);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    return test::last_line(r.out);
  }
  json values(std::int64_t job, const std::string& tok) {
    const auto r = http_request(web, "GET", "/api/v1/jobs/" + std::to_string(job) + "/values", tok);
    REQUIRE_MESSAGE(r.status == 200, r.body);
    return r.json();
  }
  // A job of `u`'s running `body` (bash), its working directory u's home.
  std::int64_t job(const test::test_user& u, const std::string& body) {
    const fs::path script = u.home / ("job-" + std::to_string(++n_) + ".sh");
    write_file(script, "#!/bin/bash\nexport PATH=" + fs::path(AQS_PUBLISH_BINARY).parent_path().string() +
                           ":/usr/bin:/bin\n" + body);
    ::chown(script.c_str(), u.uid, u.gid);
    ::chmod(script.c_str(), 0755);
    return c->submit({"-n", "1", "-t", "10", "-J", "values", script.string()}, &u, u.home.string());
  }
  int n_ = 0;
};

std::vector<double> series(const json& v, const std::string& name) {
  std::vector<double> out;
  if (!v.at("series").contains(name)) return out;
  for (const auto& p : v.at("series").at(name).at("points")) out.push_back(p.at(1).get<double>());
  return out;
}

}  // namespace

TEST_CASE("a job's script publishes with aqs-publish; its owner reads the values over REST, others cannot") {
  setup s;
  const std::string mine = s.token(&s.owner), theirs = s.token(&s.other), root = s.token(nullptr);
  const fs::path marks = s.owner.home / "marks";
  const std::int64_t id = s.job(s.owner, "aqs-publish residual 0.5\n"
                                          "aqs-publish residual 0.25 ranks 4\n"
                                          "printf 'residual 0.125\\nranks 2\\n' | aqs-publish --stdin\n"
                                          "echo published > " + marks.string() + "\n"
                                          "sleep 300\n");
  s.c->wait_state(id, {job_state::running});
  REQUIRE_MESSAGE(eventually([&] { return fs::exists(marks); }, 60s), "the job's aqs-publish calls did not finish");
  const json v = s.values(id, mine);
  CHECK(series(v, "residual") == std::vector<double>{0.5, 0.25, 0.125});
  CHECK(series(v, "ranks") == std::vector<double>{4, 2});
  CHECK(v.at("series").at("residual").at("total") == 3);
  CHECK(v.at("accepted") == 5);
  CHECK(v.at("dropped") == 0);
  CHECK(v.at("ended") == false);
  // The job's own view shows each name's newest value to its owner and root.
  const auto shown = http_request(s.web, "GET", "/api/v1/jobs/" + std::to_string(id), mine);
  REQUIRE(shown.status == 200);
  CHECK(shown.json().at("values").at("residual").at("value") == 0.125);
  CHECK(shown.json().at("values").at("ranks").at("total") == 2);
  CHECK(http_request(s.web, "GET", "/api/v1/jobs/" + std::to_string(id), root).json().contains("values"));
  CHECK(s.values(id, root).at("series").size() == 2);
  // Another user sees the job (as fjobs shows it) but not its values.
  const auto other_view = http_request(s.web, "GET", "/api/v1/jobs/" + std::to_string(id), theirs);
  REQUIRE(other_view.status == 200);
  CHECK_FALSE(other_view.json().contains("values"));
  const auto refused = http_request(s.web, "GET", "/api/v1/jobs/" + std::to_string(id) + "/values", theirs);
  CHECK(refused.status == 403);
  CHECK(refused.error().find("another user") != std::string::npos);
  const auto stream_refused = http_request(s.web, "GET", "/api/v1/jobs/" + std::to_string(id) + "/values/events", theirs);
  CHECK(stream_refused.status == 403);
  CHECK(http_request(s.web, "GET", "/api/v1/jobs/999999/values", mine).status == 404);
  CHECK(http_request(s.web, "GET", "/api/v1/jobs/" + std::to_string(id) + "/values?since=x", mine).status == 400);
  CHECK(http_request(s.web, "GET", "/api/v1/jobs/" + std::to_string(id) + "/values?colour=red", mine).status == 400);

  // The other local user, from their own shell, claims to be the job: the
  // kernel says who they are on the Unix socket, and it is not the owner.
  const std::map<std::string, std::string> as_job = {{"AQS_JOB_ID", std::to_string(id)}, {"AQS_SOCKET", s.c->socket()}};
  auto r = test::run({AQS_PUBLISH_BINARY, "residual", "999"}, as_job, s.other.uid, s.other.gid);
  CHECK(r.status == 1);
  CHECK(r.err.find("belongs to another user") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  // Nothing of theirs was kept. (Over TCP the job's token and one of its
  // hosts are needed: the job handshake's own tests cover that path.)
  CHECK(series(s.values(id, mine), "residual") == std::vector<double>{0.5, 0.25, 0.125});

  // Outside any job: one line, non-zero.
  r = test::run({AQS_PUBLISH_BINARY, "residual", "1"}, {}, s.owner.uid, s.owner.gid);
  CHECK(r.status == 1);
  CHECK(r.err.find("not inside an AQS job") != std::string::npos);
  s.c->cmd(bin().fkill, {std::to_string(id)});
  s.c->wait_state(id, {job_state::cancelled});
  // Once the job ended its values are still shown, and no more are taken.
  CHECK(s.values(id, mine).at("ended") == true);
}

TEST_CASE("bad published names and values get one line and a non-zero exit, and change nothing") {
  setup s;
  const std::string mine = s.token(&s.owner);
  const fs::path out = s.owner.home / "bad.txt";
  const std::string long_name(65, 'a');
  const std::int64_t id = s.job(
      s.owner, "exec 2>>" + out.string() + "\n"
               "try() { aqs-publish \"$@\"; echo \"rc=$?\" >&2; }\n"
               "try 'two words' 1\n"
               "try " + long_name + " 1\n"
               "try residual nan\n"
               "try residual 1e999\n"
               "try residual twelve\n"
               "try residual\n"
               "try\n"
               "printf 'ok 1\\nbad\\n' | aqs-publish --stdin; echo \"rc=$?\" >&2\n"
               "echo done >&2\n"
               "sleep 300\n");
  s.c->wait_state(id, {job_state::running});
  REQUIRE_MESSAGE(eventually([&] { return test::slurp(out).find("done") != std::string::npos; }, 60s), test::slurp(out));
  const std::string said = test::slurp(out);
  CAPTURE(said);
  CHECK(said.find("aqs-publish: bad name 'two words'") != std::string::npos);
  CHECK(said.find("aqs-publish: bad name '" + long_name + "'") != std::string::npos);
  CHECK(said.find("aqs-publish: bad value 'nan' for residual") != std::string::npos);
  CHECK(said.find("aqs-publish: bad value '1e999' for residual") != std::string::npos);
  CHECK(said.find("aqs-publish: bad value 'twelve' for residual") != std::string::npos);
  CHECK(said.find("has no value") != std::string::npos);
  CHECK(said.find("nothing to publish") != std::string::npos);
  CHECK(said.find("line 2: want NAME VALUE") != std::string::npos);
  // Eight refusals, each one line followed by its exit status 2.
  std::size_t twos = 0;
  for (std::size_t at = said.find("rc=2"); at != std::string::npos; at = said.find("rc=2", at + 1)) ++twos;
  CHECK(twos == 8);
  // Only the good line before the bad one went out.
  const json v = s.values(id, mine);
  CHECK(v.at("series").size() == 1);
  CHECK(series(v, "ok") == std::vector<double>{1});
  s.c->cmd(bin().fkill, {std::to_string(id)});
}

TEST_CASE("published values arrive as server-sent events while the job runs") {
  setup s;
  const std::string mine = s.token(&s.owner);
  const fs::path go = s.owner.home / "go";
  const std::int64_t id = s.job(s.owner, "while [ ! -e " + go.string() + " ]; do sleep 0.1; done\n"
                                          "for i in 1 2 3; do aqs-publish tick $i; sleep 0.2; done\n"
                                          "sleep 300\n");
  s.c->wait_state(id, {job_state::running});
  test::event_stream events(s.web, mine, "/api/v1/jobs/" + std::to_string(id) + "/values/events");
  REQUIRE(events.read_until([](const std::string& t) { return t.find("aqsd values of job") != std::string::npos; }, 30s));
  CHECK(events.text().starts_with("HTTP/1.1 200"));
  write_file(go, "");
  ::chown(go.c_str(), s.owner.uid, s.owner.gid);
  const bool all = events.read_until([](const std::string& t) { return t.find("\"tick\":[[") != std::string::npos &&
                                                                       t.find(",3.0]]") != std::string::npos; },
                                     60s);
  CAPTURE(events.text());
  CHECK(all);
  CHECK(events.text().find("event: values\ndata: {\"job_id\":" + std::to_string(id)) != std::string::npos);
  s.c->cmd(bin().fkill, {std::to_string(id)});
}

TEST_CASE("a job publishing as fast as it can is capped at its rate, and aqsd keeps answering") {
  setup s;
  const std::string mine = s.token(&s.owner);
  const fs::path out = s.owner.home / "flood.txt";
  // 20,000 values as fast as one connection takes them (each line waits for
  // aqsd's answer: thousands a second on the Unix socket).
  const std::int64_t id = s.job(s.owner, "start=$(date +%s.%N)\n"
                                          "seq 1 20000 | sed 's/^/flood /' | aqs-publish --stdin 2>" + out.string() + ".err\n"
                                          "echo \"rc=$? start=$start end=$(date +%s.%N)\" >" + out.string() + "\n"
                                          "sleep 300\n");
  s.c->wait_state(id, {job_state::running});
  // Meanwhile the rest of aqsd answers as usual.
  const std::int64_t other = s.c->submit({"-n", "1", "-t", "10", "--wrap", "true"});
  s.c->wait_state(other, {job_state::completed});
  REQUIRE_MESSAGE(eventually([&] { return test::slurp(out).find("rc=") != std::string::npos; }, 180s),
                  test::slurp(out.string() + ".err"));
  const std::string said = test::slurp(out);
  CAPTURE(said);
  CHECK(said.find("rc=0") != std::string::npos);
  const double start = std::stod(said.substr(said.find("start=") + 6));
  const double end = std::stod(said.substr(said.find("end=") + 4));
  const json v = s.values(id, mine);
  const auto& limits = v.at("limits");
  const double rate = limits.at("rate"), burst = limits.at("burst");
  const std::int64_t accepted = v.at("accepted"), dropped = v.at("dropped");
  MESSAGE("flood: " << accepted << " taken, " << dropped << " dropped in " << (end - start) << " s");
  CHECK(accepted + dropped == 20000);
  CHECK(dropped > 0);
  CHECK(static_cast<double>(accepted) <= burst + rate * (end - start + 1.0));
  CHECK(v.at("series").at("flood").at("points").size() <= limits.at("max_points").get<std::size_t>());
  // aqs-publish told how many were dropped, in one line.
  CHECK(test::slurp(out.string() + ".err").find("values dropped") != std::string::npos);
  s.c->cmd(bin().fkill, {std::to_string(id)});
}

TEST_CASE("ftoken --login gives a one-time code that the dashboard exchanges for a token, once, and nothing else") {
  setup s;
  const auto r = s.c->cmd(AQS_FTOKEN_BINARY, {"--login", "--url", "http://127.0.0.1:" + std::to_string(s.web.port)}, &s.owner);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const std::string url = test::last_line(r.out);
  const std::string prefix = "http://127.0.0.1:" + std::to_string(s.web.port) + "/#login=";
  REQUIRE(url.starts_with(prefix));
  const std::string code = url.substr(prefix.size());
  CHECK(code.size() == 32);
  // What the page does with it: the code in a header, a token back.
  const auto ok = http_request(s.web, "POST", "/api/v1/login", std::nullopt, "", {{"X-AQS-Login-Code", code}});
  REQUIRE_MESSAGE(ok.status == 200, ok.body);
  const std::string token = ok.json().at("token");
  CHECK(ok.json().at("user") == k_owner);
  const auto me = http_request(s.web, "GET", "/api/v1/whoami", token);
  REQUIRE(me.status == 200);
  CHECK(me.json().at("user") == k_owner);
  // Once only.
  const auto again = http_request(s.web, "POST", "/api/v1/login", std::nullopt, "", {{"X-AQS-Login-Code", code}});
  CHECK(again.status == 401);
  CHECK(again.error().find("ftoken --login") != std::string::npos);
  // A guess, a malformed code, none.
  CHECK(http_request(s.web, "POST", "/api/v1/login", std::nullopt, "", {{"X-AQS-Login-Code", std::string(32, '0')}}).status == 401);
  CHECK(http_request(s.web, "POST", "/api/v1/login", std::nullopt, "", {{"X-AQS-Login-Code", "x"}}).status == 401);
  CHECK(http_request(s.web, "POST", "/api/v1/login", std::nullopt).status == 400);
  // A code is not a token.
  const auto r2 = s.c->cmd(AQS_FTOKEN_BINARY, {"--login"}, &s.owner);
  REQUIRE(r2.status == 0);
  const std::string bare = test::last_line(r2.out);
  REQUIRE(bare.starts_with("#login="));
  CHECK(http_request(s.web, "GET", "/api/v1/whoami", bare.substr(7)).status == 401);
  CHECK(s.c->cmd(AQS_FTOKEN_BINARY, {"--login", "--revoke-all"}, &s.owner).status == 2);
  CHECK(s.c->cmd(AQS_FTOKEN_BINARY, {"--url", "http://x/"}, &s.owner).status == 2);
}
