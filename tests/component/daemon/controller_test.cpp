// The controller over the in-memory store, in virtual time: agents, clients
// and shims are in-memory connections, the store can lose commits or go
// down, and timeouts (heartbeats, resizes) pass in milliseconds.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "daemon/controller.hpp"
#include "fake_connection.hpp"
#include "manual_clock.hpp"
#include "store/memory_job_store.hpp"

using namespace aqs;
using namespace std::chrono_literals;
using core::job_state;
using test::fake_connection;

namespace {

constexpr uid_t k_user = 1000;

class harness {
public:
  explicit harness(daemon::controller_options o = {}) : options_(std::move(o)) {
    ctl_ = std::make_unique<daemon::controller>(io_, store_, options_, [this] { stop_requested_ = true; }, clock_);
    ctl_->recover();
    ctl_->start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~harness() {
    // Order: the controller's pools and the store's callbacks call into the
    // controller and the io_context, so they stop first.
    ctl_->stop();
    store_.shutdown();
    guard_.reset();
    io_.stop();
    thread_.join();
  }

  daemon::controller& ctl() { return *ctl_; }
  store::memory_job_store& store() { return store_; }
  test::manual_clock& clock() { return clock_; }
  bool stop_requested() const { return stop_requested_; }
  std::int64_t next_id() { return next_id_++; }

  // Passes virtual time; what fell due has run on the strand when this returns.
  void advance(std::chrono::milliseconds d) {
    clock_.advance(d);
    settle();
  }
  // Everything posted to the strand so far has run (list_nodes goes through it).
  void settle() { (void)nodes(); }

  // An agent on the Unix socket as root, registered with `procs` processors
  // (pinned to `cpus`, if given), still running `running` (jobs of the
  // cluster it registered with before).
  std::shared_ptr<fake_connection> agent(const std::string& name, std::int64_t procs,
                                         std::vector<std::int64_t> cpus = {}, std::vector<std::int64_t> running = {}) {
    auto a = std::make_shared<fake_connection>(protocol::peer_role::node, 0);
    ctl_->on_open(a);
    protocol::register_node r;
    r.id = next_id();
    r.name = name;
    r.procs = procs;
    r.host = name;
    r.cpus = std::move(cpus);
    r.running = std::move(running);
    r.cluster_id = cluster_id_;
    ctl_->on_message(a, r);
    const auto reply = a->reply(r.id);
    REQUIRE(reply);
    REQUIRE(std::holds_alternative<protocol::ok>(*reply));
    cluster_id_ = std::get<protocol::ok>(*reply).result.at("cluster_id").get<std::string>();
    return a;
  }
  std::shared_ptr<fake_connection> client(uid_t uid = k_user) {
    auto c = std::make_shared<fake_connection>(protocol::peer_role::client, uid);
    ctl_->on_open(c);
    return c;
  }
  // Submits and returns the job's id (0 if refused; then `refusal` says why).
  std::int64_t submit(const std::shared_ptr<fake_connection>& c, std::int64_t min_pe, std::int64_t max_pe,
                      bool adaptive, std::string* refusal = nullptr) {
    protocol::submit s;
    s.id = next_id();
    s.job.name = "job";
    s.job.argv = {"/bin/true"};
    s.job.workdir = "/tmp";
    s.job.min_pe = min_pe;
    s.job.max_pe = max_pe;
    s.job.adaptive = adaptive;
    ctl_->on_message(c, s);
    const auto reply = c->reply(s.id);
    REQUIRE(reply);
    if (const auto* err = std::get_if<protocol::error>(&*reply)) {
      if (refusal) *refusal = err->message;
      return 0;
    }
    return std::get<protocol::ok>(*reply).result.at("job_id").get<std::int64_t>();
  }
  nlohmann::json nodes() {
    auto c = client(0);
    protocol::list_nodes m;
    m.id = next_id();
    ctl_->on_message(c, m);
    const auto reply = c->reply(m.id);
    REQUIRE(reply);
    return std::get<protocol::ok>(*reply).result.at("nodes");
  }
  job_state state_of(std::int64_t job) {
    const auto rec = store_.get_job(job);
    REQUIRE(rec);
    return rec->status.state;
  }
  // The store's writer runs on its own thread: what the strand decided is
  // written a moment later. Waits (real time, up to 2 s) for the job's state.
  job_state eventually(std::int64_t job, job_state want) {
    job_state now = state_of(job);
    for (int i = 0; i < 400 && now != want; ++i) {
      std::this_thread::sleep_for(5ms);
      now = state_of(job);
    }
    return now;
  }
  bool history_says(std::int64_t job, const std::string& text) {
    for (const auto& e : store_.job_history(job)) {
      if (e.reason.find(text) != std::string::npos) return true;
    }
    return false;
  }
  // The agent is told to launch the job; it says it started.
  protocol::launch launched(const std::shared_ptr<fake_connection>& a, std::int64_t job) {
    auto l = a->take<protocol::launch>([job](const protocol::launch& m) { return m.job_id == job; });
    REQUIRE(l);
    ctl_->on_message(a, protocol::ok{l->id, {}});
    return *l;
  }
  // The job's runtime shim connects (as the job's user).
  std::shared_ptr<fake_connection> shim_of(std::int64_t job) {
    auto shim = std::make_shared<fake_connection>(protocol::peer_role::job, k_user);
    shim->mutable_peer().job_id = job;
    ctl_->on_open(shim);
    return shim;
  }
  // The shim acknowledges `map` (the job runs on it now); aqsd's answer.
  std::optional<protocol::message> ack_map(const std::shared_ptr<fake_connection>& shim, std::int64_t job,
                                           const protocol::new_map& map) {
    protocol::resize_ack ack;
    ack.id = next_id();
    ack.job_id = job;
    ack.epoch = map.epoch;
    ack.procs = map.procs;
    ctl_->on_message(shim, ack);
    return shim->reply(ack.id);
  }
  // The agent reports the job's end and gets its ok (after the commit).
  bool exited(const std::shared_ptr<fake_connection>& a, std::int64_t job, std::chrono::milliseconds wait = 5s) {
    protocol::job_exited m;
    m.id = next_id();
    m.job_id = job;
    m.state = job_state::completed;
    m.exit_code = 0;
    ctl_->on_message(a, m);
    const auto reply = a->reply(m.id, wait);
    return reply && std::holds_alternative<protocol::ok>(*reply);
  }

private:
  daemon::controller_options options_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_{io_.get_executor()};
  test::manual_clock clock_;
  store::memory_job_store store_;
  std::unique_ptr<daemon::controller> ctl_;
  std::thread thread_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<std::int64_t> next_id_{1};
  std::string cluster_id_;  // aqsd's, from the first registration on
};

std::string node_state(const nlohmann::json& nodes, const std::string& name) {
  for (const auto& n : nodes) {
    if (n.at("name") == name) return n.at("state").get<std::string>();
  }
  return "missing";
}

}  // namespace

TEST_CASE("a node silent past the heartbeat timeout goes DOWN; one that beats stays UP") {
  harness h;
  auto quiet = h.agent("n1", 2);
  auto alive = h.agent("n2", 2);
  CHECK(node_state(h.nodes(), "n1") == "UP");
  for (int i = 0; i < 4; ++i) {
    h.advance(3s);
    protocol::heartbeat hb;
    hb.id = h.next_id();
    h.ctl().on_message(alive, hb);
    REQUIRE(alive->reply(hb.id));
  }
  h.advance(200ms);
  const auto nodes = h.nodes();
  CHECK(node_state(nodes, "n1") == "DOWN");
  CHECK(node_state(nodes, "n2") == "UP");
  CHECK(quiet->closed());
  bool stored_down = false;
  for (int i = 0; i < 400 && !stored_down; ++i) {
    stored_down = h.store().list_nodes().at(0).state == store::node_state::down;
    if (!stored_down) std::this_thread::sleep_for(5ms);
  }
  CHECK(stored_down);
}

TEST_CASE("a job runs on the node it is given and ends COMPLETED when its agent says so") {
  harness h;
  auto a = h.agent("n1", 4);
  auto c = h.client();
  const std::int64_t job = h.submit(c, 2, 2, false);
  REQUIRE(job > 0);
  const auto l = h.launched(a, job);
  CHECK(l.nprocs == 2);
  CHECK(l.uid == static_cast<std::int64_t>(k_user));
  CHECK(h.state_of(job) == job_state::running);
  CHECK(h.exited(a, job));
  CHECK(h.state_of(job) == job_state::completed);
}

TEST_CASE("a resize the job never applies times out and the job keeps its processors") {
  daemon::controller_options o;
  o.resize_timeout = 30s;
  o.heartbeat_timeout = 1h;  // the agent sends none here
  harness h(o);
  auto a = h.agent("n1", 4);
  auto c = h.client();
  const std::int64_t grows = h.submit(c, 1, 4, true);
  h.launched(a, grows);
  auto shim = h.shim_of(grows);
  // A second job makes room for itself: the first is asked to shrink.
  const std::int64_t second = h.submit(c, 2, 2, false);
  const auto map = shim->take<protocol::new_map>();
  REQUIRE(map);
  h.settle();  // the timeout is armed right after the map goes out, on the strand
  CHECK(h.state_of(grows) == job_state::resizing);
  h.advance(29s);
  CHECK(h.state_of(grows) == job_state::resizing);
  h.advance(1s);
  CHECK(h.eventually(grows, job_state::running) == job_state::running);
  CHECK(h.history_says(grows, "resize timed out"));
  CHECK(h.state_of(second) == job_state::pending);
  // Its shim can no longer apply the withdrawn map.
  protocol::resize_begin b;
  b.id = h.next_id();
  b.job_id = grows;
  b.epoch = map->epoch;
  h.ctl().on_message(shim, b);
  const auto reply = shim->reply(b.id);
  REQUIRE(reply);
  CHECK(std::holds_alternative<protocol::error>(*reply));
}

TEST_CASE("a submission while the store is down is refused as unavailable, and taken once it is back") {
  harness h;
  h.agent("n1", 4);
  auto c = h.client();
  h.store().set_down(true);
  std::string why;
  CHECK(h.submit(c, 1, 1, false, &why) == 0);
  CHECK(why.find("store unavailable") != std::string::npos);
  h.store().set_down(false);
  CHECK(h.submit(c, 1, 1, false) > 0);
}

TEST_CASE("a job's end is acknowledged only once stored: held while the store is down, then written") {
  harness h;
  auto a = h.agent("n1", 4);
  auto c = h.client();
  const std::int64_t job = h.submit(c, 1, 1, false);
  h.launched(a, job);
  h.store().set_down(true);
  CHECK_FALSE(h.exited(a, job, 300ms));  // no ok: the agent keeps the report and resends it
  h.store().set_down(false);
  CHECK(a->take<protocol::ok>());
  CHECK(h.state_of(job) == job_state::completed);
}

TEST_CASE("a transition whose commit was lost or in doubt is written exactly once") {
  harness h;
  auto a = h.agent("n1", 4);
  auto c = h.client();
  const std::int64_t lost = h.submit(c, 1, 1, false);
  const std::int64_t doubt = h.submit(c, 1, 1, false);
  h.launched(a, lost);
  h.launched(a, doubt);
  h.store().inject(store::memory_job_store::fault::commit_lost);
  CHECK(h.exited(a, lost));
  CHECK(h.state_of(lost) == job_state::completed);
  h.store().inject(store::memory_job_store::fault::commit_in_doubt);
  CHECK(h.exited(a, doubt));
  CHECK(h.state_of(doubt) == job_state::completed);
  std::size_t completions = 0;
  for (const auto& e : h.store().job_history(doubt)) completions += e.new_state == job_state::completed ? 1 : 0;
  CHECK(completions == 1);
  CHECK(h.store().faults_pending() == 0);
}

TEST_CASE("afterok: a job waits for its dependency and is cancelled when the dependency fails") {
  harness h;
  auto a = h.agent("n1", 4);
  auto c = h.client();
  const std::int64_t first = h.submit(c, 1, 1, false);
  h.launched(a, first);
  protocol::submit s;
  s.id = h.next_id();
  s.job.name = "after";
  s.job.argv = {"/bin/true"};
  s.job.workdir = "/tmp";
  s.job.afterok = {first};
  h.ctl().on_message(c, s);
  const auto reply = c->reply(s.id);
  REQUIRE(reply);
  const std::int64_t after = std::get<protocol::ok>(*reply).result.at("job_id").get<std::int64_t>();
  h.settle();
  CHECK(h.state_of(after) == job_state::pending);
  protocol::job_exited m;
  m.id = h.next_id();
  m.job_id = first;
  m.state = job_state::failed;
  m.exit_code = 1;
  h.ctl().on_message(a, m);
  REQUIRE(a->reply(m.id));
  CHECK(h.eventually(after, job_state::cancelled) == job_state::cancelled);
  CHECK(h.history_says(after, "dependency " + std::to_string(first) + " ended FAILED"));
}

TEST_CASE("a map the shim claimed but never acknowledges is bounded: past the claim timeout the job is killed and FAILED") {
  daemon::controller_options o;
  o.resize_timeout = 30s;
  o.resize_claim_timeout = 120s;
  o.heartbeat_timeout = 1h;  // the agent sends none here
  harness h(o);
  auto a = h.agent("n1", 4);
  auto c = h.client();
  const std::int64_t grows = h.submit(c, 1, 4, true);
  h.launched(a, grows);
  auto shim = h.shim_of(grows);
  const std::int64_t second = h.submit(c, 2, 2, false);
  const auto map = shim->take<protocol::new_map>();
  REQUIRE(map);
  h.settle();
  // The shim claims the map (its ranks start moving) and then goes silent.
  protocol::resize_begin b;
  b.id = h.next_id();
  b.job_id = grows;
  b.epoch = map->epoch;
  h.ctl().on_message(shim, b);
  const auto claimed = shim->reply(b.id);
  REQUIRE(claimed);
  REQUIRE(std::holds_alternative<protocol::ok>(*claimed));
  // Past the resize timeout: claimed, so still under way.
  h.advance(60s);
  CHECK(h.state_of(grows) == job_state::resizing);
  CHECK(h.state_of(second) == job_state::pending);
  // Past the claim timeout: the agent is told to kill it, and it ends FAILED.
  h.advance(60s);
  CHECK(h.eventually(grows, job_state::failed) == job_state::failed);
  CHECK(h.history_says(grows, "resize claimed but not acknowledged"));
  const auto kill = a->take<protocol::kill>([&](const protocol::kill& k) { return k.job_id == grows; });
  REQUIRE(kill);
  CHECK(kill->signal == SIGKILL);
  // A late ack changes nothing; its processors went to the waiting job.
  const auto late = h.ack_map(shim, grows, *map);
  REQUIRE(late);
  CHECK(std::holds_alternative<protocol::error>(*late));
  CHECK(h.launched(a, second).nprocs == 2);
}

TEST_CASE("a submit token finds only its own user's job: the same token from another user is a new job of theirs") {
  harness h;
  h.agent("n1", 4);
  auto submit = [&](uid_t uid) {
    auto c = h.client(uid);
    protocol::submit s;
    s.id = h.next_id();
    s.job.name = "tok";
    s.job.argv = {"/bin/true"};
    s.job.workdir = "/tmp";
    s.job.submit_token = "shared-token";
    h.ctl().on_message(c, s);
    const auto reply = c->reply(s.id);
    REQUIRE(reply);
    REQUIRE(std::holds_alternative<protocol::ok>(*reply));
    return std::get<protocol::ok>(*reply).result.at("job_id").get<std::int64_t>();
  };
  const std::int64_t mine = submit(k_user);
  const std::int64_t theirs = submit(k_user + 1);
  CHECK(theirs != mine);
  CHECK(submit(k_user) == mine);  // a retry finds the job again
  CHECK(submit(k_user + 1) == theirs);
  CHECK(h.store().get_job(mine)->request.uid == k_user);
  CHECK(h.store().get_job(theirs)->request.uid == k_user + 1);
}

TEST_CASE("a running job's own range request is held to its partition's MaxCPUsPerJob, as fsub and fctl are") {
  daemon::controller_options o;
  o.heartbeat_timeout = 1h;
  o.partitions = core::parse_config("PartitionName=small Nodes=n1 Default=YES MaxCPUsPerJob=2\n", "aqs.conf");
  harness h(o);
  auto a = h.agent("n1", 4);
  auto c = h.client();
  std::string why;
  CHECK(h.submit(c, 3, 3, false, &why) == 0);  // fsub's refusal
  CHECK(why.find("MaxCPUsPerJob is 2") != std::string::npos);
  const std::int64_t job = h.submit(c, 1, 2, true);
  REQUIRE(job > 0);
  h.launched(a, job);
  auto shim = h.shim_of(job);
  protocol::control m;
  m.id = h.next_id();
  m.action = "update";
  m.job_ids = {job};
  m.min_pe = 3;
  m.max_pe = 4;
  h.ctl().on_message(shim, m);
  const auto reply = shim->reply(m.id);
  REQUIRE(reply);
  const auto* err = std::get_if<protocol::error>(&*reply);
  REQUIRE_MESSAGE(err != nullptr, "the job's range request went past MaxCPUsPerJob");
  CHECK(err->message == "job " + std::to_string(job) +
                            ": Requested node configuration is not available: 3 processors asked, MaxCPUsPerJob is 2 "
                            "(partition small)");
  // Within the limit it is taken.
  m.id = h.next_id();
  m.min_pe = 2;
  m.max_pe = 2;
  h.ctl().on_message(shim, m);
  const auto ok = shim->reply(m.id);
  REQUIRE(ok);
  CHECK(std::holds_alternative<protocol::ok>(*ok));
}

TEST_CASE("a launch lost with its agent's connection is sent again when the agent is back, not left RUNNING for ever") {
  // aqsd counts a job RUNNING from its dispatch; the launch went to an agent
  // connection that closed before the agent confirmed it, so the agent never
  // got it. The agent registers again running nothing: the job must be
  // launched again there (or end as lost), not wait for ever.
  harness h;
  auto first = h.agent("n1", 4);
  auto c = h.client();
  const std::int64_t job = h.submit(c, 2, 2, false);
  REQUIRE(job > 0);
  REQUIRE(first->take<protocol::launch>([job](const protocol::launch& m) { return m.job_id == job; }));
  REQUIRE(h.eventually(job, job_state::running) == job_state::running);
  h.ctl().on_close(first);  // the connection died; the launch with it
  h.settle();
  auto again = h.agent("n1", 4);  // registers listing no running job
  std::optional<protocol::launch> relaunched;
  for (int i = 0; i < 4 && !relaunched; ++i) {
    h.advance(1s);
    protocol::heartbeat hb;
    hb.id = h.next_id();
    h.ctl().on_message(again, hb);
    REQUIRE(again->reply(hb.id));
    h.settle();
    relaunched = again->take<protocol::launch>([job](const protocol::launch& m) { return m.job_id == job; });
  }
  REQUIRE(relaunched);
  h.ctl().on_message(again, protocol::ok{relaunched->id, {}});
  CHECK(h.exited(again, job));
  CHECK(h.state_of(job) == job_state::completed);
}

// ---- issue 30: a resize that cannot be done ---------------------------------

namespace {

// A rigid job of `n` on agent `a` that starts and ends: an arrival and a
// completion, after which a job left alone by a failed resize may be asked again.
void rigid_job_comes_and_goes(harness& h, const std::shared_ptr<fake_connection>& a,
                              const std::shared_ptr<fake_connection>& c, std::int64_t n) {
  const std::int64_t r = h.submit(c, n, n, false);
  h.launched(a, r);
  REQUIRE(h.exited(a, r));
}

daemon::controller_options no_heartbeats() {
  daemon::controller_options o;
  o.heartbeat_timeout = 1h;  // the agent sends none here
  return o;
}

// A node of 4 with a rigid job of 2 (`first`) and an adaptive job of 1..4
// (`grows`) on the other 2, whose shim is connected.
struct growing {
  harness h{no_heartbeats()};
  std::shared_ptr<fake_connection> a = h.agent("n1", 4, {0, 1, 2, 3});
  std::shared_ptr<fake_connection> c = h.client();
  std::int64_t first = 0;
  std::int64_t grows = 0;
  std::shared_ptr<fake_connection> shim = std::make_shared<fake_connection>(protocol::peer_role::job, k_user);

