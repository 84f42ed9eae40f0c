// job_updates: issue 28 items 5 and 8. Every change of a job (fctl update,
// PATCH /api/v1/jobs/ID, aqs-scontrol update) passes the partition limits
// fsub does; a pending rigid -n 1 job given 3 processors runs 3 tasks;
// --export=ALL,V=x reaches the job; ftoken --revoke of another user's token
// is refused. Real aqsd with aqs.conf and --http, real agents, commands run
// as unprivileged throwaway users.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <pwd.h>
#include <thread>

#include "../http/http_client.hpp"
#include "e2e.hpp"
#include "temp_dir.hpp"

using nlohmann::json;

namespace {

constexpr const char* k_alice = "aqs-cluster-id-b";
constexpr const char* k_bob = "aqs-cluster-id-c";

// One node of 2 processors in partition "short": at most 20 minutes and one
// processor per job.
constexpr const char* k_config = "PartitionName=short Nodes=node0 Default=YES MaxTime=20:00 MaxCPUsPerJob=1\n";

struct setup {
  test::test_database db;
  test::temp_dir conf_dir{"aqs-job-updates"};
  std::unique_ptr<test::cluster> c;
  test::test_user alice, bob;
  test::http_target web;

  explicit setup(bool partitions, int procs = 2) {
    auto o = test::nodes_of(db, 1, procs);
    o.aqsd_args = {"--http", "127.0.0.1:0"};
    if (partitions) {
      const fs::path conf = conf_dir.path() / "aqs.conf";
      std::ofstream(conf) << k_config;
      o.aqsd_args.push_back("--config");
      o.aqsd_args.push_back(conf.string());
    }
    c = std::make_unique<test::cluster>(o);
    alice = c->user(k_alice);
    bob = c->user(k_bob);
    web.port = c->http_port();
  }
  // ftoken as `u`: {id, token}.
  std::pair<std::string, std::string> token(const test::test_user& u) {
    const auto r = c->cmd(AQS_FTOKEN_BINARY, {}, &u);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    const auto first = r.out.substr(0, r.out.find('\n'));
    REQUIRE(first.starts_with("token "));
    return {first.substr(6, first.find(' ', 6) - 6), test::last_line(r.out)};
  }
  // A job of alice's that holds the whole node until cancelled.
  std::int64_t filler(int n) {
    const auto id = c->submit({"-n", std::to_string(n), "-t", "10", "-o", "/dev/null", "--wrap", "sleep 300"}, &alice);
    c->wait_state(id, {job_state::running});
    return id;
  }
};

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

}  // namespace

