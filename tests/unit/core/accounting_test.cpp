// Unit tests of accounting's pure rules: the account tree, usage integrals,
// fair share, the multifactor priority and how the policies order by it, limits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/accounting.hpp"
#include "core/accounts.hpp"
#include "core/fairshare.hpp"
#include "core/limits.hpp"
#include "core/priority.hpp"
#include "core/scheduler.hpp"
#include "core/usage.hpp"
#include "core_jobs.hpp"

using namespace aqs::core;
using namespace aqs::core::test;

namespace {

account acct(std::string name, std::string parent, std::uint32_t shares = 1) {
  return {.name = std::move(name),
          .parent = std::move(parent),
          .shares = shares,
          .lim = {},
          .description = {},
          .organization = {}};
}

user_association member(std::string user, std::string account, std::uint32_t shares = 1) {
  return {.user = std::move(user), .account = std::move(account), .shares = shares, .lim = {}};
}

// root -> physics (alice, bob), chem (carol, and alice too).
account_tree sample_tree() {
  account_tree t;
  t.accounts = {acct("root", ""), acct("physics", "root"), acct("chem", "root")};
  t.associations = {member("alice", "physics"), member("bob", "physics"), member("carol", "chem"),
                    member("alice", "chem")};
  t.default_account["alice"] = "physics";
  qos normal;
  normal.name = "normal";
  qos high;
  high.name = "high";
  high.priority = 100;
  t.qos_list = {normal, high};
  return t;
}

std::vector<decision> starts(const std::vector<decision>& d) {
  std::vector<decision> out;
  for (const decision& x : d) {
    if (x.what == decision::kind::start) out.push_back(x);
  }
  return out;
}

}  // namespace

TEST_CASE("a valid account tree passes and indexes parents, children and associations") {
  const account_index idx(sample_tree());
  const std::size_t physics = idx.account_of("physics");
  REQUIRE(physics != account_index::npos);
  CHECK(idx.parent(physics) == idx.root());
  CHECK(idx.child_accounts(idx.root()).size() == 2);
  CHECK(idx.association_of("alice", "chem") != account_index::npos);
  CHECK(idx.association_of("bob", "chem") == account_index::npos);
  CHECK(idx.accounts_of("alice") == std::vector<std::string>{"chem", "physics"});
}

TEST_CASE("the account tree refuses cycles, unknown parents, a missing root and duplicates with one line") {
  account_tree t = sample_tree();
  SUBCASE("a cycle of parents") {
    t.accounts.push_back(acct("a", "b"));
    t.accounts.push_back(acct("b", "a"));
    auto e = validate(t);
    REQUIRE(e);
    CHECK(e->find("cycle") != std::string::npos);
    CHECK(e->find('\n') == std::string::npos);
    CHECK_THROWS_AS(account_index{t}, std::invalid_argument);
  }
  SUBCASE("an account that is its own parent") {
    t.accounts.push_back(acct("self", "self"));
    REQUIRE(validate(t));
    CHECK(validate(t)->find("cycle") != std::string::npos);
  }
  SUBCASE("an unknown parent") {
    t.accounts.push_back(acct("bio", "nowhere"));
    CHECK(validate(t) == std::optional<std::string>("account bio has an unknown parent nowhere"));
  }
  SUBCASE("no root") {
    t.accounts.erase(t.accounts.begin());
    CHECK(validate(t) == std::optional<std::string>("there is no root account"));
  }
  SUBCASE("a duplicate account") {
    t.accounts.push_back(acct("chem", "root"));
    CHECK(validate(t) == std::optional<std::string>("account chem is defined twice"));
  }
  SUBCASE("a user in an unknown account") {
    t.associations.push_back(member("dave", "nowhere"));
    CHECK(validate(t) == std::optional<std::string>("user dave is in an unknown account nowhere"));
  }
  SUBCASE("a default account the user is not in") {
    t.default_account["bob"] = "chem";
    REQUIRE(validate(t));
    CHECK(validate(t)->find("default account chem") != std::string::npos);
  }
  SUBCASE("a limit past its bound set directly") {
    t.accounts[1].lim.grp_cpus = k_max_limit_cpus + 1;
    REQUIRE(validate(t));
    CHECK(validate(t)->find("GrpTRES") != std::string::npos);
  }
  SUBCASE("a name that would need quoting") {
    t.accounts.push_back(acct("bad name", "root"));
    REQUIRE(validate(t));
    CHECK(validate(t)->find("may hold only") != std::string::npos);
  }
}

