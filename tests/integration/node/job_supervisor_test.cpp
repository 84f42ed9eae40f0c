// Integration tests of job_supervisor with real processes: outcomes, time
// limits with escalation, kill on request, and cleanup of leftovers.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "job_supervisor.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace aqs::node;
using aqs::core::job_state;
using namespace std::chrono_literals;

namespace {

struct bench {
  aqs::test::temp_dir tmp{"aqs-sup-test"};
  fs::path dir = tmp.path();
  boost::asio::io_context io;
  std::map<std::int64_t, job_outcome> done;
  job_supervisor sup{io, [this](const job_outcome& o) { done[o.job_id] = o; }, dir};


  launch_spec shell(const std::string& cmd, const std::string& out = "out.txt") {
    launch_spec s;
    s.argv = {"/bin/sh", "-c", cmd};
    s.workdir = dir.string();
    s.env = {"PATH=/usr/bin:/bin"};
    s.stdout_path = (dir / out).string();
    return s;
  }
  // Runs the event loop until the job has ended (or 60 s, a test failure).
  const job_outcome& wait(std::int64_t id) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (done.count(id) == 0 && std::chrono::steady_clock::now() < deadline) io.run_for(10ms);
    REQUIRE(done.count(id) == 1);
    return done.at(id);
  }
  std::string read(const std::string& name) {
    std::ifstream in(dir / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

bool pid_alive(pid_t pid) { return ::kill(pid, 0) == 0; }

}  // namespace

TEST_CASE("jobs end COMPLETED on exit 0 and FAILED otherwise, each reported once") {
  bench b;
  b.sup.start(1, b.shell("exit 0"));
  b.sup.start(2, b.shell("exit 7"));
  b.sup.start(3, b.shell("kill -SEGV $$"));
  CHECK(b.sup.running().size() <= 3);
  CHECK(b.wait(1).state == job_state::completed);
  const auto& f = b.wait(2);
  CHECK(f.state == job_state::failed);
  CHECK(f.status.exit_code == 7);
  const auto& s = b.wait(3);
  CHECK(s.state == job_state::failed);
  CHECK(s.status.term_signal == SIGSEGV);
  CHECK(b.sup.running().empty());
  CHECK(b.done.size() == 3);
}

TEST_CASE("a job past its time limit gets SIGTERM and ends TIMEOUT") {
  bench b;
  b.sup.start(10, b.shell("sleep 30"), 300ms, 5s);
  const auto& o = b.wait(10);
  CHECK(o.state == job_state::timeout);
  CHECK(o.status.term_signal == SIGTERM);
}

TEST_CASE("a job that ignores SIGTERM is killed with SIGKILL after the grace period") {
  bench b;
  // The shell ignores TERM and waits on a child that ignores it too. The
  // signal goes only once the trap is surely in place.
  b.sup.start(11, b.shell("trap '' TERM; echo ready; sleep 30 & wait; sleep 30"));
  for (int i = 0; i < 3000 && b.read("out.txt").empty(); ++i) b.io.run_for(10ms);
  REQUIRE(b.read("out.txt") == "ready\n");
  CHECK(b.sup.kill(11, SIGTERM, 300ms));
  const auto& o = b.wait(11);
  CHECK(o.state == job_state::cancelled);
  CHECK(o.status.term_signal == SIGKILL);
}

TEST_CASE("a kill request ends the whole tree and the job CANCELLED") {
  bench b;
  const pid_t pgid = b.sup.start(20, b.shell("sleep 300 & echo $! > child.pid; wait"));
  std::string child;
  for (int i = 0; i < 500 && (child = b.read("child.pid")).empty(); ++i) b.io.run_for(10ms);
  REQUIRE_FALSE(child.empty());
  const pid_t child_pid = std::stoi(child);
  CHECK(pid_alive(child_pid));
  CHECK(b.sup.kill(20, SIGTERM, 5s));
  const auto& o = b.wait(20);
  CHECK(o.state == job_state::cancelled);
  for (int i = 0; i < 200 && pid_alive(child_pid); ++i) b.io.run_for(10ms);  // reaped as subreaper
  CHECK_FALSE(pid_alive(child_pid));
  CHECK_FALSE(job_alive(pgid));
  CHECK_FALSE(b.sup.kill(20, SIGTERM, 1s));  // no longer running here
}

TEST_CASE("processes a finished job left behind in its group are killed") {
  bench b;
  b.sup.start(30, b.shell("sleep 300 & echo $! > left.pid; exit 0"));
  const auto& o = b.wait(30);
  CHECK(o.state == job_state::completed);
  const pid_t left = std::stoi(b.read("left.pid"));
  for (int i = 0; i < 200 && pid_alive(left); ++i) b.io.run_for(10ms);
  CHECK_FALSE(pid_alive(left));
}

TEST_CASE("a job that cannot start is not tracked, and a duplicate id is refused") {
  bench b;
  auto bad = b.shell("true");
  bad.workdir = "/nonexistent-aqs";
  CHECK_THROWS_AS(b.sup.start(40, bad), launch_error);
  CHECK_FALSE(b.sup.is_running(40));
  b.sup.start(41, b.shell("sleep 30"));
  CHECK_THROWS_AS(b.sup.start(41, b.shell("true")), std::invalid_argument);
  CHECK(b.sup.kill(41, SIGKILL, 1s));
  CHECK(b.wait(41).state == job_state::cancelled);
  CHECK(b.done.count(40) == 0);
}

TEST_CASE("many short jobs at once are all reaped and reported") {
  bench b;
  for (int i = 100; i < 160; ++i) b.sup.start(i, b.shell("exit " + std::to_string(i % 3), "o" + std::to_string(i)));
  for (int i = 100; i < 160; ++i) {
    const auto& o = b.wait(i);
    CHECK(o.status.exit_code == i % 3);
  }
  CHECK(b.sup.running().empty());
}

TEST_CASE("the resident memory of a process group counts what its processes touched, page by page") {
  const auto before = aqs::node::job_supervisor::resident_bytes(::getpgrp());
  std::vector<char> block(64 << 20);
  for (std::size_t i = 0; i < block.size(); i += 4096) block[i] = 1;
  const auto after = aqs::node::job_supervisor::resident_bytes(::getpgrp());
  CHECK(after >= before + (60u << 20));
  CHECK(after < before + (200u << 20));
  CHECK(aqs::node::job_supervisor::resident_bytes(0x7ffffff0) == 0);  // no such group
}

TEST_CASE("--signal B: warns the batch shell alone, TIME seconds before the limit, once; then the limit ends it") {
  bench b;
  // An 8 s limit, warned 2 s before: the shell has set its trap long before
  // the warning even on a loaded machine (a 3 s limit raced it under ctest -j2).
  b.sup.start(60, b.shell("trap 'echo usr1 >> sig.txt' USR1; while :; do sleep 0.1; done"), 8s, 1s);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(b.sup.signal_before_limit(60, aqs::core::signal_spec{SIGUSR1, 2, true}));
  while (b.read("sig.txt").empty() && std::chrono::steady_clock::now() - t0 < 20s) b.io.run_for(10ms);
  const auto warned_after = std::chrono::steady_clock::now() - t0;
  CHECK(b.read("sig.txt") == "usr1\n");
  CHECK(warned_after > 3s);  // about 6 s: 8 s limit, 2 s before
  CHECK(warned_after < 8s);  // and before the limit
  const auto& o = b.wait(60);
  CHECK(o.state == job_state::timeout);
  CHECK(b.read("sig.txt") == "usr1\n");  // once
  CHECK_FALSE(b.sup.signal_before_limit(60, aqs::core::signal_spec{SIGUSR1, 2, true}));
}

TEST_CASE("--signal without B: goes to what the job started, not its batch shell") {
  bench b;
  std::optional<std::optional<std::string>> started;
  // Set before the step reports, as the agent does: armed with the limit.
  b.sup.start_async(61,
                    b.shell("trap 'echo shell >> sig.txt' USR1; "
                            "sh -c 'trap \"echo step >> sig.txt; exit 0\" USR1; while :; do sleep 0.1; done' & "
                            "wait; echo after >> sig.txt; sleep 30"),
                    8s, 1s, [&](std::optional<std::string> e) { started = std::move(e); });
  CHECK(b.sup.signal_before_limit(61, aqs::core::signal_spec{SIGUSR1, 2, false}));
  const auto t0 = std::chrono::steady_clock::now();
  while (b.read("sig.txt").find("after") == std::string::npos && std::chrono::steady_clock::now() - t0 < 20s) {
    b.io.run_for(10ms);
  }
  REQUIRE(started);
  CHECK_FALSE(*started);
  CHECK(b.read("sig.txt") == "step\nafter\n");
  CHECK(b.wait(61).state == job_state::timeout);
}

TEST_CASE("--signal with less time left than TIME comes at once; a job without a time limit gets none") {
  bench b;
  b.sup.start(62, b.shell("trap 'echo usr2 >> sig.txt; exit 0' USR2; echo ready; while :; do sleep 0.1; done"), 30s, 1s);
  for (int i = 0; i < 3000 && b.read("out.txt").empty(); ++i) b.io.run_for(10ms);  // the trap is set
  CHECK(b.sup.signal_before_limit(62, aqs::core::signal_spec{SIGUSR2, 60, true}));
  const auto& o = b.wait(62);
  CHECK(o.state == job_state::completed);
  CHECK(b.read("sig.txt") == "usr2\n");
  b.sup.start(63, b.shell("trap 'echo usr2 >> none.txt' USR2; sleep 1"));
  CHECK(b.sup.signal_before_limit(63, aqs::core::signal_spec{SIGUSR2, 60, true}));
  CHECK(b.wait(63).state == job_state::completed);
  CHECK(b.read("none.txt").empty());
}

TEST_CASE("--signal survives the agent: an adopted job is warned once, at once when its time has passed, never again") {
  aqs::test::temp_dir tmp{"aqs-sup-test"};
  const fs::path dir = tmp.path();
  boost::asio::io_context io;
  std::map<std::int64_t, job_outcome> done;
  std::vector<std::pair<std::int64_t, int>> fanned;  // what the agent would ask aqsd to send to other nodes
  auto make = [&] {
    auto s = std::make_unique<job_supervisor>(io, [&](const job_outcome& o) { done[o.job_id] = o; }, dir);
    s->on_warning([&](std::int64_t id, int sig) { fanned.emplace_back(id, sig); });
    return s;
  };
  auto read = [&](const std::string& name) {
    std::ifstream in(dir / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  launch_spec spec;
  spec.argv = {"/bin/sh", "-c",
               "sh -c 'trap \"echo step >> sig.txt\" USR1; echo ready > ready.txt; while :; do sleep 0.1; done' & "
               "wait; sleep 30"};
  spec.workdir = dir.string();
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.stdout_path = (dir / "out.txt").string();
  // A 7 s limit, warned 5 s before: due 2 s after the start.
  auto first = make();
  first->start(64, spec, 7s, 1s);
  for (int i = 0; i < 3000 && read("ready.txt").empty(); ++i) io.run_for(10ms);  // the trap is set
  CHECK(first->signal_before_limit(64, aqs::core::signal_spec{SIGUSR1, 5, false}));
  first.reset();  // the agent dies: the job runs on under its step
  std::this_thread::sleep_for(2500ms);  // past the warning's time, no agent there
  CHECK(read("sig.txt").empty());
  // A new agent adopts the job: the warning is due, so it goes out at once.
  auto second = make();
  CHECK(second->adopt() == std::vector<std::int64_t>{64});
  const auto t0 = std::chrono::steady_clock::now();
  while (read("sig.txt").empty() && std::chrono::steady_clock::now() - t0 < 20s) io.run_for(10ms);
  CHECK(read("sig.txt") == "step\n");
  CHECK(fanned == std::vector<std::pair<std::int64_t, int>>{{64, SIGUSR1}});
  // Another restart: the warning was sent, it is not sent again; the limit
  // still ends the job.
  second.reset();
  auto third = make();
  CHECK(third->adopt() == std::vector<std::int64_t>{64});
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (done.count(64) == 0 && std::chrono::steady_clock::now() < deadline) io.run_for(10ms);
  REQUIRE(done.count(64) == 1);
  CHECK(done.at(64).state == job_state::timeout);
  CHECK(read("sig.txt") == "step\n");
  CHECK(fanned.size() == 1);
  third->forget(64);
  CHECK_FALSE(fs::exists(dir / "job-64.warn"));
}

TEST_CASE("a job is adoptable from the moment it runs, even if the agent dies before it hears the step's report") {
  // The agent learns that a job started by reading its step's report on the
  // event loop; aqsd counts the job RUNNING from dispatch. An agent killed
  // between the job's start and that read left no record: the job ran on,
  // unknown to the next agent (neither adopted nor set aside).
  aqs::test::temp_dir tmp{"aqs-sup-test"};
  const fs::path dir = tmp.path();
  boost::asio::io_context io;
  std::map<std::int64_t, job_outcome> done;
  auto make = [&](boost::asio::io_context& on) {
    return std::make_unique<job_supervisor>(on, [&](const job_outcome& o) { done[o.job_id] = o; }, dir);
  };
  launch_spec spec;
  spec.argv = {"/bin/sh", "-c", "echo $$ > ready.txt; exec sleep 30"};
  spec.workdir = dir.string();
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.stdout_path = (dir / "out.txt").string();
  boost::asio::io_context never_run;  // the first agent's loop, which never reads the report
  auto first = make(never_run);
  first->start_async(71, spec, 20s, 1s, [](std::optional<std::string>) {});
  // The event loop never runs: the agent has not read the report.
  pid_t pid = 0;
  for (int i = 0; i < 600 && pid <= 0; ++i) {
    std::ifstream in(dir / "ready.txt");
    if (!(in >> pid)) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(pid > 0);
  // The step (which outlives the agent) records the job itself.
  for (int i = 0; i < 1000 && !fs::exists(dir / "job-71.step"); ++i) std::this_thread::sleep_for(10ms);
  CHECK(fs::exists(dir / "job-71.step"));
  first.reset();  // killed now
  auto second = make(io);
  CHECK(second->adopt() == std::vector<std::int64_t>{71});
  CHECK(pid_alive(pid));
  // Adopted whole: its time limit still ends it.
  REQUIRE(second->kill(71, SIGTERM, 1s));
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (done.count(71) == 0 && std::chrono::steady_clock::now() < deadline) io.run_for(10ms);
  REQUIRE(done.count(71) == 1);
  CHECK(done.at(71).state == job_state::cancelled);
}

TEST_CASE("a job's step keeps the agent's session: a process group of its own, no session (and autogroup) of its own") {
  // Issue 30: a session per step is a kernel autogroup per step; 128 ranks
  // over four such groups stalled the machine until the steps fenced them.
  bench b;
  b.sup.start(1, b.shell("read -r _ _ _ _ pgid sid _ < /proc/$$/stat; echo \"$$ $pgid $sid\" > ids.txt"));
  CHECK(b.wait(1).state == job_state::completed);
  std::istringstream ids(b.read("ids.txt"));
  pid_t pid = 0, pgid = 0, sid = 0;
  ids >> pid >> pgid >> sid;
  REQUIRE(pid > 0);
  CHECK(pgid == pid);           // the job leads its own group (signals, kills)
  CHECK(pgid != ::getpgrp());   // not the agent's
  CHECK(sid == ::getsid(0));    // but the agent's session, not one of the step's
}
