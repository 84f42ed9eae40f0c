// faucetsd's page end to end (issue 35): a real faucetsd (--policy
// fastest-cpu, its users' API in plain HTTP on loopback), two real AQS
// clusters of different speed joined over TLS with their keys, each aqsd with
// its private PostgreSQL and a real agent. In headless Chromium
// (tests/browser/faucets.mjs) a user types their token, is refused in one line
// for bad input with nothing submitted, reads every cluster's start estimate,
// submits a job from the form and follows it on its page to its cluster, its
// output and its published value. This side checks what the page did really
// happened (the job ran where the policy sent it, its output is the file's),
// and attacks the new endpoints: no token, a forged token, another local
// user's token, and a job whose output path names a file not its user's.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "browser_tools.hpp"
#include "e2e.hpp"
#include "faucets_client/faucets_api.hpp"
#include "faucets_site.hpp"
#include "protocol/auth.hpp"
#include "temp_dir.hpp"

using aqs::test::cluster;
using aqs::test::run;
using aqs::test::run_result;
using nlohmann::json;
namespace fc = aqs::client::faucets;

namespace {

std::string missing_tools() { return aqs::test::missing_browser_tools(AQS_NODEJS, AQS_BROWSER_DIR); }

// One faucetsd (--policy fastest-cpu, plain HTTP on loopback) in a directory of its own.
class web_site : public aqs::test::faucets_site {
public:
  explicit web_site(const std::vector<std::string>& clusters) : faucets_site(clusters, "aqs-webform") {
    start({"--http-plain", "--policy", "fastest-cpu"});
  }
  std::vector<std::string> join_args(const std::string& name, double speed) const {
    std::vector<std::string> a = faucets_site::join_args(name);
    a.insert(a.end(), {"--faucets-speed", std::to_string(speed)});
    return a;
  }
};

cluster::options one_node(int procs, std::vector<std::string> aqsd_args) {
  cluster::options o;
  o.nodes = 1;
  o.procs_per_node = procs;
  o.aqsd_args = std::move(aqsd_args);
  return o;
}

// The HTTP status `c` gets for `method path` (200 when it answers).
int status_of(fc::client& c, const std::string& method, const std::string& path, const json& body = nullptr) {
  try {
    if (body.is_null()) {
      c.call(method, path);
    } else {
      c.call(method, path, body);
    }
    return 200;
  } catch (const fc::error& e) {
    return e.http_status();
  }
}

std::string error_of(fc::client& c, const std::string& method, const std::string& path, const json& body) {
  try {
    if (body.is_null()) {
      c.call(method, path);
    } else {
      c.call(method, path, body);
    }
  } catch (const fc::error& e) {
    return e.what();
  }
  return "";
}

json wait_job(fc::client& c, std::int64_t id, const std::function<bool(const json&)>& pred) {
  json j;
  for (int i = 0; i < 900; ++i) {
    j = c.job(id);
    if (pred(j)) return j;
    std::this_thread::sleep_for(200ms);
  }
  FAIL("job " << id << " never got there: " << j.dump() << "\nhistory: " << c.history(id).dump());
  return j;
}

}  // namespace