TEST_CASE("limits are typed as sacctmgr's key=value; negative and absurd values are refused and change nothing") {
  limits l;
  CHECK(set_limit(l, "MaxJobs", "4") == std::optional<std::string>(""));
  CHECK(l.max_jobs == 4u);
  CHECK(set_limit(l, "grptres", "cpu=64") == std::optional<std::string>(""));
  CHECK(l.grp_cpus == 64u);
  CHECK(set_limit(l, "MaxTRESPerUser", "CPU=8") == std::optional<std::string>(""));
  CHECK(l.max_cpus_per_user == 8u);
  CHECK(set_limit(l, "MaxWall", "1-00:00:00") == std::optional<std::string>(""));
  CHECK(l.max_wall_s == 86400u);
  CHECK(set_limit(l, "MaxWall", "90") == std::optional<std::string>(""));
  CHECK(l.max_wall_s == 5400u);  // minutes, as Slurm reads a bare number
  CHECK(set_limit(l, "MaxSubmitJobs", "10") == std::optional<std::string>(""));
  CHECK(l.max_submit_jobs == 10u);

  const limits before = l;
  for (auto [k, v] : {std::pair{"MaxJobs", "-5"}, std::pair{"MaxJobs", "20000000"}, std::pair{"MaxJobs", "many"},
                      std::pair{"GrpTRES", "mem=4G"}, std::pair{"GrpTRES", "cpu=-3"},
                      std::pair{"MaxTRESPerUser", "cpu=99999999999"}, std::pair{"MaxWall", "400-00:00:00"},
                      std::pair{"MaxWall", "soon"}, std::pair{"MaxSubmitJobs", ""}}) {
    CAPTURE(k);
    CAPTURE(v);
    auto e = set_limit(l, k, v);
    REQUIRE(e);
    CHECK_FALSE(e->empty());
    CHECK(e->find('\n') == std::string::npos);
    CHECK(l == before);
  }
  CHECK(*set_limit(l, "MaxJobs", "-5") ==
        "MaxJobs must be a whole number from 0 to 10000000 (or -1 to clear), not '-5'");
  // -1 clears, as in Slurm; a key that is not a limit is not ours.
  CHECK(set_limit(l, "MaxJobs", "-1") == std::optional<std::string>(""));
  CHECK_FALSE(l.max_jobs);
  CHECK(set_limit(l, "GrpTRES", "cpu=-1") == std::optional<std::string>(""));
  CHECK_FALSE(l.grp_cpus);
  CHECK_FALSE(set_limit(l, "Description", "x"));
  std::uint32_t shares = 0;
  CHECK(parse_shares("-2", shares));
  CHECK_FALSE(parse_shares("40", shares));
  CHECK(shares == 40u);
}

TEST_CASE("a job's account is the one it names if the user is in it, else the default; refusals list the user's accounts") {
  const account_index idx(sample_tree());
  CHECK(choose_account(idx, "alice", "").account == "physics");
  CHECK(choose_account(idx, "alice", "chem").account == "chem");
  CHECK(choose_account(idx, "bob", "").account == "physics");  // one account: it is the default
  CHECK(choose_account(idx, "bob", "chem").error == "user bob is not in account chem (bob's accounts: physics)");
  CHECK(choose_account(idx, "alice", "bio").error == "unknown account bio (alice's accounts: chem, physics)");
  CHECK(choose_account(idx, "mallory", "").error.find("has no account") != std::string::npos);
}

TEST_CASE("usage is the integral of the processors held, suspended time excluded") {
  // 4 procs for 100 s, resized to 8 for 50 s, suspended 3600 s, 2 procs for 10 s.
  std::vector<held_segment> h{{0, 4, false}, {100, 8, false}, {150, 8, true}, {3750, 2, false}};
  CHECK(processor_seconds(h, 3760) == doctest::Approx(400 + 400 + 20));
  // A running job charged up to now: the open segment counts to `end`.
  CHECK(processor_seconds(h, 120) == doctest::Approx(400 + 160));
  CHECK(processor_seconds({}, 10) == 0);
  CHECK_THROWS_AS(processor_seconds(h, std::numeric_limits<double>::infinity()), std::invalid_argument);
}

