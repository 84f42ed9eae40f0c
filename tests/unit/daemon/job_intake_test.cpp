// The submission part alone (job_intake) on a real write pipeline over an
// in-memory store, with the real access view, metrics and core; virtual
// time, no sockets, no PostgreSQL. A submission is admitted or refused with
// the right error; a submit token is idempotent per user; an array is one
// compact record whose tasks are split off within its throttle; a job waits
// for its dependencies and is cancelled by one that can never be met; the
// user's ledger is charged by a job and given back at its end.
#include <doctest/doctest.h>

#include <thread>

#include "core/strategy.hpp"
#include "daemon/job_intake.hpp"
#include "daemon_base/unix_user.hpp"
#include "fake_connection.hpp"
#include "strand_rig.hpp"

using namespace aqs;
using namespace std::chrono_literals;
using core::job_state;

namespace {

constexpr uid_t k_alice = 4101, k_bob = 4102;

struct rig : test::strand_rig {
  core::scheduler core{core::cluster{}, core::make_strategy("fcfs")};
  daemon::access_view view;
  core::site_config partitions;
  std::vector<std::pair<std::int64_t, job_state>> ended;
  bool faucets_open = true;
  std::unique_ptr<daemon::job_accounting> accounts;
  std::unique_ptr<daemon::job_intake> intake;

  explicit rig(daemon::user_limits limits = {}, core::site_config parts = {}, daemon::accounting_options acc = {})
      : partitions(std::move(parts)) {
    core.add_node("n1", 4);
    accounts = std::make_unique<daemon::job_accounting>(acc, pipe, clock, core);
    accounts->set_readmit([this](std::int64_t id) { intake->admit_or_hold(id); });
    intake = std::make_unique<daemon::job_intake>(
        core, pipe, view, stats, clock, *accounts, partitions, limits, [this](std::int64_t) { return faucets_open; },
        [this](std::int64_t id, job_state s) { ended.emplace_back(id, s); });
  }
  ~rig() { pipe.stop(); }  // before the part goes: no callback runs into it

  std::shared_ptr<test::fake_connection> user(uid_t uid) {
    return std::make_shared<test::fake_connection>(protocol::peer_role::client, uid);
  }
  static protocol::job_spec job(std::string name = "j") {
    protocol::job_spec s;
    s.name = std::move(name);
    s.script = "#!/bin/sh\necho hi\n";
    s.workdir = "/tmp";
    s.min_pe = s.max_pe = 1;
    return s;
  }
  // A job sent with a submission token (a resend with it is the same submission).
  static protocol::job_spec job_with_token(std::string token) {
    auto s = job();
    s.submit_token = std::move(token);
    return s;
  }
  // Submits and runs the strand until the answer came; the answer.
  protocol::message submit(const std::shared_ptr<test::fake_connection>& c, std::int64_t rid, protocol::job_spec j) {
    intake->handle_submit(c, protocol::submit{rid, std::move(j)});
    std::optional<protocol::message> got;
    REQUIRE(until([&] { return (got = c->reply(rid, 0ms)).has_value(); }));
    return *got;
  }
  std::int64_t submitted(const std::shared_ptr<test::fake_connection>& c, std::int64_t rid, protocol::job_spec j) {
    const auto m = submit(c, rid, std::move(j));
    REQUIRE(std::holds_alternative<protocol::ok>(m));
    return protocol::read_reply<protocol::submit_reply>(std::get<protocol::ok>(m)).job_id;
  }
  protocol::error_code refused(const std::shared_ptr<test::fake_connection>& c, std::int64_t rid,
                               protocol::job_spec j, std::string* message = nullptr) {
    const auto m = submit(c, rid, std::move(j));
    REQUIRE(std::holds_alternative<protocol::error>(m));
    if (message) *message = std::get<protocol::error>(m).message;
    return std::get<protocol::error>(m).code;
  }
  bool in_core(std::int64_t id) const { return core.find(static_cast<core::job_id>(id)) != nullptr; }
  std::string reason(std::int64_t id) const {
    const auto r = view.reasons();
    const auto it = r.held.find(id);
    return it == r.held.end() ? "" : it->second;
  }
  // A job ends (its final transition committed): the part lets it go.
  void finish(std::int64_t id, job_state s) {
    on_strand([&] {
      if (in_core(id)) {
        // The core ends only a job it started (the launch part's doing in aqsd).
        if (core.get(static_cast<core::job_id>(id)).state == job_state::pending) core.decide(clock.wall_seconds());
        REQUIRE(core.get(static_cast<core::job_id>(id)).state == job_state::running);
        core.apply(core::event::completion(static_cast<core::job_id>(id), s));
      }
      intake->finish(id, s, s == job_state::completed ? std::optional<std::int32_t>(0) : std::nullopt, std::nullopt);
    });
  }
  std::size_t stored_jobs() { return store.list_jobs().size(); }
};

std::int64_t text_bytes_of(const protocol::job_spec& j) { return static_cast<std::int64_t>(j.script->size()); }

}  // namespace

