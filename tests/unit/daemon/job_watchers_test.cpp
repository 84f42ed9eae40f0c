// The watchers part alone (job_watchers), with the real nodes and steps
// parts and a real write pipeline over an in-memory store (for a finished
// job's state, read on the read pool): a watcher sees only jobs it may see
// (its own, or any as root), gets the job's state and output; output is
// taken only from the node that runs the job; a final state or a closed
// connection ends the watch; every change sink hears every committed change.
#include <doctest/doctest.h>

#include "daemon/job_watchers.hpp"
#include "node_rig.hpp"
#include "store_samples.hpp"
#include "strand_rig.hpp"

using namespace aqs;
using namespace std::chrono_literals;
using core::job_state;

namespace {

struct rig : test::node_rig {
  test::strand_rig s;
  daemon::job_table jobs;
  daemon::step_manager steps{core, nodes, jobs};
  daemon::job_watchers watchers{core, jobs, nodes, steps, s.pipe, clock};
  std::shared_ptr<test::fake_connection> n1, n2;
  std::vector<daemon::job_change> changes;

  rig() {
    n1 = agent("n1", 2);
    n2 = agent("n2", 2);
    watchers.on_change([this](const daemon::job_change& c) { changes.push_back(c); });
  }
  // A live job of `uid`, running on n1 (or pending).
  void job(std::int64_t id, std::int32_t uid, bool run = true) {
    daemon::job_entry e;
    e.uid = uid;
    e.user = uid == 1000 ? "alice" : "bob";
    if (run) {
      running(id, procs({0, 1}));
      e.host = 0;
    } else {
      core::job_request r;
      r.id = static_cast<core::job_id>(id);
      core.apply(core::event::arrival(r));
    }
    REQUIRE(jobs.add(id, e));
  }
  std::shared_ptr<test::fake_connection> client(uid_t uid) {
    return std::make_shared<test::fake_connection>(protocol::peer_role::client, uid);
  }
  std::optional<protocol::message> watch(const std::shared_ptr<test::fake_connection>& c, std::int64_t rid,
                                         std::int64_t job) {
    watchers.handle_watch(c, protocol::watch_job{rid, job});
    return c->reply(rid, 0ms);
  }
  static std::optional<protocol::job_event> event(const std::shared_ptr<test::fake_connection>& c) {
    return c->take<protocol::job_event>([](const protocol::job_event&) { return true; }, 0ms);
  }
  static std::optional<protocol::output> out(const std::shared_ptr<test::fake_connection>& c) {
    return c->take<protocol::output>([](const protocol::output&) { return true; }, 0ms);
  }
  // The output the connection was sent: there must be some.
  static std::string output_text(const std::shared_ptr<test::fake_connection>& c) {
    auto o = out(c);
    REQUIRE(o);
    return o->data;
  }
  static protocol::output text(std::int64_t job, std::string data) {
    protocol::output o;
    o.job_id = job;
    o.data = std::move(data);
    return o;
  }
};

using test::code_of;
using test::is_ok;

}  // namespace

TEST_CASE("job_watchers: the owner and root may watch a live job, another user may not") {
  rig r;
  r.job(5, 1000);
  auto alice = r.client(1000);
  auto bob = r.client(1001);
  auto root = r.client(0);
  CHECK(code_of(r.watch(bob, 1, 5)) == protocol::error_code::permission_denied);
  CHECK(bob->count() == 0);
  CHECK(is_ok(r.watch(alice, 2, 5)));
  auto ev = rig::event(alice);
  REQUIRE(ev);
  CHECK(ev->state == job_state::running);
  CHECK(ev->procs == "1100");
  CHECK(is_ok(r.watch(root, 3, 5)));
  CHECK(rig::event(root));

  // A change reaches both watchers, never the refused one.
  r.watchers.notify(5, job_state::suspended, std::nullopt, std::nullopt, nullptr);
  CHECK(rig::event(alice)->state == job_state::suspended);
  CHECK(rig::event(root)->state == job_state::suspended);
  CHECK(bob->count() == 0);
}

TEST_CASE("job_watchers: output only from the node that runs the job or a step of it reaches the watcher") {
  rig r;
  r.job(5, 1000);
  auto alice = r.client(1000);
  REQUIRE(is_ok(r.watch(alice, 1, 5)));
  rig::event(alice);
  // n2 runs nothing of job 5: dropped.
  r.watchers.handle_output(r.n2, rig::text(5, "forged"));
  CHECK_FALSE(rig::out(alice));
  // A client connection is no node.
  r.watchers.handle_output(r.client(1000), rig::text(5, "forged too"));
  CHECK_FALSE(rig::out(alice));
  r.watchers.handle_output(r.n1, rig::text(5, "hello\n"));
  CHECK(rig::output_text(alice) == "hello\n");
}

