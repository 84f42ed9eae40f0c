// End to end: real aqsd (with the test PostgreSQL or its private one), real
// aqs-node agents as virtual nodes, the real commands, real job processes.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

#include "e2e.hpp"

namespace {

// Pids listed one per line in a file the job wrote.
std::vector<pid_t> read_pids(const fs::path& p) {
  std::vector<pid_t> out;
  std::ifstream in(p);
  for (pid_t pid; in >> pid;) out.push_back(pid);
  return out;
}

bool all_gone(const std::vector<pid_t>& pids, std::chrono::seconds limit = 10s) {
  return eventually([&] { return std::none_of(pids.begin(), pids.end(), test::alive); }, limit);
}

void wait_for_file(const fs::path& p, std::chrono::seconds limit = 20s) {
  REQUIRE_MESSAGE(eventually([&] { return fs::exists(p); }, limit), p.string() << " never appeared");
}

// The first pid a job writes to `p`, once the file is there.
pid_t first_pid(const fs::path& p) {
  wait_for_file(p);
  return read_pids(p).at(0);
}

test::cluster::options fast(const test::test_database& db) {
  test::cluster::options o;
  o.db = db.conninfo();
  return o;
}

// One agent whose aqsd declares it DOWN after `heartbeat_timeout_s` of
// silence; it beats every 0.3 s.
test::cluster::options one_agent(const test::test_database& db, double heartbeat_timeout_s) {
  auto o = fast(db);
  o.nodes = 1;
  o.heartbeat_timeout_s = heartbeat_timeout_s;
  o.agent_heartbeat_s = 0.3;
  return o;
}

// fast() on a database of its own, and its working directory.
struct fast_cluster {
  test::test_database db;
  test::cluster c{fast(db)};
  const fs::path w = c.workdir();
};

// one_agent(HeartbeatTimeout) on a database of its own, and its working directory.
template <int HeartbeatTimeout>
struct one_agent_cluster {
  test::test_database db;
  test::cluster c{one_agent(db, HeartbeatTimeout)};
  const fs::path w = c.workdir();
};

}  // namespace

TEST_CASE_FIXTURE(fast_cluster, "200 jobs submitted with fsub all end, with their outputs in the right files and their exit codes recorded") {
  write_file(w / "job.sh",
             "#!/bin/sh\n#SBATCH -o %x-%j.out\necho \"job $AQS_JOB_ID of $AQS_NPROCS on $AQS_NODELIST\"\n"
             "[ \"$1\" = fail ] && exit 3\nexit 0\n");
  std::map<std::int64_t, int> expected_code;
  std::map<std::int64_t, std::string> name_of;
  for (int i = 0; i < 200; ++i) {
    const int procs = 1 + i % 4;
    const bool fail = i % 10 == 3;
    const std::string name = "j" + std::to_string(i);
    const auto id = c.submit({"-n", std::to_string(procs), "-J", name, "job.sh", fail ? "fail" : "ok"});
    expected_code[id] = fail ? 3 : 0;
    name_of[id] = name;
  }
  c.wait_idle(180s);
  const auto jobs = c.jobs();
  REQUIRE(jobs.size() == 200);
  for (const auto& j : jobs) {
    INFO("job " << j.id);
    REQUIRE(expected_code.count(j.id) == 1);
    CHECK(j.state == (expected_code[j.id] == 0 ? job_state::completed : job_state::failed));
    CHECK(j.exit_code == expected_code[j.id]);
    CHECK(j.name == name_of[j.id]);
    REQUIRE(j.start_time);
    REQUIRE(j.end_time);
    CHECK(*j.submit_time <= *j.start_time);
    CHECK(*j.start_time <= *j.end_time);
    const std::string out = slurp(w / (j.name + "-" + std::to_string(j.id) + ".out"));
    CHECK(out.rfind("job " + std::to_string(j.id) + " of " + std::to_string(j.min_pe) + " on node", 0) == 0);
  }
  CHECK(c.leftovers().size() >= 1);  // aqsd and the agents, still running
}