TEST_CASE("job_intake: a submission is stored, answered with its id, arrives in the core and charges its user") {
  rig r;
  auto alice = r.user(k_alice);
  const auto id = r.submitted(alice, 1, rig::job());
  CHECK(id > 0);
  REQUIRE(r.store.get_job(id));
  CHECK(r.store.get_job(id)->request.uid == static_cast<std::int32_t>(k_alice));
  CHECK(r.in_core(id));
  CHECK(r.intake->jobs().is_live(id));
  CHECK(r.view.owner(id) == static_cast<std::int32_t>(k_alice));
  CHECK(r.stats.read().submissions == 1);
  REQUIRE(r.until([&] { return r.decisions >= 1; }));
  CHECK(r.intake->ledger().jobs_of(k_alice) == 1);
  CHECK(r.intake->ledger().bytes_of(k_alice) == text_bytes_of(rig::job()));
  // The answer goes out before the submission is struck off (answer_submit),
  // on the read pool when a check there refused it: wait for it.
  CHECK(r.until([&] { return r.intake->ledger().pending_of(k_alice) == 0; }));
  // Its end gives its place back.
  r.finish(id, job_state::completed);
  CHECK(r.intake->ledger().jobs_of(k_alice) == 0);
  CHECK(r.intake->ledger().bytes_of(k_alice) == 0);
  CHECK(r.intake->known_state(id) == job_state::completed);
  CHECK_FALSE(r.intake->jobs().is_live(id));
}

TEST_CASE("job_intake: refusals come with their error, and nothing is stored or charged") {
  daemon::user_limits limits;
  limits.max_script_bytes = 64;
  limits.max_array_size = 10;
  limits.max_jobs_per_user = 2;
  rig r(limits);
  auto alice = r.user(k_alice);
  std::string why;

  // Over TCP (no uid the kernel vouches for).
  auto tcp = r.user(k_alice);
  tcp->mutable_peer().via = daemon::transport::tcp;
  CHECK(r.refused(tcp, 1, rig::job()) == protocol::error_code::permission_denied);
  // A Faucets token from anyone but the uplink.
  auto j = rig::job();
  j.submit_token = "faucets:c1:9.1";
  CHECK(r.refused(alice, 2, j) == protocol::error_code::bad_request);
  // A --signal the agent could not act on.
  j = rig::job();
  j.geometry.emplace();
  j.geometry->recorded = {"signal=NOPE@60"};
  CHECK(r.refused(alice, 3, j) == protocol::error_code::bad_request);
  // MaxScriptBytes, MaxArraySize.
  j = rig::job();
  j.script = std::string(100, 'x');
  CHECK(r.refused(alice, 4, j, &why) == protocol::error_code::bad_request);
  CHECK(why.find("MaxScriptBytes 64") != std::string::npos);
  j = rig::job();
  j.geometry.emplace();
  j.geometry->array = "0-10";
  CHECK(r.refused(alice, 5, j, &why) == protocol::error_code::bad_request);
  CHECK(why.find("MaxArraySize 10") != std::string::npos);
  // A dependency that does not exist.
  j = rig::job();
  j.afterok = {777};
  CHECK(r.refused(alice, 6, j, &why) == protocol::error_code::not_found);
  CHECK(why == "dependency job 777 does not exist");
  CHECK(r.stored_jobs() == 0);
  CHECK(r.intake->ledger().jobs_of(k_alice) == 0);
  CHECK(r.intake->ledger().bytes_of(k_alice) == 0);
  // The answer goes out before the submission is struck off (answer_submit),
  // on the read pool when a check there refused it: wait for it.
  CHECK(r.until([&] { return r.intake->ledger().pending_of(k_alice) == 0; }));

  // MaxJobsPerUser: the third live job is refused, another user's is not.
  r.submitted(alice, 7, rig::job());
  r.submitted(alice, 8, rig::job());
  CHECK(r.refused(alice, 9, rig::job(), &why) == protocol::error_code::too_large);
  CHECK(why.find("MaxJobsPerUser") != std::string::npos);
  r.submitted(r.user(k_bob), 10, rig::job());
  CHECK(r.intake->ledger().jobs_of(k_alice) == 2);
}