  growing() {
    first = h.submit(c, 2, 2, false);
    h.launched(a, first);
    grows = h.submit(c, 1, 4, true);
    REQUIRE(h.launched(a, grows).nprocs == 2);
    shim->mutable_peer().job_id = grows;
    h.ctl().on_open(shim);
    h.settle();
  }
  // The shim claims the map it was sent (resize_begin); the map.
  protocol::new_map claim() {
    const auto map = shim->take<protocol::new_map>();
    REQUIRE(map);
    protocol::resize_begin b;
    b.id = h.next_id();
    b.job_id = grows;
    b.epoch = map->epoch;
    h.ctl().on_message(shim, b);
    REQUIRE(shim->reply(b.id));
    return *map;
  }
  // It applies the claimed map (ack) or gives it up (refused, `why`); aqsd's answer.
  std::optional<protocol::message> answer(const protocol::new_map& map, bool apply, const std::string& why = "") {
    if (apply) return h.ack_map(shim, grows, map);
    protocol::resize_refused r;
    r.id = h.next_id();
    r.job_id = grows;
    r.epoch = map.epoch;
    r.reason = why;
    h.ctl().on_message(shim, r);
    return shim->reply(r.id);
  }
};

}  // namespace

TEST_CASE("an expand the shim gives up is undone with its cause, and after three in a row the job is offered no more growth") {
  growing g;
  harness& h = g.h;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    CAPTURE(attempt);
    // Processors come free: the job is offered all 4.
    if (attempt == 1) {
      REQUIRE(h.exited(g.a, g.first));
    } else {
      rigid_job_comes_and_goes(h, g.a, g.c, 2);
    }
    // Its shim claims the map, its new ranks never wire up, and it says so.
    const auto map = g.claim();
    CHECK(std::count(map.procs.begin(), map.procs.end(), '1') == 4);
    h.advance(20s);
    const auto ok = g.answer(map, false, "new ranks did not reach MPI_Migrate within 20 s of their spawn");
    REQUIRE(ok);
    CHECK(std::holds_alternative<protocol::ok>(*ok));
    CHECK(h.eventually(g.grows, job_state::running) == job_state::running);
  }
  CHECK(h.history_says(g.grows, "expand to 4 abandoned after 20.0 s: new ranks did not reach MPI_Migrate within 20 s "
                                "of their spawn; running on 2"));
  CHECK_FALSE(h.history_says(g.grows, "killed"));
  // Three in a row: its maximum is lowered to its size, and said why.
  for (int i = 0; i < 400 && !h.history_says(g.grows, "growth stopped after 3 abandoned expands"); ++i) {
    std::this_thread::sleep_for(5ms);
  }
  CHECK(h.history_says(g.grows, "growth stopped after 3 abandoned expands"));
  const auto rec = h.store().get_job(g.grows);
  REQUIRE(rec);
  CHECK(rec->request.max_pe == 2);
  // Room again: no map comes.
  rigid_job_comes_and_goes(h, g.a, g.c, 2);
  CHECK_FALSE(g.shim->take<protocol::new_map>([](const protocol::new_map&) { return true; }, 300ms));
}