TEST_CASE("decayed usage halves every half-life and matches a fine numerical integral") {
  CHECK(decay_weight(3600, 3600) == doctest::Approx(0.5));
  CHECK(decay_weight(7200, 3600) == doctest::Approx(0.25));
  CHECK(decay_weight(100, 0) == 1);  // no decay
  std::vector<held_segment> h{{0, 4, false}, {1000, 2, true}, {2000, 6, false}};
  const double now = 5000, H = 1500;
  double numeric = 0;
  for (double t = 0; t < 3000; t += 0.01) {
    const double procs = t < 1000 ? 4 : (t < 2000 ? 0 : 6);
    numeric += procs * std::exp2(-(now - (t + 0.005)) / H) * 0.01;
  }
  CHECK(decayed_processor_seconds(h, 3000, now, H) == doctest::Approx(numeric).epsilon(1e-5));
  CHECK(decayed_processor_seconds(h, 3000, now, 0) == doctest::Approx(processor_seconds(h, 3000)));

  usage_ledger ledger(H);
  ledger.charge("a", 4, 0, 1000);
  ledger.charge("a", 6, 2000, 3000);
  CHECK(ledger.at("a", now) == doctest::Approx(numeric).epsilon(1e-5));
  CHECK(ledger.at("never", now) == 0);
  // Charged piecewise, a running job adds up to the same as in one piece.
  usage_ledger pieces(H);
  pieces.charge("b", 3, 0, 400);
  pieces.charge("b", 3, 400, 1000);
  usage_ledger whole(H);
  whole.charge("b", 3, 0, 1000);
  CHECK(pieces.at("b", 2000) == doctest::Approx(whole.at("b", 2000)));
}

TEST_CASE("fair share: no usage gives every association 1; usage against equal shares ranks the light user first") {
  account_tree t;
  t.accounts = {acct("root", "")};
  t.associations = {member("heavy", "root"), member("light", "root")};
  const account_index idx(t);
  auto none = fair_share(idx, {0, 0});
  CHECK(none.assoc_factor == std::vector<double>{1, 1});
  auto r = fair_share(idx, {300, 100});
  // norm shares 0.5 each; children of root: effective usage = norm usage.
  CHECK(r.assoc_factor[0] == doctest::Approx(std::exp2(-0.75 / 0.5)));
  CHECK(r.assoc_factor[1] == doctest::Approx(std::exp2(-0.25 / 0.5)));
  CHECK(r.assoc_factor[1] > r.assoc_factor[0]);
  // Rows: root, then users by name.
  REQUIRE(r.rows.size() == 3);
  CHECK(r.rows[0].account == "root");
  CHECK(r.rows[1].user == "heavy");
  CHECK(r.rows[1].raw_usage == 300);
  CHECK(r.rows[1].norm_shares == doctest::Approx(0.5));
  CHECK(r.rows[1].norm_usage == doctest::Approx(0.75));
}

TEST_CASE("fair share in a tree: shares split down the accounts and a busy account weighs on its users") {
  account_tree t;
  t.accounts = {acct("root", ""), acct("a", "root", 3), acct("b", "root", 1)};
  t.associations = {member("a1", "a"), member("a2", "a"), member("b1", "b")};
  const account_index idx(t);
  auto r = fair_share(idx, {100, 0, 100});
  // a1 and a2 get 3/4 * 1/2 of the machine; b1 gets 1/4.
  const share_row* a2 = nullptr;
  const share_row* acc_a = nullptr;
  for (const share_row& row : r.rows) {
    if (row.user == "a2") a2 = &row;
    if (!row.is_user && row.account == "a") acc_a = &row;
  }
  REQUIRE(a2);
  REQUIRE(acc_a);
  CHECK(a2->norm_shares == doctest::Approx(0.375));
  CHECK(acc_a->raw_usage == 100);
  CHECK(acc_a->effective_usage == doctest::Approx(0.5));  // child of root: its own
  // a2 used nothing but inherits part of its account's usage.
  CHECK(a2->effective_usage == doctest::Approx(0 + (0.5 - 0) * 0.5));
  CHECK(r.assoc_factor[1] < 1.0);
  CHECK(r.assoc_factor[1] > r.assoc_factor[0]);
  // Zero shares: factor 0.
  t.associations[2].shares = 0;
  CHECK(fair_share(account_index(t), {100, 0, 100}).assoc_factor[2] == 0);
}