TEST_CASE_FIXTURE(fast_cluster, "fkill ends pending and running jobs with their whole process tree; time limits give TIMEOUT; afterok holds and cancels") {
  // A job that starts a child and a grandchild and records every pid.
  write_file(w / "tree.sh",
             "#!/bin/sh\necho $$ > \"$1\"\nsleep 300 &\necho $! >> \"$1\"\n"
             "sh -c 'sleep 300 & echo $! >> \"$0\"; wait' \"$1\" &\nwait\n");
  const auto running = c.submit({"-n", "16", "tree.sh", (w / "pids").string()});
  const auto pending = c.submit({"-n", "16", "--wrap", "touch never-ran"});
  c.wait_state(running, {job_state::running});
  wait_for_file(w / "pids");
  std::this_thread::sleep_for(300ms);  // the grandchild writes its pid
  const auto pids = read_pids(w / "pids");
  REQUIRE(pids.size() == 3);
  CHECK(c.job(pending)->state == job_state::pending);

  auto r = c.cmd(bin().fkill, {std::to_string(pending)});
  CHECK(r.status == 0);
  CHECK(c.job(pending)->state == job_state::cancelled);
  r = c.cmd(bin().fkill, {std::to_string(running)});
  CHECK(r.status == 0);
  c.wait_state(running, {job_state::cancelled});
  CHECK(all_gone(pids));
  CHECK_FALSE(fs::exists(w / "never-ran"));
  r = c.cmd(bin().fkill, {"987654"});
  CHECK(r.status == 1);
  CHECK(r.err.find("987654") != std::string::npos);

  const auto limited = c.submit({"-t", "0:02", "--wrap", "sleep 60"});
  const auto t = c.wait_state(limited, {job_state::timeout, job_state::completed, job_state::failed}, 30s);
  CHECK(t.state == job_state::timeout);

  const auto parent = c.submit({"--wrap", "sleep 1.5"});
  const auto child = c.submit({"--dependency=afterok:" + std::to_string(parent), "--wrap", "echo after > dep.out"});
  std::this_thread::sleep_for(500ms);
  CHECK(c.job(child)->state == job_state::pending);
  c.wait_state(child, {job_state::completed});
  CHECK(c.job(parent)->state == job_state::completed);
  CHECK(*c.job(parent)->end_time <= *c.job(child)->start_time);
  CHECK(slurp(w / "dep.out") == "after\n");

  // fkill --signal delivers that signal only: the job handles it and runs on.
  const auto trapper =
      c.submit({"--wrap", "trap 'echo got >> usr1.out' USR1; while :; do sleep 0.1; done"});
  c.wait_state(trapper, {job_state::running});
  std::this_thread::sleep_for(300ms);  // the trap is set
  CHECK(c.cmd(bin().fkill, {"--signal", "USR1", std::to_string(trapper)}).status == 0);
  wait_for_file(w / "usr1.out");
  std::this_thread::sleep_for(500ms);
  CHECK(c.job(trapper)->state == job_state::running);
  CHECK(c.cmd(bin().fkill, {std::to_string(trapper)}).status == 0);
  c.wait_state(trapper, {job_state::cancelled});

  const auto failing = c.submit({"--wrap", "exit 1"});
  const auto orphan = c.submit({"-d", "afterok:" + std::to_string(failing), "--wrap", "touch orphan-ran"});
  c.wait_state(orphan, {job_state::cancelled});
  CHECK(c.job(failing)->state == job_state::failed);
  CHECK_FALSE(c.job(orphan)->start_time);
  CHECK_FALSE(fs::exists(w / "orphan-ran"));
}