TEST_CASE("job_watchers: output from a node that runs a step of the job reaches the watcher") {
  rig r;
  // Job 9 runs its script on n1 and holds n2's processors too.
  r.running(9, r.procs({0, 1, 2, 3}));
  daemon::job_entry e;
  e.uid = 1000;
  e.user = "alice";
  e.host = 0;
  REQUIRE(r.jobs.add(9, e));
  auto alice = r.client(1000);
  REQUIRE(is_ok(r.watch(alice, 1, 9)));
  rig::event(alice);
  r.watchers.handle_output(r.n2, rig::text(9, "before the step"));
  CHECK_FALSE(rig::out(alice));
  // Its aqs-rsh starts a step on n2: n2 speaks for the job from now on.
  auto launcher = std::make_shared<test::fake_connection>(protocol::peer_role::job);
  launcher->speak_for(9, true);
  protocol::remote_exec m;
  m.id = 2;
  m.job_id = 9;
  m.host = "n2";
  m.command = "orted";
  r.steps.handle_remote_exec(launcher, m);
  REQUIRE(r.steps.runs(9, 1));
  r.watchers.handle_output(r.n2, rig::text(9, "rank 2\n"));
  CHECK(rig::output_text(alice) == "rank 2\n");
}

TEST_CASE("job_watchers: output that came before the watcher is given to it when it comes") {
  rig r;
  r.job(6, 1000);
  r.watchers.handle_output(r.n1, rig::text(6, "early"));
  auto alice = r.client(1000);
  REQUIRE(is_ok(r.watch(alice, 1, 6)));
  CHECK(rig::output_text(alice) == "early");
}

TEST_CASE("job_watchers: a final state ends the watch; a closed connection is dropped and its jobs returned") {
  rig r;
  r.job(5, 1000);
  r.job(6, 1000, false);
  auto alice = r.client(1000);
  auto other = r.client(1000);
  REQUIRE(is_ok(r.watch(alice, 1, 5)));
  REQUIRE(is_ok(r.watch(alice, 2, 6)));
  REQUIRE(is_ok(r.watch(other, 3, 6)));
  rig::event(alice);
  auto pending = rig::event(alice);
  REQUIRE(pending);
  CHECK(pending->state == job_state::pending);
  CHECK_FALSE(pending->procs);
  rig::event(other);

  r.watchers.notify(5, job_state::completed, 0, std::nullopt, nullptr);
  auto done = rig::event(alice);
  REQUIRE(done);
  CHECK(done->exit_code == 0);
  r.watchers.notify(5, job_state::running, std::nullopt, std::nullopt, nullptr);  // nothing after the end
  CHECK_FALSE(rig::event(alice));

  // alice's connection closes: job 6 still has `other`, so it is not the last.
  CHECK(r.watchers.drop(*alice).empty());
  r.watchers.notify(6, job_state::running, std::nullopt, std::nullopt, nullptr);
  CHECK_FALSE(rig::event(alice));
  CHECK(rig::event(other));
  CHECK(r.watchers.drop(*other) == std::vector<std::int64_t>{6});
}

TEST_CASE("job_watchers: an ended job's final state is told to its owner only, from the table or the store") {
  rig r;
  // Ended while aqsd ran: kept in the job table.
  r.job(5, 1000);
  r.jobs.finish(5, job_state::failed, 2, std::nullopt);
  auto alice = r.client(1000);
  auto bob = r.client(1001);
  CHECK(code_of(r.watch(bob, 1, 5)) == protocol::error_code::permission_denied);
  CHECK(is_ok(r.watch(alice, 2, 5)));
  auto ev = rig::event(alice);
  REQUIRE(ev);
  CHECK(ev->state == job_state::failed);
  CHECK(ev->exit_code == 2);

  // Ended before: read from the store on the read pool.
  auto q = test::sample_request("alice", 1);
  q.uid = 1000;
  const auto id = r.s.store.submit(q);
  store::job_transition t;
  t.job_id = id;
  t.to = job_state::cancelled;
  t.reason = "cancelled";
  r.s.store.transition(t);
  r.watchers.handle_watch(bob, protocol::watch_job{3, id});
  auto refused = bob->reply(3);
  CHECK(code_of(refused) == protocol::error_code::permission_denied);
  r.watchers.handle_watch(alice, protocol::watch_job{4, id});
  CHECK(is_ok(alice->reply(4)));
  auto from_store = alice->take<protocol::job_event>([](const protocol::job_event&) { return true; });
  REQUIRE(from_store);
  CHECK(from_store->state == job_state::cancelled);
  // No such job.
  r.watchers.handle_watch(alice, protocol::watch_job{5, 999});
  CHECK(code_of(alice->reply(5)) == protocol::error_code::not_found);
}

TEST_CASE("job_watchers: every sink hears every committed change, with its map and the time of the part's clock") {
  rig r;
  r.job(5, 1000);
  const auto p = r.core.get(5).procs;
  r.clock.advance(1500ms);
  r.watchers.notify(5, job_state::running, std::nullopt, std::nullopt, &p);
  r.watchers.notify(5, job_state::completed, 0, std::nullopt, nullptr);
  REQUIRE(r.changes.size() == 2);
  CHECK(r.changes[0].procs == "1100");
  CHECK(r.changes[0].time == doctest::Approx(r.clock.wall_seconds()));
  CHECK(r.changes[1].state == job_state::completed);
  CHECK(r.changes[1].exit_code == 0);
  CHECK(r.changes[1].procs.empty());
}