TEST_CASE("the multifactor priority weighs each factor in [0, 1]; all weights 0 leave the base priority") {
  priority_weights w;
  priority_context ctx{100, 10, 100};
  const priority_input in{.id = 1,
                          .submit_time = 0,
                          .size = 25,
                          .base = 7,
                          .fairshare = 0.5,
                          .partition_priority = 5,
                          .qos_priority = 100};
  auto f = factors_of(in, ctx, w, 3.5 * 86400);
  CHECK(f.age == doctest::Approx(0.5));
  CHECK(f.job_size == doctest::Approx(0.25));
  CHECK(f.partition == doctest::Approx(0.5));
  CHECK(f.qos == doctest::Approx(1.0));
  CHECK(f.fairshare == doctest::Approx(0.5));
  CHECK(priority_value(f, w, 7) == 7);
  w.age = 1000;
  w.fairshare = 10000;
  w.job_size = 100;
  w.partition = 1000;
  w.qos = 2000;
  CHECK(priority_value(f, w, 7) == 7 + 500 + 5000 + 25 + 500 + 2000);
  w.favor_small = true;
  CHECK(factors_of(in, ctx, w, 0).job_size == doctest::Approx(1 - 0.25 + 0.01));
  // Age: capped at 1, nothing for a job from the future.
  CHECK(factors_of(in, ctx, w, 30 * 86400.0).age == 1);
  CHECK(factors_of(in, ctx, w, -5).age == 0);
}

TEST_CASE("priority settings read Slurm's keys and refuse bad values with one line, changing nothing") {
  priority_weights w;
  CHECK(set_priority_setting(w, "PriorityWeightFairshare", "10000") == std::optional<std::string>(""));
  CHECK(w.fairshare == 10000u);
  CHECK(set_priority_setting(w, "prioritydecayhalflife", "7-0") == std::optional<std::string>(""));
  CHECK(w.half_life_s == 7 * 86400.0);
  CHECK(set_priority_setting(w, "PriorityFavorSmall", "YES") == std::optional<std::string>(""));
  CHECK(w.favor_small);
  const priority_weights before = w;
  auto e = set_priority_setting(w, "PriorityWeightAge", "-1");
  REQUIRE(e);
  CHECK(*e == "PriorityWeightAge must be a whole number from 0 to 1000000000, not '-1'");
  CHECK(set_priority_setting(w, "PriorityWeightAge", "1000000000"));  // the sum would pass the bound
  CHECK(w.age == before.age);
  CHECK(set_priority_setting(w, "PriorityMaxAge", "later"));
  CHECK_FALSE(set_priority_setting(w, "SchedulerType", "x"));
}

TEST_CASE("easy reserves for the job with the highest computed priority, not the first submitted") {
  scheduler s(cluster::uniform(1, 4), make_strategy("easy"));
  s.handle(event::arrival(rigid(1, 4, 100, 0)), 0);  // runs
  s.apply(event::arrival(rigid(2, 4, 100, 1)));       // first in line by submission
  s.apply(event::arrival(rigid(3, 4, 100, 2)));
  s.decide(2);
  REQUIRE(s.reservation());
  CHECK(s.reservation()->job == 2);
  // Job 3's user has the better fair share: it goes ahead.
  priority_weights w;
  w.fairshare = 1000;
  std::vector<priority_input> in(2);
  in[0].id = 2, in[0].submit_time = 1, in[0].size = 4, in[0].fairshare = 0.2;
  in[1].id = 3, in[1].submit_time = 2, in[1].size = 4, in[1].fairshare = 0.9;
  CHECK(apply_priorities(s, compute_priorities(in, priority_context{4, 0, 0}, w, 3)) == 2);
  CHECK(s.get(3).req.priority == 900);
  s.decide(3);
  REQUIRE(s.reservation());
  CHECK(s.reservation()->job == 3);
  auto d = starts(s.handle(event::completion(1), 100));
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 3);
}

