// faucetsd's market end to end (issue 35): a real faucetsd with --policy
// contract and an owners table, two real AQS clusters (each aqsd with its
// private PostgreSQL and a real agent) of different speed and rate joined
// over TLS, jobs submitted with the real fsub: the award to the bid that
// meets the deadline, refusal and best effort, bad contracts, the ledger
// balancing to zero with every entry naming its job (GET /api/v1/ledger and
// fcredits), what another user and a caller without a token see, and an
// owner in debt beyond its limit refused in one line.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <fcntl.h>
#include <functional>
#include <set>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

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

// One faucetsd (policy contract, an owners table) in a directory of its own.
class market_site : public aqs::test::faucets_site {
public:
  market_site(const std::vector<std::string>& clusters, const std::string& owners)
      : faucets_site(clusters, "aqs-market") {
    write_file(dir() / "owners", owners);
    start({"--owners", (dir() / "owners").string(), "--policy", "contract"});
  }
  std::vector<std::string> join_args(const std::string& name, double speed, double rate) const {
    // The speed and the rate as an administrator writes them: aqs.conf lines.
    write_file(dir() / (name + ".conf"), "FaucetsSpeed=" + std::to_string(speed) + "\nFaucetsRate=" +
                                             std::to_string(rate) + "\nPartitionName=all Nodes=ALL Default=YES\n");
    std::vector<std::string> a = faucets_site::join_args(name);
    a.insert(a.end(), {"--config", (dir() / (name + ".conf")).string()});
    return a;
  }
};

run_result as_user(const market_site& site, const std::string& token, const aqs::test::test_user& u,
                   std::vector<std::string> argv) {
  std::vector<std::string> full{argv.front(), "--faucets", site.url(), "--faucets-ca", site.ca()};
  full.insert(full.end(), argv.begin() + 1, argv.end());
  return run(full, {{"AQS_TOKEN", token}}, u.uid, u.gid, u.home.string());
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

std::int64_t submitted_id(const run_result& r) {
  REQUIRE_MESSAGE(r.status == 0, r.err);
  REQUIRE_MESSAGE(r.out.rfind("Submitted job ", 0) == 0, r.out);
  return std::stoll(r.out.substr(std::string("Submitted job ").size()));
}

cluster::options one_node(int procs, std::vector<std::string> aqsd_args) {
  cluster::options o;
  o.nodes = 1;
  o.procs_per_node = procs;
  o.aqsd_args = std::move(aqsd_args);
  return o;
}

}  // namespace