TEST_CASE("job_intake: with partitions, a job no partition takes is refused with the partition's words") {
  rig r({}, core::parse_config("PartitionName=debug Nodes=n1 Default=YES MaxTime=30:00\n", "aqs.conf"));
  auto alice = r.user(k_alice);
  auto j = rig::job();
  j.walltime_s = 3600;
  std::string why;
  CHECK(r.refused(alice, 1, j, &why) == protocol::error_code::bad_request);
  CHECK(why.starts_with("Requested time limit is invalid"));
  // Without a limit it takes the partition's: admitted.
  const auto id = r.submitted(alice, 2, rig::job());
  CHECK(r.store.get_job(id)->request.walltime_s == 1800);
}

TEST_CASE("job_intake: a submit token is one job per user: resent, the same id; another user's, another job") {
  rig r;
  auto alice = r.user(k_alice);
  const auto j = rig::job_with_token("tok-1");
  const auto first = r.submitted(alice, 1, j);
  const auto again = r.submitted(alice, 2, j);
  CHECK(again == first);
  CHECK(r.stored_jobs() == 1);
  CHECK(r.intake->ledger().jobs_of(k_alice) == 1);
  CHECK(r.stats.read().submissions == 1);
  const auto bobs = r.submitted(r.user(k_bob), 3, j);
  CHECK(bobs != first);
  CHECK(r.stored_jobs() == 2);
  CHECK(r.intake->jobs().at(bobs).uid == static_cast<std::int32_t>(k_bob));
}

TEST_CASE("job_intake: an array is one record; its tasks are split off within the throttle, one more per end") {
  rig r;
  auto alice = r.user(k_alice);
  auto j = rig::job("arr");
  j.geometry.emplace();
  j.geometry->array = "0-9%2";
  const auto array_id = r.submitted(alice, 1, j);
  // The whole array holds ten places of its user.
  // Tasks 0 and 1 are split off and admitted; the other eight stay one record.
  REQUIRE(r.until([&] { return r.intake->arrays().live_tasks(array_id) == 2 && r.core.queue().size() == 2; }));
  const auto tasks = r.intake->arrays().tasks_of(array_id);
  REQUIRE(tasks.size() == 2);
  CHECK(tasks[0] == array_id);  // the array's own job became task 0
  for (auto t : tasks) CHECK(r.in_core(t));
  const auto* c = r.intake->arrays().find_compact(array_id);
  REQUIRE(c != nullptr);
  CHECK(c->rest.to_string() == "2-9");
  CHECK_FALSE(r.in_core(c->record));
  CHECK(r.reason(c->record) == "JobArrayTaskLimit");
  CHECK(r.intake->ledger().jobs_of(k_alice) == 10);
  CHECK(r.stored_jobs() == 3);

  // A task ends: the next index is split off and admitted.
  r.finish(tasks[0], job_state::completed);
  REQUIRE(r.until([&] {
    const auto* now = r.intake->arrays().find_compact(array_id);
    return now != nullptr && now->rest.to_string() == "3-9" && !now->splitting;
  }));
  CHECK(r.intake->arrays().live_tasks(array_id) == 2);
  CHECK(r.intake->ledger().jobs_of(k_alice) == 9);
  const auto now_tasks = r.intake->arrays().tasks_of(array_id);
  REQUIRE(now_tasks.size() == 2);
  const auto& g = r.intake->jobs().at(now_tasks[1]).geometry;
  REQUIRE(g);
  CHECK(g->array_task_id == 2);
  CHECK(g->array_job_id == array_id);
}