TEST_CASE("with every weight 0 the computed priorities change nothing: same queue, same decisions") {
  auto run = [](bool apply) {
    scheduler s(cluster::uniform(2, 4), make_strategy("equipartition"));
    std::vector<decision> all;
    auto add = [&](const std::vector<decision>& d) { all.insert(all.end(), d.begin(), d.end()); };
    add(s.handle(event::arrival(adaptive(1, 2, 8, 100, 0)), 0));
    s.apply(event::arrival(rigid(2, 6, 50, 1)));
    s.apply(event::arrival(adaptive(3, 1, 4, 100, 2)));
    if (apply) {
      std::vector<priority_input> in;
      for (job_id id : {1, 2, 3}) {
        priority_input p;
        p.id = id;
        p.submit_time = static_cast<double>(id);
        p.size = 4;
        p.fairshare = 0.1 * static_cast<double>(id);
        in.push_back(p);
      }
      CHECK(apply_priorities(s, compute_priorities(in, priority_context{8, 0, 0}, priority_weights{}, 5)) == 0);
    }
    add(s.decide(5));
    std::string out;
    for (const decision& d : all) out += std::to_string(d.job) + ":" + d.to.to_string() + " ";
    return out;
  };
  CHECK(run(false) == run(true));
}

TEST_CASE("equipartition admits the pending job with the higher priority first") {
  auto first_started = [](bool raise_later) {
    scheduler s(cluster::uniform(1, 4), make_strategy("equipartition"));
    s.handle(event::arrival(rigid(1, 4, 100, 0)), 0);
    s.apply(event::arrival(adaptive(2, 3, 4, 100, 1)));
    s.apply(event::arrival(adaptive(3, 3, 4, 100, 2)));
    if (raise_later) s.set_priority(3, 50);
    s.decide(3);
    // 4 processors free: room for one minimum of 3.
    auto d = starts(s.handle(event::completion(1), 10));
    REQUIRE(d.size() == 1);
    return d[0].job;
  };
  CHECK(first_started(false) == 2);
  CHECK(first_started(true) == 3);
}

TEST_CASE("equipartition shrinks the lower-priority running job first") {
  auto run = [](int p2, int p3) {
    scheduler s(cluster::uniform(1, 9), make_strategy("equipartition"));
    auto settle = [&s](double now) {
      for (int round = 0; round < 4; ++round) {
        for (job_id id : {2, 3, 4}) {
          const job* j = s.find(id);
          if (j && j->state == job_state::resizing) s.handle(event::on_job(event::kind::resize_ack, id), now);
        }
      }
    };
    s.handle(event::arrival(adaptive(2, 1, 9, 100, 0)), 0);
    s.handle(event::arrival(adaptive(3, 1, 9, 100, 0)), 0);
    settle(0);
    s.set_priority(2, p2);
    s.set_priority(3, p3);
    // A rigid job of 2 leaves 7 for the two adaptive jobs: one keeps 4, one 3.
    s.handle(event::arrival(rigid(4, 2, 100, 1)), 1);
    settle(1);
    CHECK(s.get(4).state == job_state::running);
    return std::pair{s.get(2).nprocs, s.get(3).nprocs};
  };
  auto [a2, a3] = run(0, 10);
  CHECK(a2 == 3);
  CHECK(a3 == 4);
  auto [b2, b3] = run(10, 0);
  CHECK(b2 == 4);
  CHECK(b3 == 3);
}

TEST_CASE("set_priority moves a queued job, refuses an unknown one") {
  scheduler s(cluster::uniform(1, 1), make_strategy("fcfs"));
  s.handle(event::arrival(rigid(1, 1, 100, 0)), 0);
  s.apply(event::arrival(rigid(2, 1, 100, 1)));
  s.apply(event::arrival(rigid(3, 1, 100, 2)));
  CHECK(s.queue().begin()->id == 2);
  s.set_priority(3, 1);
  CHECK(s.queue().begin()->id == 3);
  CHECK(s.queue().size() == 2);
  CHECK_THROWS_AS(s.set_priority(99, 1), std::invalid_argument);
}

