// The steps part alone (step_manager) with the real nodes part, agents on
// fake connections: aqs-rsh's remote_exec from the job's own launcher only,
// one step per job and node, its launch answered and its end reported to the
// launcher that asked; the steps' nodes cleaned when the job or its launcher
// ends; the job's --signal carried to its steps' nodes. No sockets, no store
// beyond memory, no real time.
#include <doctest/doctest.h>

#include "daemon/step_manager.hpp"
#include "node_rig.hpp"

using namespace aqs;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t k_job = 7;

bool any_launch(const protocol::launch&) { return true; }
bool any_kill(const protocol::kill&) { return true; }

struct rig : test::node_rig {
  daemon::job_table jobs;
  daemon::step_manager steps{core, nodes, jobs};
  std::shared_ptr<test::fake_connection> n1, n2, n3;

  rig() {
    n1 = agent("n1", 2, "h1.example.org");
    n2 = agent("n2", 2, "h2.example.org");
    n3 = agent("n3", 2, "h3.example.org");
    // Job 7 runs on n1 (its batch host) and n2: processors 0,1 and 2,3.
    running(k_job, procs({0, 1, 2, 3}));
    daemon::job_entry e;
    e.user = "alice";
    e.uid = 1000;
    e.gid = 1000;
    e.name = "mpi";
    e.host = 0;
    e.token = "secret";
    e.req = core.get(k_job).req;
    REQUIRE(jobs.add(k_job, e));
  }
  std::shared_ptr<test::fake_connection> launcher(std::int64_t job, bool is_launcher = true) {
    auto c = std::make_shared<test::fake_connection>(protocol::peer_role::job);
    c->speak_for(job, is_launcher);
    return c;
  }
  std::optional<protocol::message> exec(const std::shared_ptr<test::fake_connection>& c, std::int64_t rid,
                                        std::int64_t job, const std::string& host) {
    protocol::remote_exec m;
    m.id = rid;
    m.job_id = job;
    m.host = host;
    m.command = "orted --foo";
    steps.handle_remote_exec(c, m);
    return c->reply(rid, 0ms);
  }
  // What n2's agent was sent: there must be one.
  protocol::launch launch_sent_to_n2() {
    auto m = n2->take<protocol::launch>(any_launch, 0ms);
    REQUIRE(m);
    return *m;
  }
  protocol::kill kill_sent_to_n2() {
    auto m = n2->take<protocol::kill>(any_kill, 0ms);
    REQUIRE(m);
    return *m;
  }
  // The launcher asks for a step on h2 (request rid) and n2's agent says it runs.
  void start_step(const std::shared_ptr<test::fake_connection>& l, std::int64_t rid) {
    exec(l, rid, k_job, "h2");
    const auto launch = launch_sent_to_n2();
    steps.launch_answered(nodes.at(1), launch.id, protocol::ok{launch.id, {}});
  }
};

}  // namespace

TEST_CASE("step_manager: a launcher's step starts on the job's node of that host and its end comes back to it") {
  rig r;
  auto l = r.launcher(k_job);
  // The host as OpenMPI names it: up to its first dot.
  CHECK_FALSE(r.exec(l, 1, k_job, "h2"));  // no reply before the agent answers
  auto launch = r.n2->take<protocol::launch>(any_launch, 0ms);
  REQUIRE(launch);
  CHECK(launch->job_id == k_job);
  CHECK(launch->user == "alice");
  CHECK(launch->uid == 1000);
  CHECK(launch->job.argv == std::vector<std::string>{"/bin/sh", "-c", "orted --foo"});
  CHECK(launch->job_token == "secret");
  CHECK(launch->local_cpus.size() == 2);
  CHECK(r.steps.runs(k_job, 1));
  CHECK_FALSE(r.steps.runs(k_job, 0));
  CHECK(r.n1->count() == 0);
  CHECK(r.n3->count() == 0);

  // The agent says it runs: the launcher is told where.
  CHECK(r.steps.launch_answered(r.nodes.at(1), launch->id, protocol::ok{launch->id, {}}));
  auto ok = l->reply(1, 0ms);
  REQUIRE(ok);
  REQUIRE(std::holds_alternative<protocol::ok>(*ok));
  CHECK(protocol::read_reply<protocol::remote_exec_reply>(std::get<protocol::ok>(*ok)).node == "n2");
  // Another request id is not this step's.
  CHECK_FALSE(r.steps.launch_answered(r.nodes.at(1), launch->id + 100, protocol::ok{launch->id + 100, {}}));

  // It exits: the launcher hears it, the step is gone (a second exit is not a step's).
  protocol::job_exited ex;
  ex.job_id = k_job;
  ex.exit_code = 3;
  CHECK(r.steps.exited(r.nodes.at(1), ex));
  auto ended = l->take<protocol::step_ended>([](const protocol::step_ended&) { return true; }, 0ms);
  REQUIRE(ended);
  CHECK(ended->node == "n2");
  CHECK(ended->exit_code == 3);
  CHECK_FALSE(r.steps.runs(k_job, 1));
  CHECK_FALSE(r.steps.exited(r.nodes.at(1), ex));
  // The job ran a step on n2: it is cleaned there when the job ends.
  REQUIRE(r.steps.nodes_of(k_job));
  CHECK(r.steps.nodes_of(k_job)->contains(1));
}