TEST_CASE("fctl update, PATCH and aqs-scontrol update are held to the partition's limits as fsub is") {
  setup s(true, 1);
  // fsub refuses what the partition does not allow...
  const auto wide = s.c->cmd(bin().fsub, {"-n", "3", "--wrap", "true"}, &s.alice);
  CHECK(wide.status != 0);
  CHECK_MESSAGE(wide.err.find("MaxCPUsPerJob is 1") != std::string::npos, wide.err);
  const auto longer = s.c->cmd(bin().fsub, {"-n", "1", "-t", "1:00:00", "--wrap", "true"}, &s.alice);
  CHECK(longer.status != 0);
  CHECK_MESSAGE(longer.err.find("MaxTime is") != std::string::npos, longer.err);

  // ... and so does every way of changing a pending job.
  const auto blocker = s.filler(1);
  const auto job = s.c->submit({"-n", "1", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 1"}, &s.alice);
  CHECK(s.c->job(job)->state == job_state::pending);

  const auto unlimited = s.c->cmd(bin().fctl, {"update", std::to_string(job), "-t", "UNLIMITED"}, &s.alice);
  CHECK(unlimited.status != 0);
  CHECK_MESSAGE(unlimited.err.find("UNLIMITED asked, MaxTime is") != std::string::npos, unlimited.err);
  CHECK(one_line(unlimited.err));
  const auto over = s.c->cmd(bin().fctl, {"update", std::to_string(job), "-t", "2:00:00"}, &s.alice);
  CHECK(over.status != 0);
  CHECK_MESSAGE(over.err.find("MaxTime is") != std::string::npos, over.err);
  const auto three = s.c->cmd(bin().fctl, {"update", std::to_string(job), "--min", "3", "--max", "3"}, &s.alice);
  CHECK(three.status != 0);
  CHECK_MESSAGE(three.err.find("3 processors asked, MaxCPUsPerJob is 1") != std::string::npos, three.err);
  CHECK(one_line(three.err));

  const auto [id, token] = s.token(s.alice);
  (void)id;
  auto r = test::http_request(s.web, "PATCH", "/api/v1/jobs/" + std::to_string(job), token,
                              json{{"time_limit", "UNLIMITED"}}.dump());
  CHECK(r.status >= 400);
  CHECK_MESSAGE(r.error().find("MaxTime is") != std::string::npos, r.body);
  r = test::http_request(s.web, "PATCH", "/api/v1/jobs/" + std::to_string(job), token,
                         json{{"min_pe", 3}, {"max_pe", 3}}.dump());
  CHECK(r.status >= 400);
  CHECK_MESSAGE(r.error().find("MaxCPUsPerJob is 1") != std::string::npos, r.body);

  const auto sc = test::run({AQS_SCONTROL_BINARY, "update", "JobId=" + std::to_string(job), "TimeLimit=UNLIMITED"},
                            {{"AQS_SOCKET", s.c->socket()}}, s.alice.uid, s.alice.gid, s.alice.home.string());
  CHECK(sc.status != 0);
  CHECK_MESSAGE(sc.err.find("MaxTime is") != std::string::npos, sc.err);
  const auto sc3 = test::run({AQS_SCONTROL_BINARY, "update", "JobId=" + std::to_string(job), "NumCPUs=3"},
                             {{"AQS_SOCKET", s.c->socket()}}, s.alice.uid, s.alice.gid, s.alice.home.string());
  CHECK(sc3.status != 0);
  CHECK_MESSAGE(sc3.err.find("MaxCPUsPerJob is 1") != std::string::npos, sc3.err);

  // Nothing changed: the job runs on one processor with its 5 minutes.
  const auto now = s.c->job(job);
  REQUIRE(now);
  CHECK(now->max_pe == 1);
  // A change within the limits still goes through.
  const auto ok = s.c->cmd(bin().fctl, {"update", std::to_string(job), "-t", "10"}, &s.alice);
  CHECK_MESSAGE(ok.status == 0, ok.err);
  CHECK(s.c->cmd(bin().fkill, {std::to_string(blocker)}, &s.alice).status == 0);
  const auto ran = s.c->wait_state(job, {job_state::completed, job_state::failed, job_state::timeout});
  CHECK(ran.state == job_state::completed);

}

TEST_CASE("a pending rigid -n 1 job given 3 processors by fctl update runs 3 tasks, or the update is refused") {
  setup s(false, 4);
  const auto blocker = s.filler(4);
  const fs::path out = s.alice.home / "tasks.out";
  const auto job = s.c->submit({"-n", "1", "-o", out.string(), "--wrap", "echo tasks=$SLURM_NTASKS procs=$AQS_NPROCS"},
                               &s.alice);
  const auto r = s.c->cmd(bin().fctl, {"update", std::to_string(job), "--min", "3", "--max", "3"}, &s.alice);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(s.c->cmd(bin().fkill, {std::to_string(blocker)}, &s.alice).status == 0);
  const auto done = s.c->wait_state(job, {job_state::completed, job_state::failed});
  CHECK(done.state == job_state::completed);

  CHECK(slurp(out) == "tasks=3 procs=3\n");

  // A layout that a new size would break is refused with the reason.
  const auto blocker2 = s.filler(4);
  const auto shaped = s.c->submit({"-N", "1", "--ntasks-per-node", "2", "-o", "/dev/null", "--wrap", "true"}, &s.alice);
  const auto refused = s.c->cmd(bin().fctl, {"update", std::to_string(shaped), "--min", "3", "--max", "3"}, &s.alice);
  CHECK(refused.status != 0);
  CHECK_MESSAGE(refused.err.find("its size cannot change") != std::string::npos, refused.err);
  CHECK(one_line(refused.err));
  CHECK(s.c->cmd(bin().fkill, {std::to_string(blocker2), std::to_string(shaped)}, &s.alice).status == 0);
}

TEST_CASE("--export=ALL,V=x sets V in the job's environment") {
  setup s(false, 2);
  const fs::path out = s.alice.home / "export.out";
  const auto job = s.c->submit({"--export=ALL,AQS_T_EXPORTED=from-export,AQS_T_SECOND=two", "-n", "1", "-o",
                                out.string(), "--wrap", "echo \"$AQS_T_EXPORTED $AQS_T_SECOND\""},
                               &s.alice);
  const auto done = s.c->wait_state(job, {job_state::completed, job_state::failed});
  CHECK(done.state == job_state::completed);
  CHECK(slurp(out) == "from-export two\n");
  const auto bad = s.c->cmd(bin().fsub, {"--export=ALL,1BAD=x", "--wrap", "true"}, &s.alice);
  CHECK(bad.status != 0);
  CHECK(one_line(bad.err));
}

TEST_CASE("ftoken --revoke of another user's token id is refused, and the token keeps working") {
  setup s(false, 2);
  const auto [alice_id, alice_token] = s.token(s.alice);
  const auto r = s.c->cmd(AQS_FTOKEN_BINARY, {"--revoke", alice_id}, &s.bob);
  CHECK(r.status != 0);
  CHECK(r.out.find("revoked") == std::string::npos);
  CHECK_MESSAGE(r.err.find("you have no valid token with id " + alice_id) != std::string::npos, r.err);
  CHECK(one_line(r.err));
  CHECK(test::http_request(s.web, "GET", "/api/v1/jobs", alice_token).status == 200);
  // Her own revocation works, and the token is then refused.
  const auto own = s.c->cmd(AQS_FTOKEN_BINARY, {"--revoke", alice_id}, &s.alice);
  CHECK_MESSAGE(own.status == 0, own.err);
  CHECK(test::http_request(s.web, "GET", "/api/v1/jobs", alice_token).status == 401);
  // Root may revoke anyone's.
  const auto [bob_id, bob_token] = s.token(s.bob);
  CHECK(s.c->cmd(AQS_FTOKEN_BINARY, {"--revoke", bob_id}).status == 0);
  CHECK(test::http_request(s.web, "GET", "/api/v1/jobs", bob_token).status == 401);
}