TEST_CASE("abandoned expands count in a row only: one that goes through starts the count again") {
  growing g;
  harness& h = g.h;
  auto& a = g.a;
  auto& c = g.c;
  // The shim claims the map it is sent, then acknowledges or refuses it.
  auto answer = [&](bool apply) {
    REQUIRE(g.answer(g.claim(), apply, "spawn did not complete"));
    CHECK(h.eventually(g.grows, job_state::running) == job_state::running);
  };
  REQUIRE(h.exited(a, g.first));
  answer(false);                            // abandoned 1
  rigid_job_comes_and_goes(h, a, c, 2);
  answer(false);                            // abandoned 2
  rigid_job_comes_and_goes(h, a, c, 2);
  answer(true);                             // grown to 4: the count starts again
  const std::int64_t rigid = h.submit(c, 2, 2, false);
  answer(true);                             // shrunk to 2 for it
  h.launched(a, rigid);
  REQUIRE(h.exited(a, rigid));
  answer(false);                            // abandoned 1
  rigid_job_comes_and_goes(h, a, c, 2);
  answer(false);                            // abandoned 2
  h.settle();
  CHECK_FALSE(h.history_says(g.grows, "growth stopped"));
  const auto rec = h.store().get_job(g.grows);
  REQUIRE(rec);
  CHECK(rec->request.max_pe == 4);
}