TEST_CASE("job_intake: a job waits for its dependency, goes when it completes; one that can never run is cancelled") {
  rig r;
  auto alice = r.user(k_alice);
  const auto a = r.submitted(alice, 1, rig::job("a"));
  auto j = rig::job("b");
  j.afterok = {a};
  const auto b = r.submitted(alice, 2, j);
  CHECK(r.intake->deps().is_held(b));
  CHECK_FALSE(r.in_core(b));
  CHECK(r.reason(b) == "Dependency");
  CHECK(r.intake->ledger().jobs_of(k_alice) == 2);  // a waiting job holds its place too

  const auto c = r.submitted(alice, 3, rig::job("c"));
  j = rig::job("d");
  j.afterok = {c};
  const auto d = r.submitted(alice, 4, j);
  CHECK(r.intake->deps().is_held(d));

  // a completes: b goes to the core.
  r.finish(a, job_state::completed);
  CHECK_FALSE(r.intake->deps().is_held(b));
  CHECK(r.in_core(b));
  CHECK(r.reason(b).empty());
  // c fails: d can never run: it is cancelled (stored), and every part told after the commit.
  r.finish(c, job_state::failed);
  REQUIRE(r.until([&] { return !r.ended.empty(); }));
  CHECK(r.ended == std::vector<std::pair<std::int64_t, job_state>>{{d, job_state::cancelled}});
  CHECK(r.store.get_job(d)->status.state == job_state::cancelled);
  CHECK_FALSE(r.in_core(d));
}

TEST_CASE("job_intake: a Faucets server's job waits while the gate says no, and arrives when admitted") {
  rig r;
  r.faucets_open = false;
  auto uplink = r.user(k_alice);
  uplink->mutable_peer().faucets_uplink = true;
  const auto j = rig::job_with_token("faucets:c1:9.1");
  const auto id = r.submitted(uplink, 1, j);
  CHECK(r.intake->jobs().at(id).faucets);
  CHECK(r.intake->jobs().at(id).submit_token == "faucets:c1:9.1");
  CHECK_FALSE(r.in_core(id));
  r.faucets_open = true;
  r.on_strand([&] { r.intake->admit_or_hold(id); });
  CHECK(r.in_core(id));
}

TEST_CASE("job_intake: a resend of a submission still being stored is answered once it is, with the same job") {
  rig r;
  auto alice = r.user(k_alice);
  const auto j = rig::job_with_token("tok-twice");
  // Both arrive before the strand runs: the second joins the first.
  r.intake->handle_submit(alice, protocol::submit{1, j});
  r.intake->handle_submit(alice, protocol::submit{2, j});
  std::optional<protocol::message> a, b;
  REQUIRE(r.until([&] {
    if (!a) a = alice->reply(1, 0ms);
    if (!b) b = alice->reply(2, 0ms);
    return a && b;
  }));
  REQUIRE(std::holds_alternative<protocol::ok>(*a));
  REQUIRE(std::holds_alternative<protocol::ok>(*b));
  CHECK(protocol::read_reply<protocol::submit_reply>(std::get<protocol::ok>(*a)).job_id ==
        protocol::read_reply<protocol::submit_reply>(std::get<protocol::ok>(*b)).job_id);
  CHECK(r.stored_jobs() == 1);
  CHECK(r.intake->ledger().jobs_of(k_alice) == 1);
  // The answer goes out before the submission is struck off (answer_submit),
  // on the read pool when a check there refused it: wait for it.
  CHECK(r.until([&] { return r.intake->ledger().pending_of(k_alice) == 0; }));
}

TEST_CASE("job_intake: a job the registered nodes could never hold is refused with the reason") {
  rig r;
  r.view.set_machine(r.core.machine(), r.core.resources());
  auto j = rig::job();
  j.geometry.emplace();
  j.geometry->nodes_min = 3;
  std::string why;
  CHECK(r.refused(r.user(k_alice), 1, j, &why) == protocol::error_code::bad_request);
  CHECK(why.starts_with("the job can never run on this cluster: "));
  CHECK(r.stored_jobs() == 0);
  CHECK(r.intake->ledger().jobs_of(k_alice) == 0);
}