TEST_CASE("limits hold a job with Slurm's reason and let it run once the limit allows") {
  account_tree t = sample_tree();
  REQUIRE(set_limit(t.accounts[1].lim, "GrpTRES", "cpu=8") == std::optional<std::string>(""));  // physics
  REQUIRE(set_limit(t.associations[1].lim, "MaxJobs", "1") == std::optional<std::string>(""));  // bob
  REQUIRE(set_limit(t.accounts[2].lim, "MaxWall", "60") == std::optional<std::string>(""));     // chem: 1 h
  REQUIRE(set_limit(t.qos_list[1].lim, "MaxTRESPerUser", "cpu=4") == std::optional<std::string>(""));
  REQUIRE(set_limit(t.qos_list[1].lim, "MaxJobs", "2") == std::optional<std::string>(""));
  REQUIRE(set_limit(t.qos_list[0].lim, "GrpTRES", "cpu=20") == std::optional<std::string>(""));
  REQUIRE(set_limit(t.accounts[2].lim, "MaxTRESPerUser", "cpu=3") == std::optional<std::string>(""));
  REQUIRE(set_limit(t.qos_list[0].lim, "MaxWall", "10-0") == std::optional<std::string>(""));
  const account_index idx(t);
  limit_tally tally(idx);
  const std::size_t alice_phys = idx.association_of("alice", "physics"), bob = idx.association_of("bob", "physics"),
                    carol = idx.association_of("carol", "chem");
  const std::size_t normal = idx.qos_of("normal"), high = idx.qos_of("high");
  auto job = [](std::string user, std::size_t assoc, std::size_t q, std::size_t cpus, double wall = 600) {
    return limit_job{std::move(user), assoc, q, cpus, wall};
  };

  SUBCASE("AssocGrpCpuLimit: an account's processors are shared by its users") {
    limit_job a = job("alice", alice_phys, account_index::npos, 6);
    CHECK(check_start(tally, a) == limit_reason::none);
    tally.add_running(a);
    limit_job b = job("bob", bob, account_index::npos, 4);
    CHECK(to_string(check_start(tally, b)) == "AssocGrpCpuLimit");
    CHECK(cpu_headroom(tally, a) == 2);
    tally.remove_running(a);
    CHECK(check_start(tally, b) == limit_reason::none);
  }
  SUBCASE("AssocMaxJobsLimit") {
    limit_job b = job("bob", bob, account_index::npos, 1);
    tally.add_running(b);
    CHECK(to_string(check_start(tally, b)) == "AssocMaxJobsLimit");
    tally.remove_running(b);
    CHECK(check_start(tally, b) == limit_reason::none);
  }
  SUBCASE("AssocMaxWallDurationPerJobLimit, inherited from the account") {
    CHECK(to_string(check_start(tally, job("carol", carol, account_index::npos, 1, 7200))) ==
          "AssocMaxWallDurationPerJobLimit");
    CHECK(check_start(tally, job("carol", carol, account_index::npos, 1, 3600)) == limit_reason::none);
    // No time limit: it gets the smallest MaxWall at submission, as in Slurm.
    CHECK(check_start(tally, job("carol", carol, account_index::npos, 1, 0)) == limit_reason::none);
    CHECK(max_wall_of(idx, job("carol", carol, account_index::npos, 1, 0)) == 3600u);
    CHECK(max_wall_of(idx, job("carol", carol, normal, 1, 0)) == 3600u);  // QOS normal: 10 days
    CHECK_FALSE(max_wall_of(idx, job("alice", alice_phys, account_index::npos, 1, 0)));
  }
  SUBCASE("an account's MaxTRESPerUser counts one user's jobs below it") {
    limit_job c = job("carol", carol, account_index::npos, 3);
    tally.add_running(c);
    CHECK(check_start(tally, job("carol", carol, account_index::npos, 1)) == limit_reason::assoc_grp_cpu);
    CHECK(check_start(tally, job("alice", idx.association_of("alice", "chem"), account_index::npos, 3)) ==
          limit_reason::none);
  }
  SUBCASE("QOSMaxCpuPerUserLimit and QOSMaxJobsPerUserLimit count per user") {
    limit_job a = job("alice", alice_phys, high, 3);
    tally.add_running(a);
    CHECK(to_string(check_start(tally, job("alice", alice_phys, high, 2))) == "QOSMaxCpuPerUserLimit");
    CHECK(check_start(tally, job("bob", bob, high, 2)) == limit_reason::none);
    tally.add_running(job("alice", alice_phys, high, 1));
    CHECK(to_string(check_start(tally, job("alice", alice_phys, high, 0))) == "QOSMaxJobsPerUserLimit");
    CHECK(cpu_headroom(tally, a) == 0);
  }
  SUBCASE("QOSGrpCpuLimit and QOSMaxWallDurationPerJobLimit") {
    tally.add_running(job("carol", carol, normal, 3));
    tally.add_running(job("alice", alice_phys, normal, 8));
    tally.add_running(job("alice", idx.association_of("alice", "chem"), normal, 0));
    CHECK(to_string(check_start(tally, job("bob", bob, normal, 10))) == "QOSGrpCpuLimit");
    CHECK(to_string(check_start(tally, job("bob", bob, normal, 1, 11 * 86400.0))) ==
          "QOSMaxWallDurationPerJobLimit");
  }
  SUBCASE("the QOS is checked before the association, as Slurm does") {
    tally.add_running(job("bob", bob, account_index::npos, 1));  // bob at MaxJobs
    tally.add_running(job("bob", bob, high, 4));
    CHECK(check_start(tally, job("bob", bob, high, 1)) == limit_reason::qos_max_cpu_per_user);
  }
}