TEST_CASE("an --adaptive job whose shim never connects is made rigid at its size instead of held RESIZING") {
  harness h(no_heartbeats());
  auto a = h.agent("n1", 4);
  auto c = h.client();
  const std::int64_t first = h.submit(c, 2, 2, false);
  h.launched(a, first);
  const std::int64_t plain = h.submit(c, 1, 4, true);
  REQUIRE(h.launched(a, plain).nprocs == 2);
  h.advance(11s);  // past the grace: no shim ever connected
  REQUIRE(h.exited(a, first));
  h.settle();
  for (int i = 0; i < 400 && !h.history_says(plain, "treated as rigid at 2 processors"); ++i) {
    std::this_thread::sleep_for(5ms);
  }
  CHECK(h.history_says(plain, "no runtime shim connected within 10 s of its start: treated as rigid at 2 processors"));
  CHECK(h.state_of(plain) == job_state::running);
  bool resizing = false;
  for (const auto& e : h.store().job_history(plain)) resizing = resizing || e.new_state == job_state::resizing;
  CHECK_FALSE(resizing);
  const auto rec = h.store().get_job(plain);
  REQUIRE(rec);
  CHECK(rec->request.min_pe == 2);
  CHECK(rec->request.max_pe == 2);
  // The free processors go to the next job at once.
  const std::int64_t next = h.submit(c, 2, 2, false);
  CHECK(h.launched(a, next).nprocs == 2);
  // A shim that connects after all (a slow start) gives the job its range back.
  auto shim = h.shim_of(plain);
  for (int i = 0; i < 400 && !h.history_says(plain, "adaptive again"); ++i) std::this_thread::sleep_for(5ms);
  CHECK(h.history_says(plain, "runtime shim connected: adaptive again, range 1..4"));
  const auto back = h.store().get_job(plain);
  REQUIRE(back);
  CHECK(back->request.min_pe == 1);
  CHECK(back->request.max_pe == 4);
}

