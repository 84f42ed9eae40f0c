// Integration tests of the accounting store against the real test PostgreSQL:
// the tree's rules refuse bad changes with one line and write nothing, every
// change is audited, usage is written once and summed per user and account.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "core/accounts.hpp"
#include "store/account_store.hpp"
#include "test_pg.hpp"

using namespace aqs;

namespace {

core::account acct(std::string name, std::string parent, std::uint32_t shares = 1) {
  core::account a;
  a.name = std::move(name);
  a.parent = std::move(parent);
  a.shares = shares;
  return a;
}

core::user_association member(std::string user, std::string account) {
  core::user_association u;
  u.user = std::move(user);
  u.account = std::move(account);
  return u;
}

// Adds the accounts (name, parent), then the users' associations (user,
// account), as "admin".
void add_all(store::account_store& s, const std::vector<std::pair<std::string, std::string>>& accounts,
             const std::vector<std::pair<std::string, std::string>>& users) {
  for (const auto& [name, parent] : accounts) s.add_account(acct(name, parent), "admin");
  for (const auto& [user, account] : users) s.add_user(member(user, account), false, "admin");
}

store::time_point at_s(std::int64_t s) { return store::time_point{std::chrono::seconds{s}}; }

std::int64_t count(const std::string& conninfo, const std::string& sql) {
  pqxx::connection c(conninfo);
  pqxx::read_transaction tx(c);
  return tx.exec1(sql)[0].as<std::int64_t>();
}

}  // namespace

TEST_CASE("a new database has the root account and the normal QOS, and nothing else") {
  test::test_database db;
  store::account_store s(db.conninfo());
  const core::account_tree t = s.load();
  REQUIRE(t.accounts.size() == 1);
  CHECK(t.accounts[0].name == "root");
  CHECK(t.accounts[0].parent.empty());
  REQUIRE(t.qos_list.size() == 1);
  CHECK(t.qos_list[0].name == "normal");
  CHECK(t.associations.empty());
  CHECK_FALSE(core::validate(t));
}

TEST_CASE("accounts, users and QOS round-trip with their limits, and every change is audited") {
  test::test_database db;
  store::account_store s(db.conninfo());
  core::account physics = acct("physics", "root", 40);
  REQUIRE(core::set_limit(physics.lim, "GrpTRES", "cpu=64") == std::optional<std::string>(""));
  physics.description = "physics \"dept\"";
  s.add_account(physics, "root");
  s.add_account(acct("theory", "physics"), "root");
  core::user_association alice = member("alice", "physics");
  REQUIRE(core::set_limit(alice.lim, "MaxJobs", "4") == std::optional<std::string>(""));
  s.add_user(alice, false, "admin1");
  s.add_user(member("alice", "theory"), false, "admin1");
  core::qos high;
  high.name = "high";
  high.priority = 100;
  REQUIRE(core::set_limit(high.lim, "MaxTRESPerUser", "cpu=8") == std::optional<std::string>(""));
  s.add_qos(high, "admin2");

  core::account_tree t = s.load();
  const core::account_index idx(t);
  const core::account& p = t.accounts[idx.account_of("physics")];
  CHECK(p.shares == 40u);
  CHECK(p.lim.grp_cpus == 64u);
  CHECK_FALSE(p.lim.max_jobs);
  CHECK(p.description == "physics \"dept\"");
  CHECK(t.associations[idx.association_of("alice", "physics")].lim.max_jobs == 4u);
  CHECK(t.default_account.at("alice") == "physics");  // the first account
  CHECK(t.qos_list[idx.qos_of("high")].lim.max_cpus_per_user == 8u);

  s.set_default_account("alice", "theory", "admin1");
  physics.shares = 10;
  s.modify_account(physics, "admin3");
  t = s.load();
  CHECK(t.default_account.at("alice") == "theory");
  CHECK(t.accounts[core::account_index(t).account_of("physics")].shares == 10u);

  auto log = s.audit(10);
  REQUIRE(log.size() == 7);
  CHECK(log[0].actor == "admin3");
  CHECK(log[0].action == "modify");
  CHECK(log[0].entity == "account");
  CHECK(log[0].name == "physics");
  CHECK(log[0].detail.find("\"shares\": 10") != std::string::npos);
  CHECK(log[1].name == "alice@theory");
  CHECK(log.back().action == "add");
  CHECK(log.back().detail.find("\"GrpTRES_cpu\": 64") != std::string::npos);
  CHECK(log[0].at >= log.back().at);
}