TEST_CASE("submission limits refuse with one line naming Slurm's reason") {
  account_tree t = sample_tree();
  REQUIRE(set_limit(t.accounts[1].lim, "MaxSubmitJobs", "2") == std::optional<std::string>(""));
  REQUIRE(set_limit(t.qos_list[1].lim, "MaxSubmitJobs", "1") == std::optional<std::string>(""));
  const account_index idx(t);
  limit_tally tally(idx);
  const std::size_t bob = idx.association_of("bob", "physics");
  limit_job j{"bob", bob, account_index::npos, 1, 60};
  tally.add_submitted(j);
  tally.add_submitted(j);
  std::string line;
  CHECK(check_submit(tally, j, &line) == limit_reason::assoc_max_submit);
  CHECK(line == "user bob in account physics already has 2 jobs submitted, its MaxSubmitJobs (AssocMaxSubmitJobLimit)");
  tally.remove_submitted(j);
  CHECK(check_submit(tally, j) == limit_reason::none);
  limit_job q{"bob", bob, idx.qos_of("high"), 1, 60};
  tally.add_submitted(q);
  CHECK(to_string(check_submit(tally, q, &line)) == "QOSMaxSubmitJobPerUserLimit");
  CHECK(line.find("QOS high") != std::string::npos);
  // Every reason has Slurm's name, none the same.
  std::vector<std::string> names;
  for (limit_reason r : k_all_limit_reasons) names.emplace_back(to_string(r));
  std::sort(names.begin(), names.end());
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
}

TEST_CASE("accounting: a job's account is chosen at submission, limits hold it, its maps are charged, suspended time free") {
  account_tree t = sample_tree();
  REQUIRE(set_limit(t.accounts[1].lim, "GrpTRES", "cpu=8") == std::optional<std::string>(""));
  REQUIRE(set_limit(t.associations[1].lim, "MaxSubmitJobs", "1") == std::optional<std::string>(""));  // bob
  priority_weights w;
  w.fairshare = 1000;
  w.half_life_s = 0;
  accounting acc(t, w);
  accounting_job a;
  a.id = 1;
  a.user = "alice";
  a.cpus = 4;
  a.walltime_s = 600;
  const accounting_admission ok = acc.submit(a);
  CHECK(ok.error.empty());
  CHECK(ok.account == "physics");  // the default
  accounting_job b = a;
  b.id = 2;
  b.user = "bob";
  b.account = "chem";
  CHECK(acc.submit(b).error == "user bob is not in account chem (bob's accounts: physics)");
  b.account = "";
  CHECK(acc.submit(b).error.empty());
  accounting_job b2 = b;
  b2.id = 3;
  const accounting_admission refused = acc.submit(b2);
  CHECK(refused.reason == limit_reason::assoc_max_submit);
  CHECK(refused.error.find("AssocMaxSubmitJobLimit") != std::string::npos);
  accounting_job q = a;
  q.id = 4;
  q.qos = "nope";
  CHECK(acc.submit(q).error == "unknown QOS nope");

  // Alice runs on 4, grows to 6, is suspended an hour, resumes on 2, ends.
  CHECK(acc.may_start(1, 4) == limit_reason::none);
  acc.start(1, 4, 0);
  CHECK(acc.may_start(2, 4) == limit_reason::none);           // physics holds 4 of 8
  CHECK(acc.may_start(2, 5) == limit_reason::assoc_grp_cpu);  // 9 of 8
  CHECK(acc.growth_room(1) == 4);
  acc.resize(1, 6, 100);
  CHECK(acc.growth_room(1) == 2);
  acc.suspend(1, 200);
  CHECK(acc.may_start(2, 8) == limit_reason::none);  // a suspended job holds nothing
  acc.resume(1, 2, 3800);
  const auto charge = acc.finish(1, 3900);
  REQUIRE(charge);
  CHECK(charge->account == "physics");
  CHECK(charge->cpu_seconds == doctest::Approx(4 * 100 + 6 * 100 + 2 * 100));
  CHECK(charge->start == 0);
  CHECK(charge->end == 3900);
  CHECK_FALSE(acc.finish(1, 4000));  // already gone

  // Fair share: alice used 1200 processor-seconds, bob nothing.
  const fair_share_result fs = acc.shares(4000);
  const account_index& idx = acc.index();
  CHECK(fs.assoc_factor[idx.association_of("bob", "physics")] >
        fs.assoc_factor[idx.association_of("alice", "physics")]);
  // A pending job that never ran is charged nothing.
  CHECK_FALSE(acc.finish(2, 4000));
}