TEST_CASE("an --adaptive job resized before its shim could connect waits for it only until the grace is over") {
  daemon::controller_options o;
  o.resize_timeout = 60s;
  o.heartbeat_timeout = 1h;  // the agent sends none here
  harness h(o);
  auto a = h.agent("n1", 4);
  auto c = h.client();
  const std::int64_t first = h.submit(c, 2, 2, false);
  h.launched(a, first);
  const std::int64_t plain = h.submit(c, 1, 4, true);
  REQUIRE(h.launched(a, plain).nprocs == 2);
  REQUIRE(h.exited(a, first));  // at once: within the grace, it is offered 4
  CHECK(h.eventually(plain, job_state::resizing) == job_state::resizing);
  h.settle();  // its timeout is armed once the RESIZING is stored, on the strand
  // Armed for what is left of the grace (at least 1 s): 10 s after its
  // start, 11 s at most.
  h.advance(10s);
  h.advance(1s);
  CHECK(h.eventually(plain, job_state::running) == job_state::running);
  for (int i = 0; i < 400 && !h.history_says(plain, "treated as rigid at 2 processors"); ++i) {
    std::this_thread::sleep_for(5ms);
  }
  CHECK(h.history_says(plain, "treated as rigid at 2 processors"));
  const std::int64_t next = h.submit(c, 2, 2, false);
  CHECK(h.launched(a, next).nprocs == 2);
}