TEST_CASE("jobs run as their submitters, and a user can neither kill nor see through another user's job") {
  test::test_database db;
  test::cluster c(fast(db));
  const auto alice = c.user("aqs-test-alice");
  const auto bob = c.user("aqs-test-bob");
  const auto a = c.submit({"--wrap", "id -u; sleep 30"}, &alice);
  const auto b = c.submit({"--wrap", "id -u; sleep 30"}, &bob);
  c.wait_state(a, {job_state::running});
  c.wait_state(b, {job_state::running});
  wait_for_file(alice.home / ("aqs-" + std::to_string(a) + ".out"));
  wait_for_file(bob.home / ("aqs-" + std::to_string(b) + ".out"));
  std::this_thread::sleep_for(200ms);
  CHECK(slurp(alice.home / ("aqs-" + std::to_string(a) + ".out")) == std::to_string(alice.uid) + "\n");
  CHECK(slurp(bob.home / ("aqs-" + std::to_string(b) + ".out")) == std::to_string(bob.uid) + "\n");
  {
    struct stat sb {};
    REQUIRE(::stat((alice.home / ("aqs-" + std::to_string(a) + ".out")).c_str(), &sb) == 0);
    CHECK(sb.st_uid == alice.uid);
  }

  auto r = c.cmd(bin().fkill, {std::to_string(b)}, &alice);
  CHECK(r.status == 1);
  CHECK(r.err.find("belongs to aqs-test-bob") != std::string::npos);
  CHECK(c.job(b)->state == job_state::running);

  r = c.cmd(bin().fjobs, {"--json", "-u", "aqs-test-bob"}, &alice);
  REQUIRE(r.status == 0);
  const auto listed = nlohmann::json::parse(r.out);
  REQUIRE(listed.size() == 1);
  CHECK(listed[0]["id"] == b);
  CHECK(listed[0]["user"] == "aqs-test-bob");

  r = c.cmd(bin().fkill, {std::to_string(a)}, &alice);
  CHECK(r.status == 0);
  r = c.cmd(bin().fkill, {std::to_string(b)});  // root may
  CHECK(r.status == 0);
  c.wait_state(a, {job_state::cancelled});
  c.wait_state(b, {job_state::cancelled});
}

TEST_CASE_FIXTURE(fast_cluster, "bad input gets a clear error, and aqsd keeps serving everyone and loses nothing") {
  std::atomic<bool> stop{false};
  std::vector<std::int64_t> acked;
  std::mutex acked_mu;
  std::atomic<int> refused{0};
  std::thread good([&] {
    while (!stop) {
      const auto r = c.cmd(bin().fsub, {"--parsable", "--wrap", "true"});
      if (r.status == 0) {
        std::lock_guard lock(acked_mu);
        acked.push_back(std::stoll(r.out));
      } else {
        ++refused;
      }
    }
  });
  auto acked_count = [&] {
    std::lock_guard lock(acked_mu);
    return acked.size();
  };
  auto raw = [&](const std::string& bytes, bool expect_reply) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, c.socket().c_str(), sizeof a.sun_path - 1);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    (void)!::write(fd, bytes.data(), bytes.size());
    ::shutdown(fd, SHUT_WR);
    std::string got;
    char buf[4096];
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    if (expect_reply) CHECK(got.find("\"type\":\"error\"") != std::string::npos);
  };
  auto frame = [](const std::string& body) {
    const auto n = static_cast<std::uint32_t>(body.size());
    std::string f{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n)};
    return f + body;
  };
  const std::string hello = frame(R"({"type":"hello","id":0,"protocol":1,"role":"client"})");
  raw(std::string("\x00\x00\x00\x05garbage-and-more\xff\xfe", 21), true);
  raw(std::string("\xff\xff\xff\xff", 4), true);
  raw(hello + frame("{not json"), true);
  raw(hello + frame(R"({"type":"launch_missiles","id":1})"), true);
  raw(hello + frame(R"({"type":"submit","id":2,"job":{"name":"x","argv":["true"],"workdir":"/tmp","min_pe":0,"max_pe":99999999}})"), true);
  raw(hello + frame(R"({"type":"submit","id":3,"job":{"name":"x","workdir":"relative","min_pe":1,"max_pe":1}})"), true);
  raw(hello + frame(R"({"type":"register","id":4,"name":"evil","procs":4,"cpus":[0]})"), true);  // clients may not
  std::string noise(100000, '\0');
  for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 7919) % 251);
  raw(noise, false);

  write_file(w / "noshebang.sh", "echo hi\n");
  auto r = c.cmd(bin().fsub, {"noshebang.sh"});
  CHECK(r.status != 0);
  CHECK(r.err.find('\n') == r.err.size() - 1);
  r = c.cmd(bin().fsub, {"does-not-exist.sh"});
  CHECK(r.status != 0);
  r = c.cmd(bin().fsub, {"-n", "zero", "--wrap", "true"});
  CHECK(r.status == 2);
  CHECK(r.err.rfind("fsub: ", 0) == 0);
  r = c.cmd(bin().fsub, {"--min", "4", "--max", "2", "--adaptive", "--wrap", "true"});
  CHECK(r.status == 2);
  r = c.cmd(bin().fjobs, {"--states", "SLEEPING"});
  CHECK(r.status == 2);

  // The good client served all along: a few submissions at least (on a
  // loaded machine the bad input may be over before the fifth).
  for (int i = 0; i < 600 && acked_count() < 5; ++i) std::this_thread::sleep_for(100ms);
  stop = true;
  good.join();
  CHECK(refused == 0);
  c.wait_idle(60s);
  const auto jobs = c.jobs();
  std::set<std::int64_t> ids;
  for (const auto& j : jobs) {
    ids.insert(j.id);
    CHECK(j.state == job_state::completed);
  }
  CHECK(acked.size() >= 5);
  for (auto id : acked) CHECK(ids.count(id) == 1);
  CHECK(ids.size() == acked.size());  // nothing from the bad input was created
  CHECK(test::alive(c.aqsd_pid()));
}

