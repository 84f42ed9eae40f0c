// Unit tests of faucetsd's market rules (server/market.hpp): contracts as
// the API takes them, the owners table, charges in micro-credits, entries
// and the debt-limit rule.
#include <doctest/doctest.h>

#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "server/market.hpp"

using namespace aqs::faucets;
using nlohmann::json;

namespace {

constexpr double k_now = 1'800'000'000;

std::string refusal(const json& j) {
  const auto r = parse_contract(j, k_now);
  REQUIRE(std::holds_alternative<std::string>(r));
  return std::get<std::string>(r);
}

const char* k_owners = R"(# the market's owners
cluster uni-a uni
cluster uni-b uni
cluster lab lab
home alice uni-a
home * lab
limit uni 10
)";

}  // namespace

TEST_CASE("a contract is taken with its defaults, and its terms are worked out against the placement's time") {
  const auto r = parse_contract(json{{"deadline", k_now + 600}, {"max_price", 2.5}, {"value", 100}}, k_now);
  REQUIRE(std::holds_alternative<job_contract>(r));
  const auto c = std::get<job_contract>(r);
  CHECK(c.decay_s == 0);
  CHECK_FALSE(c.best_effort);
  CHECK(parse_contract(to_json(c), k_now) == r);
  const auto t = terms_at(c, k_now + 100);
  CHECK(t.deadline_in_s == 500);
  CHECK(t.max_price == 2.5);
  CHECK(t.value == 100);
}

TEST_CASE("a bad contract gets one clear reason: past deadline, negative numbers, wrong types, unknown fields") {
  const json ok{{"deadline", k_now + 60}, {"max_price", 1}, {"value", 10}};
  auto with = [&](const char* k, json v) {
    json j = ok;
    j[k] = std::move(v);
    return j;
  };
  CHECK(refusal(with("deadline", k_now - 12)) == "the contract's deadline is in the past (12 s ago)");
  CHECK(refusal(with("deadline", k_now)) == "the contract's deadline is in the past (0 s ago)");
  CHECK(refusal(with("max_price", -1)) == "the contract's max_price must be >= 0, not -1");
  CHECK(refusal(with("value", -0.5)) == "the contract's value must be >= 0, not -0.5");
  CHECK(refusal(with("decay_s", -3)) == "the contract's decay_s must be >= 0, not -3");
  CHECK(refusal(with("value", "lots")) == "the contract's value must be a number, not \"lots\"");
  CHECK(refusal(with("best_effort", 1)) == "the contract's best_effort must be true or false");
  CHECK(refusal(with("price", 1)) ==
        "the contract has no field \"price\" (known: deadline, max_price, value, decay_s, best_effort)");
  json missing = ok;
  missing.erase("value");
  CHECK(refusal(missing) == "the contract needs \"value\"");
  CHECK(refusal(json::array()).starts_with("the contract must be an object"));
  for (const auto& r : {refusal(with("deadline", k_now - 12)), refusal(with("max_price", -1))}) {
    CHECK(r.find('\n') == std::string::npos);
  }
}

TEST_CASE("charges are whole micro-credits, rounded; negative or absurd inputs throw") {
  CHECK(charge_micro(0, 5) == 0);
  CHECK(charge_micro(100, 1.5) == 150'000'000);
  CHECK(charge_micro(1, 0.0000004) == 0);
  CHECK(charge_micro(1, 0.0000006) == 1);
  CHECK(charge_micro(3.3333333, 3) == 10'000'000);
  CHECK_THROWS_AS(charge_micro(-1, 1), std::invalid_argument);
  CHECK_THROWS_AS(charge_micro(1, -1), std::invalid_argument);
  CHECK_THROWS_AS(charge_micro(1e12, 1e6), std::invalid_argument);
  CHECK(credits_text(12'500'000) == "12.5");
  CHECK(credits_text(-1) == "-0.000001");
  CHECK(credits_text(0) == "0");
  CHECK(credits_text(-3'000'000) == "-3");
}