TEST_CASE("from faucetsd's page in Chromium, a job is quoted, submitted, runs where the policy sent it and its page "
          "shows its cluster, output and values; bad input submits nothing; other users and no token see nothing") {
  web_site site({"fast", "slow"});
  cluster fast(one_node(2, site.join_args("fast", 2.0)));
  cluster slow(one_node(2, site.join_args("slow", 1.0)));
  fast.wait_nodes_up(1);
  slow.wait_nodes_up(1);
  const auto alice = fast.user("aqs-webform-a");
  const auto bob = fast.user("aqs-webform-b");
  const std::string token = site.token_for(&alice);
  const std::string bob_token = site.token_for(&bob);
  const std::string root_token = site.token_for(nullptr);
  site.wait_up(token, 2);
  auto c = site.client(token);
  auto b = site.client(bob_token);
  auto root = site.client(root_token);
  auto nobody = site.client("");
  auto forged = site.client("forged.token");

  const json good_job{{"name", "api-hello"}, {"script", "#!/bin/sh\necho api-hello\n"},
                      {"workdir", alice.home.string()}, {"min_pe", 1}, {"max_pe", 1}, {"walltime_s", 60}};

  // The quote: both clusters answer with their start estimate; nothing queued.
  const auto before = c.list_jobs(true).size();
  const json q = c.call("POST", "/api/v1/quote", json{{"cluster", "auto"}, {"job", good_job}});
  REQUIRE(q["clusters"].size() == 2);
  for (const auto& row : q["clusters"]) {
    CAPTURE(row.dump());
    CHECK(row["eligible"] == true);
    CHECK(row["start_in_s"].is_number());
  }
  // Bad quotes: one line, 400, nothing changed.
  json neg = good_job;
  neg["min_pe"] = -1;
  CHECK(status_of(c, "POST", "/api/v1/quote", json{{"job", neg}}) == 400);
  const std::string unknown = error_of(c, "POST", "/api/v1/quote", json{{"cluster", "nowhere"}, {"job", good_job}});
  CHECK(unknown.rfind("no cluster 'nowhere' at this Faucets server", 0) == 0);
  CHECK(unknown.find('\n') == std::string::npos);
  const std::string past = error_of(
      c, "POST", "/api/v1/quote",
      json{{"job", good_job}, {"contract", {{"deadline", 1.6e9}, {"max_price", 1}, {"value", 1}}}});
  CHECK(past.rfind("the contract's deadline is in the past", 0) == 0);
  CHECK(c.list_jobs(true).size() == before);

  // No token, a forged one: 401 on every new endpoint.
  for (auto* who : {&nobody, &forged}) {
    CHECK(status_of(*who, "POST", "/api/v1/quote", json{{"job", good_job}}) == 401);
    CHECK(status_of(*who, "GET", "/api/v1/jobs/1/values") == 401);
    CHECK(status_of(*who, "GET", "/api/v1/jobs/1/output") == 401);
  }

  if (const std::string why = missing_tools(); !why.empty()) {
    if (std::getenv("AQS_REQUIRE_BROWSER") != nullptr) FAIL("the browser test cannot run, missing:" << why);
    MESSAGE("browser part skipped, missing:" << why);
  } else {
    fs::create_directories(AQS_ARTIFACT_DIR);
    const auto r = run({AQS_NODEJS, (fs::path(AQS_BROWSER_DIR) / "faucets.mjs").string()},
                       {{"AQS_URL", site.url() + "/"},
                        {"AQS_TOKEN", token},
                        {"AQS_WORKDIR", alice.home.string()},
                        {"AQS_PUBLISH", AQS_PUBLISH_BINARY},
                        {"AQS_EXPECT", "fast"},
                        {"AQS_ARTIFACTS", AQS_ARTIFACT_DIR}},
                       std::nullopt, std::nullopt, AQS_BROWSER_DIR, 600s);
    INFO("faucets.mjs said:\n" << r.out << r.err << "\nfaucetsd:\n" << site.log());
    REQUIRE(r.status == 0);
    // What the page did, as faucetsd and the cluster have it.
    const auto at = r.out.find("\njob ");
    REQUIRE(at != std::string::npos);
    const std::int64_t id = std::stoll(r.out.substr(at + 5));
    const json j = wait_job(c, id, [](const json& x) { return x["state"] == "COMPLETED"; });
    CHECK(j["cluster"] == "fast");
    CHECK(j["user"] == "aqs-webform-a");
    bool by_policy = false;
    for (const auto& e : c.history(id)) {
      if (e["event"] == "dispatched") by_policy = e["detail"].get<std::string>().find("to fast as aqs-webform-a by fastest-cpu") == 0;
    }
    CHECK(by_policy);
    // The output on the page is the file on the cluster.
    const json out = c.call("GET", "/api/v1/jobs/" + std::to_string(id) + "/output");
    const std::string file = slurp(alice.home / ("aqs-" + std::to_string(j["local_id"].get<std::int64_t>()) + ".out"));
    CHECK(out["output"] == file);
    CHECK(file.find("hello-from-the-browser") != std::string::npos);
    const json v = c.call("GET", "/api/v1/jobs/" + std::to_string(id) + "/values");
    CHECK(v["values"]["series"]["progress"]["total"] == 2);
    // The job staged from the form: its files back at the server, as the page listed them.
    const auto st = r.out.find("\nstaged ");
    REQUIRE(st != std::string::npos);
    const std::int64_t staged = std::stoll(r.out.substr(st + 8));
    const json back = c.call("GET", "/api/v1/jobs/" + std::to_string(staged) + "/outputs");
    CHECK(back["outputs"] == "back");
    bool result = false;
    for (const auto& f : back["files"]) result = result || (f["path"] == "result.txt" && f["data"] == "bWFkZQo=");  // "made\n"
    CHECK_MESSAGE(result, back.dump());
    // The refusals were one line each, and the right ones.
    CHECK(r.out.find("refusal negative processors: ") != std::string::npos);
    CHECK(r.out.find("refusal a past deadline: the contract's deadline is in the past") != std::string::npos);
    CHECK(r.out.find("refusal an unknown cluster: no cluster 'nowhere' at this Faucets server (known: fast, slow)\n") !=
          std::string::npos);
    CHECK(r.out.find("refusal quote: no cluster 'nowhere'") != std::string::npos);
    CHECK(r.out.find("refusal negative processors: field 'job.min_pe' must be in 1..") != std::string::npos);
    // Another local user, and no token: nothing of alice's job. Root: all.
    for (const char* what : {"values", "output", "history"}) {
      const std::string path = "/api/v1/jobs/" + std::to_string(id) + "/" + what;
      CAPTURE(path);
      CHECK(status_of(b, "GET", path) == 404);
      CHECK(status_of(nobody, "GET", path) == 401);
      CHECK(status_of(root, "GET", path) == 200);
    }
  }

  // A job whose output path names a file that is not its user's: the
  // cluster refuses to read it for faucetsd (it reads only the user's own
  // regular files, never through a symlink).
  // root's own file (not /etc/shadow: a job's output open must not be able to hurt the machine either)
  const fs::path secret = fast.dir() / "root-secret";
  write_file(secret, "root's secret\n", 0600);
  json sneaky = good_job;
  sneaky["name"] = "sneaky";
  sneaky["stdout"] = secret.string();
  const json placed = c.call("POST", "/api/v1/jobs", json{{"cluster", "fast"}, {"job", sneaky}});
  const std::int64_t sid = placed["id"];
  wait_job(c, sid, [](const json& x) { return !x["local_id"].is_null(); });
  const std::string refused = error_of(c, "GET", "/api/v1/jobs/" + std::to_string(sid) + "/output", nullptr);
  CHECK_MESSAGE(refused == "fast: " + secret.string() + " is not a regular file of the job's user", refused);
  CHECK(slurp(secret) == "root's secret\n");
  fs::create_symlink(secret, alice.home / "link.out");
  sneaky["stdout"] = "link.out";
  const json placed2 = c.call("POST", "/api/v1/jobs", json{{"cluster", "fast"}, {"job", sneaky}});
  const std::int64_t sid2 = placed2["id"];
  wait_job(c, sid2, [](const json& x) { return !x["local_id"].is_null(); });
  const std::string refused2 = error_of(c, "GET", "/api/v1/jobs/" + std::to_string(sid2) + "/output", nullptr);
  CHECK_MESSAGE(refused2.rfind("fast: cannot open " + (alice.home / "link.out").string(), 0) == 0, refused2);
  CHECK(refused2.find("secret") == std::string::npos);
}