TEST_CASE("aqsd killed with SIGKILL during a burst of submissions loses no acknowledged job and interrupts no running job") {
  test::cluster::options o;  // aqsd's own private PostgreSQL: the zero-configuration path
  test::cluster c(o);
  const fs::path w = c.workdir();
  write_file(w / "long.sh", "#!/bin/sh\necho start >> starts.log\nsleep 5\necho done >> starts.log\n");
  const auto long_job = c.submit({"-n", "2", "long.sh"});
  c.wait_state(long_job, {job_state::running});
  std::mutex mu;
  std::vector<std::int64_t> acked;
  std::atomic<bool> stop{false};
  std::vector<std::thread> loops;
  for (int k = 0; k < 4; ++k) {
    loops.emplace_back([&] {
      while (!stop) {
        const auto r = c.cmd(bin().fsub, {"--parsable", "--wrap", "true"});
        if (r.status == 0) {
          std::lock_guard lock(mu);
          acked.push_back(std::stoll(r.out));
        }
      }
    });
  }
  std::this_thread::sleep_for(1500ms);
  c.kill_aqsd();
  std::this_thread::sleep_for(500ms);
  c.start_aqsd();
  std::this_thread::sleep_for(1000ms);
  stop = true;
  for (auto& t : loops) t.join();
  c.wait_idle(120s);
  std::set<std::int64_t> present;
  for (const auto& j : c.jobs()) {
    present.insert(j.id);
    if (j.id != long_job) CHECK(j.state == job_state::completed);
  }
  REQUIRE(acked.size() > 10);
  for (auto id : acked) CHECK_MESSAGE(present.count(id) == 1, "acknowledged job " << id << " is missing");
  CHECK(c.job(long_job)->state == job_state::completed);
  CHECK(slurp(w / "starts.log") == "start\ndone\n");  // started once, never interrupted
}