TEST_CASE("bad changes are refused with one line and change nothing, not even the audit trail") {
  test::test_database db;
  store::account_store s(db.conninfo());
  add_all(s, {{"a", "root"}, {"b", "a"}}, {{"carol", "b"}});
  const core::account_tree before = s.load();
  const std::int64_t audited = count(db.conninfo(), "SELECT count(*) FROM accounting_audit");

  auto refused = [&](auto&& change, const std::string& words) {
    try {
      change();
      FAIL("not refused: " << words);
    } catch (const store::account_refused& e) {
      const std::string what = e.what();
      CHECK(what.find(words) != std::string::npos);
      CHECK(what.find('\n') == std::string::npos);
    }
  };
  refused([&] { s.modify_account(acct("a", "b"), "admin"); }, "cycle");
  refused([&] { s.add_account(acct("c", "nowhere"), "admin"); }, "unknown parent nowhere");
  refused([&] { s.add_account(acct("a", "root"), "admin"); }, "already exists");
  refused([&] { s.add_user(member("dave", "nowhere"), false, "admin"); }, "unknown account");
  refused([&] { s.delete_account("b", "admin"); }, "still has user carol");
  refused([&] { s.delete_account("a", "admin"); }, "still has sub-account b");
  refused([&] { s.delete_account("root", "admin"); }, "root");
  refused([&] { s.set_default_account("carol", "a", "admin"); }, "not in account a");
  core::account absurd = acct("a", "root");
  absurd.lim.grp_cpus = core::k_max_limit_cpus + 1;
  refused([&] { s.modify_account(absurd, "admin"); }, "GrpTRES");
  CHECK_THROWS_AS(s.modify_account(acct("ghost", "root"), "admin"), store::not_found);
  // A change without an actor is never written.
  CHECK_THROWS_AS(s.add_account(acct("anon", "root"), ""), std::invalid_argument);

  const core::account_tree after = s.load();
  CHECK(after.accounts.size() == before.accounts.size());
  CHECK(after.associations.size() == before.associations.size());
  CHECK(count(db.conninfo(), "SELECT count(*) FROM accounting_audit") == audited);
}

TEST_CASE("the database itself refuses limits past core's bounds and accepts the bounds") {
  test::test_database db;
  pqxx::connection c(db.conninfo());
  auto try_insert = [&](const std::string& col, std::int64_t v) {
    try {
      pqxx::work tx(c);
      tx.exec_params("INSERT INTO accounts (name, parent, " + col + ") VALUES ('x', 'root', $1)", v);
      tx.abort();
      return true;
    } catch (const pqxx::check_violation&) {
      return false;
    }
  };
  // Each limit column takes core's bound and refuses one past it.
  const std::vector<std::pair<std::string, std::int64_t>> bounds = {
      {"grp_cpus", core::k_max_limit_cpus},       {"max_cpus_per_user", core::k_max_limit_cpus},
      {"max_jobs", core::k_max_limit_count},      {"max_submit_jobs", core::k_max_limit_count},
      {"max_wall_s", core::k_max_limit_wall_s},   {"shares", core::k_max_shares}};
  for (const auto& [col, bound] : bounds) {
    CHECK_MESSAGE(try_insert(col, bound), col);
    CHECK_FALSE_MESSAGE(try_insert(col, bound + 1), col);
  }
  CHECK_FALSE(try_insert("max_jobs", -1));
  // The audit trail is append-only.
  store::account_store s(db.conninfo());
  s.add_account(acct("a", "root"), "admin");
  pqxx::work tx(c);
  CHECK_THROWS(tx.exec0("DELETE FROM accounting_audit"));
}

TEST_CASE("deleting a user's default account is refused while it has others; the last one goes with its default") {
  test::test_database db;
  store::account_store s(db.conninfo());
  add_all(s, {{"a", "root"}, {"b", "root"}}, {{"erin", "a"}, {"erin", "b"}});
  CHECK_THROWS_AS(s.delete_user("erin", "a", "admin"), store::account_refused);
  s.delete_user("erin", "b", "admin");
  s.delete_user("erin", "a", "admin");
  const core::account_tree t = s.load();
  CHECK(t.associations.empty());
  CHECK(t.default_account.empty());
  s.delete_account("b", "admin");
  CHECK(s.audit(1).front().action == "delete");
}

TEST_CASE("a job's usage is written once and summed per user and account over a period") {
  test::test_database db;
  store::account_store s(db.conninfo());
  store::usage_record r;
  r.job_id = 7;
  r.user = "alice";
  r.account = "physics";
  r.start = at_s(1000);
  r.end = at_s(2000);
  r.cpu_seconds = 4000;
  CHECK(s.record_usage(r));
  r.cpu_seconds = 99999;  // a second charge of the same job is ignored
  CHECK_FALSE(s.record_usage(r));
  store::usage_record r2 = r;
  r2.job_id = 8;
  r2.end = at_s(3000);
  r2.cpu_seconds = 500;
  r2.gpu_seconds = 100;
  CHECK(s.record_usage(r2));
  store::usage_record r3 = r2;
  r3.job_id = 9;
  r3.user = "bob";
  r3.end = at_s(5000);
  r3.cpu_seconds = 10;
  CHECK(s.record_usage(r3));

  auto totals = s.usage_between(at_s(0), at_s(4000));
  REQUIRE(totals.size() == 1);
  CHECK(totals[0].user == "alice");
  CHECK(totals[0].jobs == 2);
  CHECK(totals[0].cpu_seconds == doctest::Approx(4500));
  CHECK(totals[0].gpu_seconds == doctest::Approx(100));
  auto since = s.usage_since(at_s(2500));
  REQUIRE(since.size() == 2);
  CHECK(since[0].job_id == 8);
  CHECK(since[0].end == at_s(3000));
  CHECK(since[0].start == at_s(1000));

  store::usage_record bad = r;
  bad.job_id = 10;
  bad.cpu_seconds = -1;
  CHECK_THROWS_AS(s.record_usage(bad), std::invalid_argument);
  bad.cpu_seconds = 1;
  bad.end = at_s(10);
  CHECK_THROWS_AS(s.record_usage(bad), std::invalid_argument);
}