TEST_CASE("contracts are awarded or refused by their bids, and finished jobs balance the owners' ledger to zero") {
  // fast (lab's): speed 2, rate 4; slow (uni's, every user's home): speed 1,
  // rate 0.5. uni may go 3 credits into debt.
  market_site site({"fast", "slow"}, "cluster fast lab\ncluster slow uni\nhome * slow\nlimit uni 3\n");
  cluster fast(one_node(2, site.join_args("fast", 2.0, 4.0)));
  cluster slow(one_node(2, site.join_args("slow", 1.0, 0.5)));
  fast.wait_nodes_up(1);
  slow.wait_nodes_up(1);
  const auto alice = fast.user("aqs-market-a");
  const auto bob = fast.user("aqs-market-b");
  const std::string token = site.token_for(&alice);
  const std::string bob_token = site.token_for(&bob);
  const std::string root_token = site.token_for(nullptr);
  site.wait_up(token, 2);
  auto c = site.client(token);
  auto root = site.client(root_token);
  const auto fsub = [&](std::vector<std::string> args) {
    args.insert(args.begin(), aqs::test::bin().fsub);
    return as_user(site, token, alice, std::move(args));
  };

  // A time limit of 60 s: fast bids done in ~30 s, slow in ~60 s.
  // 1. Both meet a 10-minute deadline: the cheaper bid (slow) wins; it is
  //    alice's home's owner's: no charge.
  const auto cheap = submitted_id(fsub({"-n", "1", "-t", "1", "--deadline", "now+600", "--max-price", "10", "--value",
                                        "5", "--wrap", "true"}));
  auto j = wait_job(c, cheap, [](const json& x) { return x["state"] == "COMPLETED"; });
  CHECK(j["cluster"] == "slow");
  bool why_given = false;
  for (const auto& e : c.history(cheap)) {
    if (e["event"] == "dispatched") {
      why_given = e["detail"].get<std::string>().find("by contract: contract: done in about") != std::string::npos;
    }
  }
  CHECK(why_given);

  // 2. Only fast meets a 45 s deadline: awarded to fast, charged uni -> lab.
  const auto urgent = submitted_id(fsub({"-n", "1", "-t", "1", "--deadline", "now+45", "--max-price", "100", "--value",
                                         "50", "--wrap", "sleep 2"}));
  // 3. Nobody can finish by a 15 s deadline: refused, in one line, unless best effort.
  const run_result late = fsub({"-n", "1", "-t", "1", "--deadline", "now+15", "--max-price", "100", "--value", "50",
                                "--wrap", "true"});
  CHECK(late.status == 1);
  CHECK_MESSAGE(late.err.find("refused: contract: no cluster can finish it by its deadline") != std::string::npos,
                late.err);
  CHECK(std::count(late.err.begin(), late.err.end(), '\n') == 1);
  const auto anyway = submitted_id(fsub({"-n", "1", "-t", "1", "--deadline", "now+15", "--max-price", "100",
                                         "--value", "50", "--best-effort", "--wrap", "sleep 1"}));
  j = wait_job(c, urgent, [](const json& x) { return x["state"] == "COMPLETED"; });
  CHECK(j["cluster"] == "fast");
  j = wait_job(c, anyway, [](const json& x) { return x["state"] == "COMPLETED"; });
  CHECK(j["cluster"] == "fast");  // the earliest: value 0 anywhere after the deadline, fast is soonest

  // 4. Bad contracts: one line, non-zero, nothing queued.
  const auto before = c.list_jobs(true).size();
  run_result bad = fsub({"-n", "1", "--deadline", "2020-01-01", "--max-price", "1", "--value", "1", "--wrap", "true"});
  CHECK(bad.status == 1);
  CHECK_MESSAGE(bad.err.rfind("fsub: the contract's deadline is in the past (", 0) == 0, bad.err);
  bad = fsub({"-n", "1", "--deadline", "now+60", "--max-price", "-1", "--value", "1", "--wrap", "true"});
  CHECK(bad.status == 2);
  CHECK(bad.err == "fsub: --max-price must be a number >= 0, not '-1'\n");
  bad = fsub({"-n", "1", "--deadline", "now+60", "--wrap", "true"});
  CHECK(bad.status == 2);
  CHECK(bad.err == "fsub: a contract needs --deadline, --max-price and --value together\n");
  // Straight to the API (no fsub checks): a negative value is the server's 400.
  try {
    c.call("POST", "/api/v1/jobs",
           json{{"cluster", "auto"},
                {"job", {{"name", "x"}, {"argv", {"/bin/true"}}, {"workdir", alice.home.string()}, {"min_pe", 1},
                         {"max_pe", 1}}},
                {"contract", {{"deadline", 4e9}, {"max_price", 1}, {"value", -3}}}});
    FAIL("a negative value was accepted");
  } catch (const fc::error& e) {
    CHECK(e.http_status() == 400);
    CHECK(std::string(e.what()) == "the contract's value must be >= 0, not -3");
  }
  CHECK(c.list_jobs(true).size() == before);

  // 5. The ledger: the two jobs on fast, each entry naming its job; zero sum.
  json ledger;
  for (int i = 0; i < 100; ++i) {
    ledger = root.call("GET", "/api/v1/ledger");
    if (ledger["entries"].size() == 2) break;
    std::this_thread::sleep_for(200ms);
  }
  REQUIRE_MESSAGE(ledger["entries"].size() == 2, ledger.dump() << "\n" << site.log());
  std::set<std::int64_t> charged;
  std::int64_t sum = 0;
  for (const auto& e : ledger["entries"]) {
    charged.insert(e["job_id"].get<std::int64_t>());
    CHECK(e["payer"] == "uni");
    CHECK(e["payee"] == "lab");
    CHECK(e["cluster"] == "fast");
    CHECK(e["proc_seconds"].get<double>() > 0.5);  // it slept 1 or 2 s on 1 processor
    CHECK(e["proc_seconds"].get<double>() < 60);
    CHECK(e["price"].get<double>() >= 4.0);  // rate 4, scaled up by load
    CHECK(e["amount_micro"].get<std::int64_t>() > 0);
  }
  CHECK(charged == std::set<std::int64_t>{urgent, anyway});
  for (const auto& [owner, b] : ledger["balances"].items()) sum += b["balance_micro"].get<std::int64_t>();
  CHECK(sum == 0);
  CHECK(ledger["total_micro"] == 0);
  CHECK(ledger["balances"]["uni"]["balance_micro"].get<std::int64_t>() < -3'000'000);  // beyond the limit now
  // The job's own history names the charge.
  bool charged_event = false;
  for (const auto& e : c.history(urgent)) charged_event = charged_event || e["event"] == "charged";
  CHECK(charged_event);

  // fcredits: the same, for people and as JSON.
  const run_result credits = as_user(site, root_token, alice, {FCREDITS_BINARY, "--entries"});
  REQUIRE_MESSAGE(credits.status == 0, credits.err);
  CHECK(credits.out.find("(total)") != std::string::npos);
  CHECK(credits.out.find(" " + std::to_string(urgent) + " ") != std::string::npos);
  const run_result credits_json = as_user(site, token, alice, {FCREDITS_BINARY, "--json"});
  REQUIRE_MESSAGE(credits_json.status == 0, credits_json.err);
  CHECK(json::parse(credits_json.out)["total_micro"] == 0);
  CHECK(json::parse(credits_json.out)["entries"].size() == 2);  // alice's own jobs

  // Another (unprivileged) user sees the balances, not alice's entries;
  // no token: 401, nothing shown.
  const run_result bobs = as_user(site, bob_token, bob, {FCREDITS_BINARY, "--json"});
  REQUIRE_MESSAGE(bobs.status == 0, bobs.err);
  CHECK(json::parse(bobs.out)["entries"].empty());
  CHECK(json::parse(bobs.out)["balances"].contains("uni"));
  const run_result nobody = run({FCREDITS_BINARY, "--faucets", site.url(), "--faucets-ca", site.ca()},
                                {{"AQS_TOKEN", "forged.token"}}, bob.uid, bob.gid, bob.home.string());
  CHECK(nobody.status == 1);
  CHECK(nobody.err.rfind("fcredits: the faucets server refused the token", 0) == 0);

  // 6. uni is in debt beyond its limit: lab's fast refuses alice's work, in
  //    one line, at once; uni's own slow still runs it.
  const run_result refused = fsub({"-M", "fast", "-n", "1", "--wrap", "true"});
  CHECK(refused.status == 1);
  CHECK_MESSAGE(refused.err.rfind("fsub: cluster fast refuses work from owner 'uni': ", 0) == 0, refused.err);
  CHECK(refused.err.find("beyond its limit of 3") != std::string::npos);
  CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
  const auto home = submitted_id(fsub({"-n", "1", "-t", "1", "--deadline", "now+600", "--max-price", "100",
                                       "--value", "5", "--wrap", "true"}));
  j = wait_job(c, home, [](const json& x) { return x["state"] == "COMPLETED"; });
  CHECK(j["cluster"] == "slow");
  CHECK(root.call("GET", "/api/v1/ledger")["entries"].size() == 2);  // nothing new moved
}