TEST_CASE("job_intake: a submission the store could not take is refused as retryable and charges nothing") {
  rig r;
  auto alice = r.user(k_alice);
  const auto j = rig::job_with_token("tok-down");
  r.store.set_down(true);
  std::string why;
  CHECK(r.refused(alice, 1, j, &why) == protocol::error_code::internal);
  CHECK(why.starts_with("store unavailable, retrying (submit again)"));
  CHECK(r.intake->ledger().jobs_of(k_alice) == 0);
  CHECK(r.intake->ledger().bytes_of(k_alice) == 0);
  // The answer goes out before the submission is struck off (answer_submit),
  // on the read pool when a check there refused it: wait for it.
  CHECK(r.until([&] { return r.intake->ledger().pending_of(k_alice) == 0; }));
  r.store.set_down(false);
  const auto id = r.submitted(alice, 2, j);
  CHECK(r.in_core(id));
  CHECK(r.intake->ledger().jobs_of(k_alice) == 1);
}

// A submission whose COMMIT landed but whose answer was lost (in doubt) is
// refused to the client as "store unavailable, retrying (submit again)"; the
// resend with the same token finds the stored job (created == false). It
// must arrive then: this test failed when job_intake only answered its id,
// and the job stayed PENDING in the store, unknown to the job table and the
// core, until aqsd restarted and recovered it.
TEST_CASE("job_intake: a submission stored in doubt and resent with its token arrives once") {
  rig r;
  auto alice = r.user(k_alice);
  const auto j = rig::job_with_token("tok-doubt");
  r.store.inject(store::memory_job_store::fault::commit_in_doubt, 1);
  CHECK(r.refused(alice, 1, j) == protocol::error_code::internal);
  CHECK(r.stored_jobs() == 1);  // it landed
  const auto id = r.submitted(alice, 2, j);
  CHECK(r.store.get_job(id)->status.state == job_state::pending);
  CHECK(r.intake->jobs().is_live(id));
  CHECK(r.in_core(id));
  CHECK(r.intake->ledger().jobs_of(k_alice) == 1);
}

TEST_CASE("job_intake: --dependency=singleton waits for the user's earlier job of that name; afterany goes on failure") {
  rig r;
  auto alice = r.user(k_alice);
  const auto first = r.submitted(alice, 1, rig::job("solo"));
  auto j = rig::job("solo");
  j.geometry.emplace();
  j.geometry->dependency = "singleton";
  const auto second = r.submitted(alice, 2, j);
  // Another user's job of that name, and another name, are no reason to wait.
  const auto bobs = r.submitted(r.user(k_bob), 3, j);
  auto other = j;
  other.name = "other";
  const auto other_id = r.submitted(alice, 4, other);
  CHECK(r.intake->deps().is_held(second));
  CHECK(r.reason(second) == "Dependency");
  CHECK(r.in_core(bobs));
  CHECK(r.in_core(other_id));
  r.finish(first, job_state::failed);
  CHECK(r.in_core(second));

  // afterany: a failed dependency is no reason to cancel.
  const auto a = r.submitted(alice, 5, rig::job("a"));
  auto any = rig::job("any");
  any.geometry.emplace();
  any.geometry->dependency = "afterany:" + std::to_string(a);
  const auto after_any = r.submitted(alice, 6, any);
  CHECK(r.intake->deps().is_held(after_any));
  r.finish(a, job_state::failed);
  CHECK(r.in_core(after_any));
  CHECK(r.ended.empty());
}

