// accounting: accounts, limits, usage and fair share through a real aqsd
// (issue 32). aqs-sacctmgr changes the tree as root only, and a bad change
// is one line that changes nothing; a user's submission names an account
// they are in or is refused in one line; MaxJobs holds the next job with
// Slurm's reason until one ends; a finished job's processor-seconds are
// written; with PriorityWeightFairshare a user who has used less starts
// ahead of one who has used more, under easy and under equipartition.
// Waits are generous bounds, never timings.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <pqxx/pqxx>

#include "e2e.hpp"

namespace {

constexpr const char* k_ann = "aqs-acct-ann";
constexpr const char* k_bob = "aqs-acct-bob";

struct temp_file {
  std::string path;
  ~temp_file() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  return s;
}

struct setup {
  temp_file conf_file;
  test::test_database db;
  std::unique_ptr<test::cluster> c;
  test::test_user ann, bob;
  setup(const std::string& conf, std::string policy = "equipartition", int procs = 2) {
    auto o = test::nodes_of(db, 1, procs);
    o.policy = std::move(policy);
    char tmpl[] = "/tmp/aqs-acct-conf-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, conf.data(), conf.size()) == static_cast<ssize_t>(conf.size()));
    ::close(fd);
    ::chmod(tmpl, 0644);
    conf_file.path = tmpl;
    o.aqsd_args = {"--config", conf_file.path};
    c = std::make_unique<test::cluster>(o);
    ann = c->user(k_ann);
    bob = c->user(k_bob);
  }
  test::run_result sacctmgr(std::vector<std::string> args, const test::test_user* as = nullptr) {
    return c->cmd(AQS_SACCTMGR_BINARY, std::move(args), as);
  }
  void ok(std::vector<std::string> args) {
    const auto r = sacctmgr(args);
    INFO(r.err);
    REQUIRE(r.status == 0);
  }
  test::run_result fsub_as(const test::test_user& u, std::vector<std::string> args) {
    return c->cmd(test::bin().fsub, std::move(args), &u, u.home.string());
  }
  std::string accounts_listing() { return sacctmgr({"-n", "-P", "show", "account", "format=account"}).out; }
};

}  // namespace

TEST_CASE("accounting: sacctmgr changes accounts as root only; bad changes are one line and change nothing") {
  setup s("AccountingStorageEnforce=associations,limits\n");
  s.ok({"-i", "add", "account", "physics", "Fairshare=2", "Description=physicists"});
  s.ok({"-i", "add", "account", "chem"});
  s.ok({"-i", "add", "user", s.ann.name, "Account=physics"});
  // What workflow engines run before they submit (Snakemake's Slurm executor).
  const auto listed = s.sacctmgr({"-n", "-s", "list", "user", s.ann.name, "format=account%20"});
  INFO(listed.err);
  CHECK(listed.status == 0);
  CHECK(trim(listed.out) == "physics");
  const std::string before = s.accounts_listing();
  CHECK(before.find("physics") != std::string::npos);

  // A local user cannot change the tree.
  const auto evil = s.sacctmgr({"-i", "add", "account", "evil"}, &s.ann);
  CHECK(evil.status != 0);
  CHECK(evil.err.find("only root") != std::string::npos);
  // Bad input: a cycle, an absurd limit, an unknown account; each one line, nothing changed.
  s.ok({"-i", "add", "account", "sub", "Parent=physics"});
  const std::string with_sub = s.accounts_listing();
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"-i", "modify", "account", "physics", "set", "Parent=sub"},
           {"-i", "add", "account", "huge", "GrpTRES=cpu=-5"},
           {"-i", "add", "user", s.bob.name, "Account=nosuch"},
           {"-i", "modify", "account", "physics", "set", "MaxJobs=many"}}) {
    const auto r = s.sacctmgr(bad);
    CAPTURE(bad.back());
    CHECK(r.status != 0);
    CHECK(!r.err.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(s.accounts_listing() == with_sub);
  }
  // Every change is audited: who, what.
  pqxx::connection pg(s.db.conninfo());
  pqxx::work tx(pg);
  const auto n = tx.exec1("SELECT count(*) FROM accounting_audit WHERE actor = 'root'")[0].as<long>();
  CHECK(n >= 4);
}