TEST_CASE("step_manager: only the job's own launcher may start its steps, one per node, on its own hosts") {
  rig r;
  // Not a launcher, or another job's launcher: unauthorized.
  CHECK(test::code_of(r.exec(r.launcher(k_job, false), 1, k_job, "h2")) == protocol::error_code::unauthorized);
  CHECK(test::code_of(r.exec(r.launcher(99), 2, k_job, "h2")) == protocol::error_code::unauthorized);
  // A job that does not run.
  auto l99 = r.launcher(99);
  CHECK(test::code_of(r.exec(l99, 3, 99, "h2")) == protocol::error_code::invalid_state);
  // A host where the rigid job has no processors, and its own batch host.
  auto l = r.launcher(k_job);
  CHECK(test::code_of(r.exec(l, 4, k_job, "h3")) == protocol::error_code::not_found);
  CHECK(test::code_of(r.exec(l, 5, k_job, "h1")) == protocol::error_code::not_found);
  CHECK(r.n2->count() == 0);
  CHECK(r.n3->count() == 0);
  // One step per job and node.
  CHECK_FALSE(r.exec(l, 6, k_job, "h2.example.org"));
  CHECK(test::code_of(r.exec(l, 7, k_job, "h2")) == protocol::error_code::invalid_state);
}

TEST_CASE("step_manager: an agent's refusal is the launcher's error; a launcher that goes takes its steps") {
  rig r;
  auto l = r.launcher(k_job);
  r.exec(l, 1, k_job, "h2");
  const auto launch = r.launch_sent_to_n2();
  CHECK(r.steps.launch_answered(r.nodes.at(1), launch.id,
                                protocol::error{launch.id, protocol::error_code::internal, "no such user"}));
  CHECK(test::code_of(l->reply(1, 0ms)) == protocol::error_code::internal);
  CHECK_FALSE(r.steps.runs(k_job, 1));

  // Again, started; then the launcher's connection closes: the step is killed.
  r.start_step(l, 2);
  r.steps.end_of(*l);
  const auto k = r.kill_sent_to_n2();
  CHECK(k.job_id == k_job);
  CHECK(k.signal == 9);
  CHECK_FALSE(r.steps.runs(k_job, 1));
}

TEST_CASE("step_manager: the job's end ends its steps, tells their launchers and cleans their nodes") {
  rig r;
  auto l = r.launcher(k_job);
  r.start_step(l, 1);
  REQUIRE(l->reply(1, 0ms));
  r.steps.end_of_job(k_job);
  auto ended = l->take<protocol::step_ended>([](const protocol::step_ended&) { return true; }, 0ms);
  REQUIRE(ended);
  CHECK(ended->signal == 15);
  const auto k = r.kill_sent_to_n2();
  CHECK(k.job_id == k_job);
  CHECK(k.signal == 15);
  CHECK(r.steps.nodes_of(k_job) == nullptr);
  CHECK(r.n1->take<protocol::kill>(any_kill, 0ms) == std::nullopt);  // the batch host's end is the launch part's
}

TEST_CASE("step_manager: --signal from the job's batch host goes to its steps' nodes; from another node, nowhere") {
  rig r;
  auto l = r.launcher(k_job);
  r.start_step(l, 1);

  // n3 is no host of the job: acknowledged, nothing sent.
  r.steps.handle_job_signal(r.n3, protocol::job_signal{20, k_job, 10});
  CHECK(r.n3->reply(20, 0ms));
  CHECK(r.n2->take<protocol::kill>(any_kill, 0ms) == std::nullopt);
  // n1 runs its script: n2 (its step's node) gets the signal for the job's steps.
  r.steps.handle_job_signal(r.n1, protocol::job_signal{21, k_job, 10});
  CHECK(r.n1->reply(21, 0ms));
  const auto k = r.kill_sent_to_n2();
  CHECK(k.signal == 10);
  CHECK(k.steps);
  CHECK_FALSE(k.escalate);
  // A connection that is no agent must register first.
  auto stranger = std::make_shared<test::fake_connection>(protocol::peer_role::node);
  r.steps.handle_job_signal(stranger, protocol::job_signal{22, k_job, 10});
  CHECK(test::code_of(stranger->reply(22, 0ms)) == protocol::error_code::invalid_state);
}