// A probe for ThreadSanitizer, skipped in the ordinary build (without it the
// race rarely shows): a reload swaps the partitions on the strand while
// handle_submit reads them on the session thread that read the message.
// They were the controller's options_.partitions, assigned in place: built
// with -fsanitize=thread this reported a data race between
// site_config::operator= and handle_submit. The intake now owns them as a
// snapshot swapped under a mutex (job_intake::partitions()).
TEST_CASE("job_intake: a reload of the partitions does not race a submission's check" * doctest::skip()) {
  rig r({}, core::parse_config("PartitionName=debug Nodes=n1 Default=YES MaxTime=30:00\n", "aqs.conf"));
  const auto c1 = r.partitions;
  const auto c2 = core::parse_config("PartitionName=debug Nodes=n1 Default=YES MaxTime=20:00\nPartitionName=b Nodes=n1\n",
                                     "aqs.conf");
  std::atomic<bool> done{false};
  std::thread strand([&] {
    for (int i = 0; i < 200; ++i) r.pipe.post([&, i] { r.intake->set_partitions((i % 2) ? c2 : c1); });
    while (!done) r.io.run_one_for(5ms);
  });
  auto alice = r.user(k_alice);
  for (int i = 0; i < 200; ++i) {
    auto j = rig::job();
    j.walltime_s = 3600;
    r.intake->handle_submit(alice, protocol::submit{i + 1, j});
  }
  done = true;
  strand.join();
  CHECK(alice->count() == 200);
}

// ---- accounting at submission and admission (job_accounting.hpp) ----------

namespace {

// root -> physics (GrpTRES=cpu=3 when asked) with alice (4101) in it; bob (4102) in no account.
core::account_tree physics_tree(core::limits alice_limits = {}, core::limits physics_limits = {}) {
  core::account_tree t;
  t.accounts.push_back({"root", "", 1, {}, "", ""});
  t.accounts.push_back({"physics", "root", 1, physics_limits, "", ""});
  t.accounts.push_back({"chem", "root", 1, {}, "", ""});
  const std::string alice = daemon::user_name_of(k_alice);
  t.associations.push_back({alice, "physics", 1, alice_limits});
  t.default_account[alice] = "physics";
  return t;
}

daemon::accounting_options enforcing(bool limits) {
  daemon::accounting_options o;
  o.enforce_associations = true;
  o.enforce_limits = limits;
  return o;
}

protocol::job_spec job_in(std::string account) {
  auto s = rig::job();
  s.geometry = protocol::job_geometry{};
  if (!account.empty()) s.geometry->recorded.push_back("account=" + account);
  return s;
}

// What aqsd's change sink tells the accounting when a job ends.
void ended(rig& r, std::int64_t id) {
  r.finish(id, job_state::completed);
  r.on_strand([&] {
    daemon::job_change ch;
    ch.job_id = id;
    ch.state = job_state::completed;
    r.accounts->on_change(ch);
  });
}

}  // namespace

TEST_CASE("job_accounting: an account the user is not in, or a user without one, is refused in one line; nothing is stored") {
  rig r({}, {}, enforcing(false));
  r.on_strand([&] { r.accounts->replace_tree(physics_tree()); });
  auto alice = r.user(k_alice), bob = r.user(k_bob);
  std::string why;
  CHECK(r.refused(alice, 1, job_in("chem"), &why) == protocol::error_code::bad_request);
  CHECK(why.find("is not in account chem") != std::string::npos);
  CHECK(why.find("physics") != std::string::npos);  // the accounts the user is in
  CHECK(why.find('\n') == std::string::npos);
  CHECK(r.refused(bob, 2, job_in(""), &why) == protocol::error_code::bad_request);
  CHECK(why.find("has no account") != std::string::npos);
  CHECK(r.stored_jobs() == 0);
  // Without -A: the default account, kept with the job.
  const auto id = r.submitted(alice, 3, job_in(""));
  const auto rec = r.store.get_job(id);
  REQUIRE(rec);
  CHECK(r.in_core(id));
  CHECK(r.accounts->state().account_of(static_cast<core::job_id>(id)) == "physics");
}

TEST_CASE("job_accounting: without enforcement nothing is refused and users with accounts are still charged") {
  rig r;
  r.on_strand([&] { r.accounts->replace_tree(physics_tree()); });
  auto bob = r.user(k_bob), alice = r.user(k_alice);
  const auto b = r.submitted(bob, 1, job_in("nowhere"));
  CHECK(r.in_core(b));
  // In no account: tracked for its usage only, under the account it asked for.
  CHECK(r.accounts->state().tracks(static_cast<core::job_id>(b)));
  CHECK(r.accounts->state().account_of(static_cast<core::job_id>(b)) == "nowhere");
  CHECK_FALSE(r.accounts->state().limit_job_of(static_cast<core::job_id>(b), 1));
  const auto a = r.submitted(alice, 2, job_in(""));
  CHECK(r.accounts->state().account_of(static_cast<core::job_id>(a)) == "physics");
}