TEST_CASE("accounting reorders the queue by fair share; all weights 0 move nothing") {
  account_tree t;
  t.accounts = {acct("root", "")};
  t.associations = {member("heavy", "root"), member("light", "root")};
  for (std::uint32_t weight : {0u, 1000u}) {
    priority_weights w;
    w.fairshare = weight;
    accounting acc(t, w);
    acc.restore_usage("heavy", "root", 5000, 0, 100);
    scheduler s(cluster::uniform(1, 1), make_strategy("fcfs"));
    s.handle(event::arrival(rigid(1, 1, 100, 0)), 0);
    job_request h = rigid(2, 1, 100, 1);
    h.user = "heavy";
    job_request l = rigid(3, 1, 100, 2);
    l.user = "light";
    for (const job_request& r : {h, l}) {
      accounting_job j;
      j.id = r.id;
      j.user = r.user;
      j.submit_time = r.submit_time;
      REQUIRE(acc.submit(j).error.empty());
      s.apply(event::arrival(r));
    }
    const std::size_t changed = acc.reprioritise(s, 10);
    CAPTURE(weight);
    if (weight == 0) {
      CHECK(changed == 0);
      CHECK(s.queue().begin()->id == 2);
    } else {
      CHECK(changed == 2);
      CHECK(s.queue().begin()->id == 3);
      auto p = acc.priority_of(3, 1, 10);
      REQUIRE(p);
      CHECK(p->value == 1000);
    }
  }
}

TEST_CASE("accounting reload keeps the jobs and refuses a bad tree without changing anything") {
  account_tree t = sample_tree();
  accounting acc(t, priority_weights{});
  accounting_job a;
  a.id = 1;
  a.user = "alice";
  a.cpus = 2;
  REQUIRE(acc.submit(a).error.empty());
  acc.start(1, 2, 0);
  account_tree bad = t;
  bad.accounts.push_back(acct("x", "y"));
  CHECK_THROWS_AS(acc.reload(bad), std::invalid_argument);
  CHECK(acc.index().tree().accounts.size() == t.accounts.size());
  REQUIRE(set_limit(t.accounts[1].lim, "GrpTRES", "cpu=2") == std::optional<std::string>(""));
  acc.reload(t);
  accounting_job b = a;
  b.id = 2;
  b.user = "bob";
  REQUIRE(acc.submit(b).error.empty());
  CHECK(acc.may_start(2, 1) == limit_reason::assoc_grp_cpu);  // alice's running 2 still counted
}

TEST_CASE("a job of a user in no account is tracked for its usage only: charged with no account, no limit, no priority") {
  account_tree t = sample_tree();
  REQUIRE(set_limit(t.accounts[0].lim, "GrpTRES", "cpu=2") == std::optional<std::string>(""));
  priority_weights w;
  w.age = 1000;
  accounting acc(t, w);
  accounting_job j;
  j.id = 7;
  j.user = "dave";  // in no account
  j.cpus = 4;
  acc.adopt(j);
  CHECK(acc.tracks(7));
  CHECK_FALSE(acc.limit_job_of(7, 4));              // no association: no limit applies
  CHECK(acc.may_start(7, 4) == limit_reason::none);  // root's cpu=2 is not dave's
  CHECK_FALSE(acc.priority_of(7, 16, 100));          // its priority stays its own
  acc.start(7, 4, 10);
  acc.resize(7, 2, 20);
  const auto charge = acc.finish(7, 30);
  REQUIRE(charge);
  CHECK(charge->user == "dave");
  CHECK(charge->account.empty());
  CHECK(charge->cpu_seconds == doctest::Approx(4 * 10 + 2 * 10));
}