// ---- issue 31: cpusets that follow resizes -----------------------------------

namespace {

// The job_cpus for `job` the agent was sent (waiting up to `wait`): its cpus.
std::optional<std::vector<std::int64_t>> cpus_told(const std::shared_ptr<fake_connection>& a, std::int64_t job,
                                                   std::chrono::milliseconds wait = 5s) {
  const auto m = a->take<protocol::job_cpus>([job](const protocol::job_cpus& c) { return c.job_id == job; }, wait);
  if (!m) return std::nullopt;
  auto cpus = m->cpus;
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

using cpus = std::vector<std::int64_t>;

}  // namespace

TEST_CASE("an adaptive job's cpus on its node are widened before each map, narrowed after its ack, set back when it is not applied") {
  growing g;
  harness& h = g.h;
  // The launch pinned it to its two processors' cpus; nothing more yet.
  CHECK_FALSE(cpus_told(g.a, g.grows, 100ms));
  REQUIRE(h.exited(g.a, g.first));
  // Offered all 4: the agent has the wider cpus by the time the map is out
  // (both go out from one strand task, the agent's first).
  auto map = g.claim();
  CHECK(cpus_told(g.a, g.grows, 0ms) == cpus{0, 1, 2, 3});
  // The expand is abandoned: back to the cpus of the map it kept.
  REQUIRE(g.answer(map, false, "new ranks did not reach MPI_Migrate"));
  CHECK(cpus_told(g.a, g.grows) == cpus{2, 3});
  // Room again, and this time the expand goes through: widened, then the
  // new map's (all four) after the ack.
  rigid_job_comes_and_goes(h, g.a, g.c, 2);
  map = g.claim();
  CHECK(cpus_told(g.a, g.grows, 0ms) == cpus{0, 1, 2, 3});
  CHECK_FALSE(cpus_told(g.a, g.grows, 100ms));  // nothing narrows before the ack
  REQUIRE(g.answer(map, true));
  CHECK(cpus_told(g.a, g.grows) == cpus{0, 1, 2, 3});
  // A rigid job of 2 arrives: it shrinks; until its ack it keeps all four,
  // then it has the two it kept.
  const std::int64_t rigid = h.submit(g.c, 2, 2, false);
  map = g.claim();
  CHECK(cpus_told(g.a, g.grows, 0ms) == cpus{0, 1, 2, 3});
  CHECK_FALSE(cpus_told(g.a, g.grows, 100ms));
  REQUIRE(g.answer(map, true));
  const auto kept = cpus_told(g.a, g.grows);
  REQUIRE(kept);
  CHECK(kept->size() == 2);
  const auto l = h.launched(g.a, rigid);
  for (const auto cpu : l.local_cpus) CHECK(std::find(kept->begin(), kept->end(), cpu) == kept->end());
  // A timed-out map that was never claimed also sets them back.
  REQUIRE(h.exited(g.a, rigid));
  const auto grow = g.shim->take<protocol::new_map>();
  REQUIRE(grow);
  CHECK(cpus_told(g.a, g.grows, 0ms) == cpus{0, 1, 2, 3});
  h.settle();  // its timeout is armed right after the map goes out
  h.advance(31s);
  CHECK(cpus_told(g.a, g.grows) == *kept);
}

TEST_CASE("an agent that registers again is told the cpus of the adaptive jobs it still runs, a resize under way included") {
  growing g;
  harness& h = g.h;
  REQUIRE(h.exited(g.a, g.first));
  const auto map = g.claim();
  REQUIRE(cpus_told(g.a, g.grows, 0ms) == cpus{0, 1, 2, 3});
  // The agent restarts while the map is claimed: the cpus of both maps.
  h.ctl().on_close(g.a);
  h.settle();
  auto again = h.agent("n1", 4, {0, 1, 2, 3}, {g.grows});
  CHECK(cpus_told(again, g.grows) == cpus{0, 1, 2, 3});
  REQUIRE(g.answer(map, true));
  CHECK(cpus_told(again, g.grows) == cpus{0, 1, 2, 3});
  // Once more, running on all 4 (idempotent: the same again).
  h.ctl().on_close(again);
  h.settle();
  auto third = h.agent("n1", 4, {0, 1, 2, 3}, {g.grows});
  CHECK(cpus_told(third, g.grows) == cpus{0, 1, 2, 3});
  // A rigid job is never told: its cpus are its launch's for its whole life.
  const std::int64_t rigid = h.submit(g.c, 1, 1, false);
  CHECK(rigid > 0);
  CHECK_FALSE(cpus_told(third, rigid, 200ms));
}

TEST_CASE("an adaptive job over two nodes: the node it leaves is told it holds nothing there, the node it enters is widened before the map") {
  harness h{no_heartbeats()};
  auto n1 = h.agent("n1", 2, {0, 1});
  auto n2 = h.agent("n2", 2, {4, 5});
  auto c = h.client();
  const std::int64_t job = h.submit(c, 1, 4, true);
  REQUIRE(h.launched(n1, job).nprocs == 4);
  auto shim = h.shim_of(job);
  h.settle();
  auto apply = [&] {
    const auto map = shim->take<protocol::new_map>();
    REQUIRE(map);
    REQUIRE(h.ack_map(shim, job, *map));
    return map->procs;
  };
  // A rigid job of 2: the adaptive one gives up one node's two processors.
  const std::int64_t rigid = h.submit(c, 2, 2, false);
  // Both its nodes are widened (to what they have: it keeps all until the ack).
  CHECK(cpus_told(n1, job) == cpus{0, 1});
  CHECK(cpus_told(n2, job) == cpus{4, 5});
  const std::string shrunk = apply();
  const bool left_n2 = shrunk.substr(0, 2) == "11";
  auto& kept = left_n2 ? n1 : n2;
  auto& left = left_n2 ? n2 : n1;
  CHECK(cpus_told(kept, job) == (left_n2 ? cpus{0, 1} : cpus{4, 5}));
  CHECK(cpus_told(left, job) == cpus{});  // none of its processors there now
  h.launched(left, rigid);
  // The rigid job ends: the job enters that node again, widened there
  // before the map goes out, and keeps those cpus after the ack.
  REQUIRE(h.exited(left, rigid));
  const auto grow = shim->take<protocol::new_map>([](const protocol::new_map&) { return true; });
  REQUIRE(grow);
  const cpus back = left_n2 ? cpus{4, 5} : cpus{0, 1};
  CHECK(cpus_told(left, job, 0ms) == back);
  REQUIRE(h.ack_map(shim, job, *grow));
  CHECK(cpus_told(left, job) == back);
}