TEST_CASE("job_accounting: MaxJobs holds the next job outside the core with Slurm's reason until one ends") {
  core::limits one;
  one.max_jobs = 1;
  rig r({}, {}, enforcing(true));
  r.on_strand([&] { r.accounts->replace_tree(physics_tree(one)); });
  auto alice = r.user(k_alice);
  const auto first = r.submitted(alice, 1, job_in(""));
  const auto second = r.submitted(alice, 2, job_in(""));
  CHECK(r.in_core(first));
  CHECK_FALSE(r.in_core(second));
  CHECK(r.reason(second) == "AssocMaxJobsLimit");
  CHECK(r.intake->waits_outside_core(second));
  ended(r, first);
  CHECK(r.in_core(second));
  CHECK(r.reason(second).empty());
}

TEST_CASE("job_accounting: MaxSubmitJobs refuses the submission over it in one line, and nothing is stored") {
  core::limits one;
  one.max_submit_jobs = 1;
  rig r({}, {}, enforcing(true));
  r.on_strand([&] { r.accounts->replace_tree(physics_tree(one)); });
  auto alice = r.user(k_alice);
  const auto first = r.submitted(alice, 1, job_in(""));
  std::string why;
  CHECK(r.refused(alice, 2, job_in(""), &why) == protocol::error_code::bad_request);
  CHECK(why.find("MaxSubmitJobs") != std::string::npos);
  CHECK(r.stored_jobs() == 1);
  ended(r, first);
  CHECK(r.submitted(alice, 3, job_in("")) > first);
}

TEST_CASE("job_accounting: an adaptive job's growth stops at its account's GrpTRES=cpu") {
  core::limits three;
  three.grp_cpus = 3;
  rig r({}, {}, enforcing(true));
  r.on_strand([&] { r.accounts->replace_tree(physics_tree({}, three)); });
  auto alice = r.user(k_alice);
  auto s = job_in("");
  s.adaptive = true;
  s.min_pe = 1;
  s.max_pe = 8;
  const auto id = r.submitted(alice, 1, s);
  REQUIRE(r.in_core(id));
  CHECK(r.core.get(static_cast<core::job_id>(id)).req.max_pe == 3);
  // A second job of the account: the first counts at its largest size, so it waits.
  const auto next = r.submitted(alice, 2, job_in(""));
  CHECK_FALSE(r.in_core(next));
  CHECK(r.reason(next) == "AssocGrpCpuLimit");
}

TEST_CASE("job_intake: a job with --begin waits outside the core with BeginTime until its time, then arrives") {
  rig r;
  auto alice = r.user(k_alice);
  auto s = rig::job();
  s.geometry = protocol::job_geometry{};
  s.geometry->begin_time = static_cast<std::int64_t>(r.clock.wall_seconds()) + 60;
  const auto id = r.submitted(alice, 1, s);
  CHECK_FALSE(r.in_core(id));
  CHECK(r.reason(id) == "BeginTime");
  CHECK(r.intake->waits_outside_core(id));
  r.pass(30s);
  CHECK_FALSE(r.in_core(id));
  r.pass(31s);
  CHECK(r.until([&] { return r.in_core(id); }));
  CHECK(r.reason(id).empty());
  // One cancelled while it waits never arrives.
  s.geometry->begin_time = static_cast<std::int64_t>(r.clock.wall_seconds()) + 60;
  const auto later = r.submitted(alice, 2, s);
  r.finish(later, job_state::cancelled);
  r.pass(61s);
  r.on_strand([] {});
  CHECK_FALSE(r.in_core(later));
  // A time already past: at once.
  auto past = rig::job();
  past.geometry = protocol::job_geometry{};
  past.geometry->begin_time = 1;
  CHECK(r.in_core(r.submitted(alice, 3, past)));
}