TEST_CASE("a node silent beyond the heartbeat timeout goes DOWN, its jobs NODE_FAIL or requeue, and its leftovers die when it returns") {
  test::test_database db;
  auto o = fast(db);
  o.nodes = 2;
  o.heartbeat_timeout_s = 2;
  o.agent_heartbeat_s = 0.3;
  test::cluster c(o);
  const fs::path w = c.workdir();
  write_file(w / "pid.sh", "#!/bin/sh\necho $$ > \"$1\"\nexec sleep 300\n");
  // Both fit on the first node to have registered (processors 0-3).
  const auto plain = c.submit({"-n", "2", "pid.sh", (w / "plain.pid").string()});
  const auto requeued = c.submit({"-n", "2", "--requeue", "pid.sh", (w / "requeued.pid").string()});
  const auto pj = c.wait_state(plain, {job_state::running});
  const auto rj = c.wait_state(requeued, {job_state::running});
  REQUIRE(pj.nodes.size() > 6);
  const std::string victim = pj.nodes.substr(0, 5), other = victim == "node0" ? "node1" : "node0";
  REQUIRE(rj.nodes.substr(0, 5) == victim);
  const int vi = victim[4] - '0';
  const pid_t plain_pid = first_pid(w / "plain.pid");
  const pid_t first_run_pid = first_pid(w / "requeued.pid");
  fs::remove(w / "requeued.pid");
  // Its agent hangs (as a cut-off node would): no heartbeats.
  c.kill_agent(vi, SIGSTOP);
  c.wait_state(plain, {job_state::node_fail}, 20s);
  bool down = false;
  for (const auto& n : c.nodes()) down = down || (n.name == victim && n.state == protocol::node_state::down);
  CHECK(down);
  // The requeued job runs again, on the other node; the cluster keeps scheduling.
  const auto again = c.wait_state(requeued, {job_state::running}, 20s);
  CHECK(again.nodes.substr(0, 5) == other);
  wait_for_file(w / "requeued.pid");
  const auto after = c.submit({"--wrap", "true"});
  c.wait_state(after, {job_state::completed}, 30s);
  // The old instances kill themselves (fenced: their hung agent renews no
  // lease; aqs-node's --node-down-timeout is its default here, longer than
  // aqsd's), or aqsd has them killed before the node takes work again.
  c.kill_agent(vi, SIGCONT);
  CHECK(all_gone({plain_pid, first_run_pid}, 15s));
  c.wait_nodes_up(2);
  CHECK(test::alive(read_pids(w / "requeued.pid").at(0)));  // the new instance runs on
  CHECK(c.cmd(bin().fkill, {std::to_string(requeued)}).status == 0);
  c.wait_state(requeued, {job_state::cancelled});
}

TEST_CASE_FIXTURE(one_agent_cluster<6>,
                  "an agent killed with SIGKILL and restarted within the heartbeat timeout re-adopts its jobs and reports their ends") {
  write_file(w / "j.sh", "#!/bin/sh\necho $$ > \"$1\"\nsleep \"$2\"\nexit \"$3\"\n");
  const auto survives = c.submit({"j.sh", (w / "a.pid").string(), "8", "5"});
  const auto ends_meanwhile = c.submit({"j.sh", (w / "b.pid").string(), "1.5", "0"});
  // Both run once their pid files exist (polling for RUNNING could miss
  // b's short life on a loaded machine).
  const pid_t a = first_pid(w / "a.pid");
  const pid_t b = first_pid(w / "b.pid");
  c.kill_agent(0, SIGKILL);
  CHECK(eventually([&] { return !test::alive(b); }, 4s));  // b ends while no agent runs
  CHECK(test::alive(a));                // a runs on without its agent
  c.start_agent(0);
  const auto ja = c.wait_state(survives, {job_state::completed, job_state::failed, job_state::node_fail}, 30s);
  CHECK(ja.state == job_state::failed);
  CHECK(ja.exit_code == 5);
  const auto jb = c.wait_state(ends_meanwhile, {job_state::completed, job_state::failed, job_state::node_fail}, 30s);
  CHECK(jb.state == job_state::completed);
  CHECK(jb.exit_code == 0);
  // The node never went DOWN and takes work as before.
  const auto next = c.submit({"--wrap", "exit 0"});
  c.wait_state(next, {job_state::completed});
}

TEST_CASE_FIXTURE(one_agent_cluster<2>,
                  "an agent killed with SIGKILL for longer than the heartbeat timeout finds its jobs NODE_FAIL and kills them when it returns") {
  write_file(w / "j.sh", "#!/bin/sh\necho $$ > \"$1\"\nsleep 300 &\necho $! >> \"$1\"\nwait\n");
  const auto id = c.submit({"j.sh", (w / "p").string()});
  c.wait_state(id, {job_state::running});
  wait_for_file(w / "p");
  std::this_thread::sleep_for(200ms);
  const auto pids = read_pids(w / "p");
  REQUIRE(pids.size() == 2);
  c.kill_agent(0, SIGKILL);
  c.wait_state(id, {job_state::node_fail}, 20s);
  CHECK(test::alive(pids[0]));
  c.start_agent(0);
  CHECK(all_gone(pids, 15s));
  c.wait_nodes_up(1);
  const auto next = c.submit({"--wrap", "exit 0"});
  c.wait_state(next, {job_state::completed});
}