TEST_CASE("accounting: accounts at submission, MaxJobs with Slurm's reason, usage written at the end") {
  setup s("AccountingStorageEnforce=associations,limits\n", "equipartition", 4);
  s.ok({"-i", "add", "account", "physics"});
  s.ok({"-i", "add", "account", "chem"});
  s.ok({"-i", "add", "user", s.ann.name, "Account=physics", "MaxJobs=1"});

  const auto wrong = s.fsub_as(s.ann, {"-A", "chem", "-o", "/dev/null", "--wrap", "true"});
  CHECK(wrong.status != 0);
  CHECK(wrong.err.find("not in account chem") != std::string::npos);
  CHECK(std::count(wrong.err.begin(), wrong.err.end(), '\n') == 1);
  const auto none = s.fsub_as(s.bob, {"-o", "/dev/null", "--wrap", "true"});
  CHECK(none.status != 0);
  CHECK(none.err.find("has no account") != std::string::npos);

  const auto first = s.c->submit({"-o", "/dev/null", "--wrap", "sleep 600"}, &s.ann, s.ann.home.string());
  const auto second = s.c->submit({"-o", "/dev/null", "--wrap", "sleep 1"}, &s.ann, s.ann.home.string());
  s.c->wait_state(first, {job_state::running});
  // Room for it, but its association's MaxJobs is full.
  auto held = s.c->job(second);
  REQUIRE(held);
  CHECK(held->state == job_state::pending);
  CHECK(held->reason.value_or("") == "AssocMaxJobsLimit");
  std::this_thread::sleep_for(2s);
  CHECK(s.c->job(second)->state == job_state::pending);
  s.c->cmd(test::bin().fkill, {std::to_string(first)}, &s.ann);
  s.c->wait_state(second, {job_state::completed}, 120s);

  // Each ended job's processor-seconds, charged to its account.
  pqxx::connection pg(s.db.conninfo());
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  long rows = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    pqxx::work tx(pg);
    rows = tx.exec1("SELECT count(*) FROM usage_records WHERE account = 'physics' AND cpu_seconds > 0")[0].as<long>();
    if (rows >= 2) break;
    std::this_thread::sleep_for(200ms);
  }
  CHECK(rows == 2);

  // The reports: sreport's layout for root; fusage shows a user their own rows only.
  const auto report = s.c->cmd(AQS_SREPORT_BINARY, {"-P", "-n", "-t", "seconds", "cluster", "AccountUtilizationByUser",
                                                    "start=today", "end=now"});
  INFO(report.err);
  CHECK(report.status == 0);
  CHECK(report.out.find("aqs|physics|||") != std::string::npos);
  CHECK(report.out.find("aqs|physics|" + s.ann.name + "|" + s.ann.name + "|") != std::string::npos);
  const auto mine = s.c->cmd(AQS_FUSAGE_BINARY, {"--csv"}, &s.ann);
  CHECK(mine.status == 0);
  CHECK(mine.out.find(s.ann.name + ",physics,2,") != std::string::npos);
  const auto others = s.c->cmd(AQS_FUSAGE_BINARY, {"--csv"}, &s.bob);
  CHECK(others.status == 0);
  CHECK(others.out.find(s.ann.name) == std::string::npos);
  const auto bad = s.c->cmd(AQS_FUSAGE_BINARY, {"-S", "someday"}, &s.bob);
  CHECK(bad.status != 0);
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
}

