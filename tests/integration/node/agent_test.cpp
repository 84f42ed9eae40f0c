// The real aqs-node binary against a scripted aqsd (the real network layer
// with a recording dispatcher): registration, heartbeats, launch, kill, time
// limit, start errors, reconnection with reports kept, and TCP with the key.
#include <doctest/doctest.h>

#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "daemon_base/server.hpp"
#include "temp_dir.hpp"

extern char** environ;

namespace fs = std::filesystem;
using namespace aqs;
using namespace std::chrono_literals;

namespace {

const std::string k_key = "agent-test-key";
// The cluster this scripted aqsd says it is; the agent keeps its jobs' records in spool/cluster-ID.
const std::string k_cluster = "c0ffee00c0ffee00c0ffee00c0ffee00";

// Plays aqsd: records what the agent sends, acknowledges its requests.
struct fake_aqsd : daemon::dispatcher {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<protocol::message> got;
  std::shared_ptr<daemon::connection> node;
  int opens = 0;

  void on_open(const std::shared_ptr<daemon::connection>& c) override {
    std::lock_guard lock(mu);
    node = c;
    ++opens;
    cv.notify_all();
  }
  void on_message(const std::shared_ptr<daemon::connection>& c, protocol::message m) override {
    if (auto id = protocol::id_of(m); id && !std::holds_alternative<protocol::ok>(m) &&
                                      !std::holds_alternative<protocol::error>(m)) {
      nlohmann::json result = nlohmann::json::object();
      if (std::holds_alternative<protocol::register_node>(m)) {
        result = {{"first_proc", 0}, {"kill", nlohmann::json::array()}, {"cluster_id", k_cluster}};
      }
      c->send(protocol::ok{*id, result});
    }
    std::lock_guard lock(mu);
    got.push_back(std::move(m));
    cv.notify_all();
  }
  void on_close(const std::shared_ptr<daemon::connection>&) override {}
  std::optional<std::string> tcp_key(protocol::peer_role, std::optional<std::int64_t>) override { return k_key; }