TEST_CASE("the owners table: owners of clusters, homes (with a default), limits; bad lines name the file") {
  const auto t = owners_table::parse(k_owners, "owners");
  CHECK(t.owner_of("uni-b") == "uni");
  CHECK_FALSE(t.owner_of("elsewhere"));
  CHECK(t.home_of("alice") == "uni-a");
  CHECK(t.home_of("bob") == "lab");  // "*"
  CHECK(t.payer_of("alice") == "uni");
  CHECK(t.payer_of("bob") == "lab");
  CHECK(t.limit_of("uni") == 10'000'000);
  CHECK_FALSE(t.limit_of("lab"));
  CHECK_THROWS_WITH(owners_table::parse("limit uni -5\n", "f"),
                    "f: entry 1 (limit uni): the limit must be a number of credits >= 0, not '-5'");
  CHECK_THROWS_WITH(owners_table::parse("home alice nowhere\n", "f"),
                    "f: home alice nowhere: no 'cluster nowhere OWNER' line names its owner");
  CHECK_THROWS_WITH(owners_table::parse("cluster a x\ncluster a y\n", "f"), "f: entry 2 (cluster a): the cluster has two owners");
  CHECK_THROWS_WITH(owners_table::parse("owner a x\n", "f"),
                    "f: entry 1 (owner a): expected cluster, home or limit first, not 'owner'");
  CHECK_THROWS_AS(owners_table::parse("cluster a\n", "f"), std::runtime_error);
}

TEST_CASE("an entry moves processor-seconds x price from the home's owner to the running cluster's owner") {
  const auto t = owners_table::parse(k_owners, "owners");
  std::string why;
  const auto e = entry_for(t, 7, "alice", "lab", 120.5, 2, &why);
  REQUIRE(e);
  CHECK(e->job_id == 7);
  CHECK(e->payer == "uni");
  CHECK(e->payee == "lab");
  CHECK(e->home_cluster == "uni-a");
  CHECK(e->amount_micro == 241'000'000);
  // On another cluster of the same owner: nothing moves, and why.
  CHECK_FALSE(entry_for(t, 8, "alice", "uni-b", 10, 2, &why));
  CHECK(why == "it ran on a cluster of its home's owner 'uni'");
  CHECK_FALSE(entry_for(t, 9, "bob", "elsewhere", 10, 2, &why));
  CHECK(why == "cluster 'elsewhere' has no owner in the owners table");
  CHECK_FALSE(entry_for(owners_table::parse("cluster lab lab\n", "o"), 9, "carol", "lab", 10, 2, &why));
  CHECK(why == "user 'carol' has no home cluster in the owners table");
}

TEST_CASE("balances of any run of entries sum to exactly zero") {
  const auto t = owners_table::parse(k_owners, "owners");
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> secs(0, 5000), price(0, 7);
  std::map<std::string, std::int64_t> balance;
  const char* users[] = {"alice", "bob"};
  const char* clusters[] = {"uni-a", "uni-b", "lab"};
  int entries = 0;
  for (int i = 0; i < 1000; ++i) {
    std::string why;
    const auto e = entry_for(t, i, users[i % 2], clusters[i % 3], secs(rng), price(rng), &why);
    if (!e) continue;
    ++entries;
    balance[e->payee] += e->amount_micro;
    balance[e->payer] -= e->amount_micro;
  }
  CHECK(entries > 300);
  std::int64_t total = 0;
  for (const auto& [who, b] : balance) total += b;
  CHECK(total == 0);
}

TEST_CASE("an owner in debt beyond its limit is refused, in one line, by other owners' clusters only") {
  const auto t = owners_table::parse(k_owners, "owners");
  CHECK_FALSE(debt_refusal(t, "alice", "lab", -10'000'000));  // at the limit: still served
  const auto why = debt_refusal(t, "alice", "lab", -10'000'001);
  REQUIRE(why);
  CHECK(*why == "cluster lab refuses work from owner 'uni': 10.000001 credits in debt, beyond its limit of 10");
  CHECK_FALSE(debt_refusal(t, "alice", "uni-b", -50'000'000));  // its own owner's cluster
  CHECK_FALSE(debt_refusal(t, "bob", "uni-a", -50'000'000));    // lab has no limit
}