TEST_CASE("accounting: fair share starts the user who used less first, under easy and equipartition") {
  for (const char* policy : {"easy", "equipartition"}) {
    CAPTURE(policy);
    setup s("AccountingStorageEnforce=associations\nPriorityWeightFairshare=100000\nPriorityCalcPeriod=0:01\n"
            "PriorityDecayHalfLife=0\n",
            policy, 2);
    s.ok({"-i", "add", "account", "lab"});
    s.ok({"-i", "add", "user", s.ann.name, "Account=lab"});
    s.ok({"-i", "add", "user", s.bob.name, "Account=lab"});
    // Ann fills the queue; her first jobs run and she accrues usage.
    std::vector<std::int64_t> anns;
    for (int i = 0; i < 12; ++i) {
      anns.push_back(s.c->submit({"-o", "/dev/null", "--wrap", "sleep 2"}, &s.ann, s.ann.home.string()));
    }
    s.c->wait_state(anns[0], {job_state::running});
    std::this_thread::sleep_for(3s);  // usage accrues; at least one priority period passes
    std::vector<std::int64_t> still_pending;
    for (auto id : anns) {
      if (s.c->job(id)->state == job_state::pending) still_pending.push_back(id);
    }
    REQUIRE(still_pending.size() >= 4);
    std::vector<std::int64_t> bobs;
    for (int i = 0; i < 3; ++i) {
      bobs.push_back(s.c->submit({"-o", "/dev/null", "--wrap", "sleep 1"}, &s.bob, s.bob.home.string()));
    }
    // sprio shows why: bob's fair-share factor is above ann's.
    const auto prio = s.c->cmd(AQS_SPRIO_BINARY, {"-l"});
    INFO(prio.out, prio.err);
    CHECK(prio.status == 0);
    for (auto id : bobs) s.c->wait_state(id, {job_state::completed}, 180s);
    // Every job of bob's started before the last of ann's that were waiting when he submitted.
    std::string bob_last, ann_last;
    for (auto id : bobs) bob_last = std::max(bob_last, s.c->job(id)->start_time.value_or(""));
    std::size_t ann_started_before = 0;
    for (auto id : still_pending) {
      const auto j = s.c->job(id);
      if (j->start_time && *j->start_time < bob_last) ++ann_started_before;
    }
    // Ann's jobs that started while bob's waited: at most the ones already
    // deciding when he submitted (one per processor).
    CHECK(ann_started_before <= 2);
    const auto share = s.c->cmd(AQS_SSHARE_BINARY, {"-P"});
    CHECK(share.status == 0);
    CHECK(share.out.find(s.ann.name) != std::string::npos);
    s.c->cmd(test::bin().fkill, {"-u", s.ann.name});
  }
}

TEST_CASE("accounting: after kill -9 of aqsd a held job stays held, the running one still counts and is charged once") {
  setup s("AccountingStorageEnforce=associations,limits\n", "equipartition", 4);
  s.ok({"-i", "add", "account", "physics"});
  s.ok({"-i", "add", "user", s.ann.name, "Account=physics", "MaxJobs=1"});
  const auto first = s.c->submit({"-o", "/dev/null", "--wrap", "sleep 600"}, &s.ann, s.ann.home.string());
  const auto second = s.c->submit({"-o", "/dev/null", "--wrap", "sleep 1"}, &s.ann, s.ann.home.string());
  s.c->wait_state(first, {job_state::running});
  REQUIRE(s.c->job(second)->reason.value_or("") == "AssocMaxJobsLimit");
  s.c->kill_aqsd();
  s.c->start_aqsd();
  s.c->wait_nodes_up(1);
  // The recovered running job counts against MaxJobs again: the other waits.
  std::this_thread::sleep_for(2s);
  const auto held = s.c->job(second);
  REQUIRE(held);
  CHECK(held->state == job_state::pending);
  CHECK(held->reason.value_or("") == "AssocMaxJobsLimit");
  CHECK(s.c->job(first)->state == job_state::running);
  s.c->cmd(test::bin().fkill, {std::to_string(first)}, &s.ann);
  s.c->wait_state(second, {job_state::completed}, 120s);
  pqxx::connection pg(s.db.conninfo());
  long rows = 0;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    pqxx::work tx(pg);
    rows = tx.exec1("SELECT count(*) FROM usage_records WHERE account = 'physics'")[0].as<long>();
    if (rows >= 2) break;
    std::this_thread::sleep_for(200ms);
  }
  CHECK(rows == 2);
  pqxx::work tx(pg);
  // The first job (one processor) was charged from its start, across the restart.
  const double charged = tx.exec1("SELECT cpu_seconds FROM usage_records WHERE job_id = " + std::to_string(first))[0].as<double>();
  CHECK(charged >= 2.0);
}