  // Waits (up to 30 s) for a message matching pred; returns a copy.
  template <class T, class Pred>
  std::optional<T> wait_for(Pred pred, std::chrono::milliseconds limit = 30s) {
    std::unique_lock lock(mu);
    std::optional<T> found;
    cv.wait_for(lock, limit, [&] {
      for (auto& m : got) {
        if (auto* t = std::get_if<T>(&m); t && pred(*t)) {
          found = *t;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  void send(protocol::message m) {
    std::lock_guard lock(mu);
    REQUIRE(node);
    node->send(std::move(m));
  }
};

// The environment aqs-node runs with. In sanitizer builds hwloc's PCI
// plugin is left out: libpciaccess leaks about 1 KB in it, and since hwloc
// unloads the plugin, no suppression can name the frames.
std::vector<char*> agent_environment() {
  static std::vector<std::string> env = [] {
    std::vector<std::string> e;
    for (char** p = environ; *p != nullptr; ++p) e.emplace_back(*p);
#if defined(__SANITIZE_ADDRESS__)
    e.emplace_back("HWLOC_COMPONENTS=-pci");
#endif
    return e;
  }();
  std::vector<char*> out;
  for (auto& s : env) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

struct harness {
  test::temp_dir tmp{"aqs-agent-test"};
  fs::path dir = tmp.path();
  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::unique_ptr<fake_aqsd> aqsd;
  std::unique_ptr<daemon::server> srv;
  pid_t agent = 0;

  harness() {
    work.emplace(io.get_executor());
    for (int i = 0; i < 2; ++i) threads.emplace_back([this] { io.run(); });
    start_server();
  }
  ~harness() {
    if (agent > 0) {
      ::kill(agent, SIGTERM);
      ::waitpid(agent, nullptr, 0);
    }
    stop_server();
    work.reset();
    for (auto& t : threads) t.join();
  }
  void start_server(bool tcp = false) {
    aqsd = std::make_unique<fake_aqsd>();
    daemon::server_options o;
    o.unix_socket = dir / "aqsd.sock";
    if (tcp) o.tcp_listen = "127.0.0.1:0";
    o.cluster_key = k_key;
    srv = std::make_unique<daemon::server>(io, o, *aqsd);
    srv->start();
  }
  void stop_server() {
    if (!srv) return;
    srv->stop();
    // stop() closes the acceptor on the io threads: wait until it has.
    for (int i = 0; i < 500 && (srv->connections() > 0 || fs::exists(dir / "aqsd.sock")); ++i) {
      std::this_thread::sleep_for(5ms);
    }
    srv.reset();
  }
  void start_agent(std::vector<std::string> extra) {
    std::vector<std::string> args = {AQS_NODE_BINARY, "--name", "n1", "--cpus", "0", "--procs", "4",
                                     "--spool", (dir / "spool").string(), "--heartbeat", "0.2"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    REQUIRE(::posix_spawn(&agent, argv[0], nullptr, nullptr, argv.data(), agent_environment().data()) == 0);
  }
  std::string read(const std::string& name) {
    std::ifstream in(dir / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  protocol::launch launch(std::int64_t job, const std::string& script, std::optional<std::int64_t> walltime = {}) {
    protocol::launch l;
    l.id = 1000 + job;
    l.job_id = job;
    l.job.name = "job" + std::to_string(job);
    l.job.script = script;
    l.job.workdir = dir.string();
    l.job.environment = {"PATH=/usr/bin:/bin", "AQS_JOB_ID=forged"};
    l.job.stdout_pattern = "out-%j-%x.txt";
    l.job.walltime_s = walltime;
    l.user = "tester";
    l.uid = ::getuid();
    l.gid = ::getgid();
    l.procs = "0110";
    l.nprocs = 2;
    l.local_cpus = {0};
    l.nodelist = "n1:1-2";
    return l;
  }
};

template <class T>
auto for_job(std::int64_t id) {
  return [id](const T& m) { return m.job_id == id; };
}

}  // namespace

TEST_CASE("the agent registers, heartbeats, runs a launched job with its environment, and reports its end") {
  harness h;
  h.start_agent({"--socket", (h.dir / "aqsd.sock").string()});
  auto reg = h.aqsd->wait_for<protocol::register_node>([](auto&) { return true; });
  REQUIRE(reg);
  CHECK(reg->name == "n1");
  CHECK(reg->procs == 4);
  CHECK(reg->cpus == std::vector<std::int64_t>{0});
  CHECK(reg->running.empty());
  CHECK(h.aqsd->wait_for<protocol::heartbeat>([](auto&) { return true; }));

  h.aqsd->send(h.launch(5, "#!/bin/sh\necho id=$AQS_JOB_ID procs=$AQS_PROCS n=$AQS_NPROCS nodes=$AQS_NODELIST\n"
                           "grep Cpus_allowed_list /proc/self/status\nexit 3\n"));
  CHECK(h.aqsd->wait_for<protocol::ok>([](auto& o) { return o.id == 1005; }));
  CHECK(h.aqsd->wait_for<protocol::job_started>(for_job<protocol::job_started>(5)));
  auto ex = h.aqsd->wait_for<protocol::job_exited>(for_job<protocol::job_exited>(5));
  REQUIRE(ex);
  CHECK(ex->state == core::job_state::failed);
  CHECK(ex->exit_code == 3);
  const std::string out = h.read("out-5-job5.txt");
  CHECK(out.find("id=5 procs=0110 n=2 nodes=n1:1-2\n") == 0);  // AQS's own values win over the job's
  CHECK(out.find("Cpus_allowed_list:\t0\n") != std::string::npos);
  CHECK_FALSE(fs::exists(h.dir / "spool" / ("cluster-" + k_cluster) / "job-5.script"));
}

TEST_CASE("a kill request ends a job CANCELLED, a time limit ends one TIMEOUT, a bad job is refused") {
  harness h;
  h.start_agent({"--socket", (h.dir / "aqsd.sock").string()});
  REQUIRE(h.aqsd->wait_for<protocol::register_node>([](auto&) { return true; }));

  h.aqsd->send(h.launch(6, "sleep 60\n"));  // no shebang: run with /bin/sh
  REQUIRE(h.aqsd->wait_for<protocol::job_started>(for_job<protocol::job_started>(6)));
  h.aqsd->send(protocol::kill{77, 6, SIGTERM, 5});
  CHECK(h.aqsd->wait_for<protocol::ok>([](auto& o) { return o.id == 77; }));
  auto ex = h.aqsd->wait_for<protocol::job_exited>(for_job<protocol::job_exited>(6));
  REQUIRE(ex);
  CHECK(ex->state == core::job_state::cancelled);
  CHECK(ex->signal == SIGTERM);

  h.aqsd->send(h.launch(7, "#!/bin/sh\nsleep 60\n", 1));
  ex = h.aqsd->wait_for<protocol::job_exited>(for_job<protocol::job_exited>(7));
  REQUIRE(ex);
  CHECK(ex->state == core::job_state::timeout);

  auto bad = h.launch(8, "#!/bin/sh\ntrue\n");
  bad.job.workdir = (h.dir / "missing").string();
  h.aqsd->send(bad);
  auto err = h.aqsd->wait_for<protocol::error>([](auto& e) { return e.id == 1008; });
  REQUIRE(err);
  CHECK(err->message.find("cannot enter working directory") != std::string::npos);
  h.aqsd->send(protocol::kill{78, 999, SIGTERM, 5});
  auto nf = h.aqsd->wait_for<protocol::error>([](auto& e) { return e.id == 78; });
  REQUIRE(nf);
  CHECK(nf->code == protocol::error_code::not_found);
}

TEST_CASE("while aqsd is away the job keeps running, and its end is reported after the agent re-registers") {
  harness h;
  h.start_agent({"--socket", (h.dir / "aqsd.sock").string()});
  REQUIRE(h.aqsd->wait_for<protocol::register_node>([](auto&) { return true; }));
  h.aqsd->send(h.launch(9, "#!/bin/sh\nsleep 0.5\necho done\n"));
  REQUIRE(h.aqsd->wait_for<protocol::job_started>(for_job<protocol::job_started>(9)));
  h.stop_server();  // aqsd goes away; the job ends while it is gone
  for (int i = 0; i < 3000 && h.read("out-9-job9.txt") != "done\n"; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(h.read("out-9-job9.txt") == "done\n");
  std::this_thread::sleep_for(100ms);  // let the agent reap it and queue the report
  h.start_server();
  auto reg = h.aqsd->wait_for<protocol::register_node>([](auto&) { return true; });
  REQUIRE(reg);
  auto ex = h.aqsd->wait_for<protocol::job_exited>(for_job<protocol::job_exited>(9));
  REQUIRE(ex);
  CHECK(ex->state == core::job_state::completed);

  // A job still running over a reconnect is listed at registration.
  h.aqsd->send(h.launch(10, "#!/bin/sh\nsleep 60\n"));
  REQUIRE(h.aqsd->wait_for<protocol::job_started>(for_job<protocol::job_started>(10)));
  h.stop_server();
  h.start_server();
  reg = h.aqsd->wait_for<protocol::register_node>([](auto&) { return true; });
  REQUIRE(reg);
  CHECK(reg->running == std::vector<std::int64_t>{10});
  h.aqsd->send(protocol::kill{79, 10, SIGKILL, 1});
  CHECK(h.aqsd->wait_for<protocol::job_exited>(for_job<protocol::job_exited>(10)));
}

TEST_CASE("over TCP the agent proves the cluster key; with a wrong key it stops with a clear error") {
  harness h;
  h.stop_server();
  h.start_server(true);
  const auto port = std::to_string(h.srv->tcp_port());
  {
    std::ofstream(h.dir / "good.key") << k_key << "\n";
    std::ofstream(h.dir / "bad.key") << "not-the-key\n";
  }
  h.start_agent({"--server", "127.0.0.1:" + port, "--key", (h.dir / "good.key").string()});
  CHECK(h.aqsd->wait_for<protocol::register_node>([](auto&) { return true; }));
  ::kill(h.agent, SIGTERM);
  int st = 0;
  ::waitpid(h.agent, &st, 0);
  CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));

  h.start_agent({"--server", "127.0.0.1:" + port, "--key", (h.dir / "bad.key").string()});
  pid_t r = 0;
  for (int i = 0; i < 1000 && (r = ::waitpid(h.agent, &st, WNOHANG)) == 0; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(r == h.agent);
  h.agent = 0;
  CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 1));
}

TEST_CASE("SIGTERM to the agent ends its jobs, tells aqsd the node is leaving, and leaves no process behind") {
  harness h;
  h.start_agent({"--socket", (h.dir / "aqsd.sock").string()});
  REQUIRE(h.aqsd->wait_for<protocol::register_node>([](auto&) { return true; }));
  h.aqsd->send(h.launch(12, "#!/bin/sh\nsleep 300 &\necho $! > sleeper.pid\nwait\n"));
  REQUIRE(h.aqsd->wait_for<protocol::job_started>(for_job<protocol::job_started>(12)));
  std::string pid_text;
  for (int i = 0; i < 3000 && (pid_text = h.read("sleeper.pid")).empty(); ++i) std::this_thread::sleep_for(10ms);
  REQUIRE_FALSE(pid_text.empty());
  const pid_t sleeper = std::stoi(pid_text);

  ::kill(h.agent, SIGTERM);
  // The job is not reported ended: aqsd ends it as on a node failure (or
  // requeues it) when the node leaves, which happens only once it is gone.
  CHECK(h.aqsd->wait_for<protocol::node_leaving>([](auto&) { return true; }));
  CHECK(::kill(sleeper, 0) != 0);
  CHECK_FALSE(h.aqsd->wait_for<protocol::job_exited>(for_job<protocol::job_exited>(12), 0ms));
  int st = 0;
  REQUIRE(::waitpid(h.agent, &st, 0) == h.agent);
  h.agent = 0;
  CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
  CHECK(::kill(sleeper, 0) != 0);  // the job's background child is gone too
}

TEST_CASE("the agent refuses a spool directory that is a symlink or belongs to someone else") {
  harness h;
  fs::create_directory(h.dir / "real");
  fs::create_symlink(h.dir / "real", h.dir / "link");
  auto run_agent = [&](const fs::path& spool) {
    std::vector<std::string> args = {AQS_NODE_BINARY, "--name", "n1", "--socket", (h.dir / "aqsd.sock").string(),
                                     "--spool", spool.string()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    REQUIRE(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), agent_environment().data()) == 0);
    int st = 0;
    REQUIRE(::waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  CHECK(run_agent(h.dir / "link") == 1);
  if (::geteuid() == 0) {
    fs::create_directory(h.dir / "theirs");
    REQUIRE(::chown((h.dir / "theirs").c_str(), 65534, 65534) == 0);
    CHECK(run_agent(h.dir / "theirs") == 1);
  }
}

namespace {

// Whether the process exists and is not a zombie.
bool running_process(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// Polls until none of pids runs; false if some still does after `limit`.
bool all_gone(const std::vector<pid_t>& pids, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (true) {
    bool any = false;
    for (pid_t p : pids) any = any || running_process(p);
    if (!any) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(20ms);
  }
}

// A job that leaves processes everywhere it can: one in its group, one in a
// session of its own (as an MPI daemon makes itself), and its shell. Their
// pids end up in `pids` in the working directory.
const char* k_sprawling_job =
    "#!/bin/sh\nsleep 300 &\necho $! > pids.tmp\nsetsid sleep 300 &\necho $! >> pids.tmp\necho $$ >> pids.tmp\n"
    "mv pids.tmp pids\nwait\n";

std::vector<pid_t> wait_for_pids(harness& h) {
  std::string text;
  for (int i = 0; i < 3000 && (text = h.read("pids")).empty(); ++i) std::this_thread::sleep_for(10ms);
  std::vector<pid_t> pids;
  std::istringstream in(text);
  for (pid_t p; in >> p;) pids.push_back(p);
  return pids;
}

void kill_agent_hard(harness& h) {
  ::kill(h.agent, SIGKILL);
  ::waitpid(h.agent, nullptr, 0);
  h.agent = 0;
}

}  // namespace

TEST_CASE("a job whose agent was killed with SIGKILL kills all its processes itself within the node-down timeout") {
  harness h;
  h.start_agent({"--socket", (h.dir / "aqsd.sock").string(), "--node-down-timeout", "2"});
  REQUIRE(h.aqsd->wait_for<protocol::register_node>([](auto&) { return true; }));
  h.aqsd->send(h.launch(20, k_sprawling_job));
  REQUIRE(h.aqsd->wait_for<protocol::job_started>(for_job<protocol::job_started>(20)));
  const auto pids = wait_for_pids(h);
  REQUIRE(pids.size() == 3);
  kill_agent_hard(h);
  // aqsd would declare the node DOWN 2 s after the agent's last word; give
  // the fencing 5 s more before calling it a failure.
  CHECK(all_gone(pids, 7s));
}

TEST_CASE("a job whose agent hangs (SIGSTOP) kills all its processes itself within the node-down timeout") {
  harness h;
  h.start_agent({"--socket", (h.dir / "aqsd.sock").string(), "--node-down-timeout", "2"});
  REQUIRE(h.aqsd->wait_for<protocol::register_node>([](auto&) { return true; }));
  h.aqsd->send(h.launch(23, k_sprawling_job));
  REQUIRE(h.aqsd->wait_for<protocol::job_started>(for_job<protocol::job_started>(23)));
  const auto pids = wait_for_pids(h);
  REQUIRE(pids.size() == 3);
  // Alive, holding its leases, but renewing none: aqsd hears nothing from it.
  ::kill(h.agent, SIGSTOP);
  CHECK(all_gone(pids, 7s));
  ::kill(h.agent, SIGCONT);
  // Its end says why it came (issue 30: 96-rank jobs ended FAILED with no
  // word from AQS while their steps had fenced them).
  const auto ex = h.aqsd->wait_for<protocol::job_exited>(for_job<protocol::job_exited>(23));
  REQUIRE(ex);
  CHECK(ex->reason.value_or("").find("fenced: aqsd had acknowledged none of its node agent's heartbeats") !=
        std::string::npos);
}

TEST_CASE("a job whose killed agent is restarted in time is adopted and keeps running") {
  harness h;
  const std::vector<std::string> args{"--socket", (h.dir / "aqsd.sock").string(), "--node-down-timeout", "4"};
  h.start_agent(args);
  REQUIRE(h.aqsd->wait_for<protocol::register_node>([](auto&) { return true; }));
  h.aqsd->send(h.launch(21, k_sprawling_job));
  REQUIRE(h.aqsd->wait_for<protocol::job_started>(for_job<protocol::job_started>(21)));
  const auto pids = wait_for_pids(h);
  REQUIRE(pids.size() == 3);
  kill_agent_hard(h);
  h.start_agent(args);
  auto registered_again = [&] {
    std::lock_guard lock(h.aqsd->mu);
    int n = 0;
    for (const auto& m : h.aqsd->got) n += std::holds_alternative<protocol::register_node>(m) ? 1 : 0;
    return n >= 2;
  };
  for (int i = 0; i < 3000 && !registered_again(); ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(registered_again());
  std::this_thread::sleep_for(5s);  // past the whole fencing schedule of the first agent
  for (pid_t p : pids) CHECK(running_process(p));
  h.aqsd->send(protocol::kill{80, 21, SIGTERM, 1});
  auto ex = h.aqsd->wait_for<protocol::job_exited>(for_job<protocol::job_exited>(21));
  REQUIRE(ex);
  CHECK(ex->state == core::job_state::cancelled);
  CHECK(all_gone(pids, 15s));
}

TEST_CASE("the spool keeps no MPI launch files of a job that never started, nor of jobs no agent runs any more") {
  harness h;
  // Left by an earlier agent on this spool, for a job it no longer runs.
  const fs::path jobs = h.dir / "spool" / ("cluster-" + k_cluster);
  fs::create_directories(jobs / "job-77.mpi");
  std::ofstream(jobs / "job-77.mpi" / "hostfile") << "localhost slots=1\n";
  h.start_agent({"--socket", (h.dir / "aqsd.sock").string()});
  REQUIRE(h.aqsd->wait_for<protocol::register_node>([](auto&) { return true; }));
  REQUIRE(h.aqsd->wait_for<protocol::heartbeat>([](auto&) { return true; }));  // registered: the spool is tidied
  CHECK_FALSE(fs::exists(jobs / "job-77.mpi"));

  auto bad = h.launch(22, "#!/bin/sh\ntrue\n");
  bad.proc_hosts = {"localhost", "localhost"};
  bad.proc_cpus = {0, 0};
  bad.job.workdir = (h.dir / "missing").string();
  h.aqsd->send(bad);
  auto err = h.aqsd->wait_for<protocol::error>([](auto& e) { return e.id == 1022; });
  REQUIRE(err);
  CHECK(err->message.find("cannot enter working directory") != std::string::npos);
  CHECK_FALSE(fs::exists(jobs / "job-22.mpi"));
  CHECK_FALSE(fs::exists(jobs / "job-22.script"));
}

TEST_CASE("an answer to the last connection's launch never goes out on the next one") {
  // Seen in CI: aqsd was killed while launches were being started; a late
  // "ok" went out on the new connection before hello, aqsd refused that
  // connection, the agent gave up, its node went DOWN and its jobs NODE_FAIL.
  // Request ids are per connection: a late answer is dropped (aqsd sends
  // the launch again if it still wants it), never sent to the new one.
  harness h;
  h.start_agent({"--socket", (h.dir / "aqsd.sock").string()});
  REQUIRE(h.aqsd->wait_for<protocol::register_node>([](auto&) { return true; }));
  // The job's output is a FIFO with no reader: its start blocks in open()
  // until the test reads it, so its answer comes after the reconnect.
  const fs::path fifo = h.dir / "out-501-job501.txt";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  h.aqsd->send(h.launch(501, "#!/bin/sh\nsleep 30\n"));
  std::this_thread::sleep_for(200ms);  // the step is blocked opening the FIFO
  h.stop_server();
  h.start_server();
  REQUIRE(h.aqsd->wait_for<protocol::register_node>([](auto&) { return true; }));
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // the step goes on
  REQUIRE(reader >= 0);
  // Its start is still reported (through the outbox, kept over reconnects)...
  REQUIRE(h.aqsd->wait_for<protocol::job_started>(for_job<protocol::job_started>(501)));
  // ...but the answer to the old connection's request 1501 is not.
  CHECK_FALSE(h.aqsd->wait_for<protocol::ok>([](const protocol::ok& o) { return o.id == 1501; }, 300ms));
  REQUIRE(::kill(h.agent, 0) == 0);
  h.aqsd->send(protocol::kill{79, 501, SIGKILL, 1});
  CHECK(h.aqsd->wait_for<protocol::job_exited>(for_job<protocol::job_exited>(501)));
  ::close(reader);
}
