// fctl on plain (non-MPI) jobs: hold/release and who may do them, suspend
// and resume of a rigid job (its processors go to a waiting job, its output
// is complete, its time limit stops while it is stopped), requeue, update,
// bad input, and fjobs --history showing each change with its reason.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "e2e.hpp"

namespace {

test::cluster::options one_node(const test::test_database& db, int procs) { return test::nodes_of(db, 1, procs); }

// Lines in a file (0 if it is missing).
std::size_t lines_of(const fs::path& p) {
  const std::string t = slurp(p);
  return static_cast<std::size_t>(std::count(t.begin(), t.end(), '\n'));
}

std::string reason_of(test::cluster& c, std::int64_t id) {
  const auto j = c.job(id);
  return j && j->reason ? *j->reason : std::string();
}

}  // namespace

TEST_CASE("fctl hold keeps a pending job from starting until released; users act on their own jobs only") {
  test::test_database db;
  test::cluster c(one_node(db, 2));
  c.wait_nodes_up(1);
  const auto alice = c.user("aqsctla");
  const auto bob = c.user("aqsctlb");

  // Root's job fills the node; alice's waits behind it and is held.
  const std::int64_t busy = c.submit({"-n", "2", "--wrap", "sleep 3"});
  c.wait_state(busy, {job_state::running});
  const std::int64_t a = c.submit({"-n", "1", "--wrap", "echo alice-ran"}, &alice, alice.home.string());
  auto r = c.cmd(bin().fctl, {"hold", std::to_string(a)}, &alice);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(reason_of(c, a) == "JobHeldUser");

  // Bob may neither release nor hold alice's job, nor root's; nothing changes.
  r = c.cmd(bin().fctl, {"release", std::to_string(a)}, &bob);
  CHECK(r.status == 1);
  CHECK(r.err.find("belongs to aqsctla") != std::string::npos);
  r = c.cmd(bin().fctl, {"suspend", std::to_string(busy)}, &bob);
  CHECK(r.status == 1);
  CHECK(r.err.find("belongs to root") != std::string::npos);
  CHECK(c.job(busy)->state == job_state::running);
  CHECK(reason_of(c, a) == "JobHeldUser");

  // Root holds another of alice's jobs: an admin hold, which she cannot release.
  const std::int64_t b = c.submit({"-n", "1", "--wrap", "echo alice-ran-too"}, &alice, alice.home.string());
  r = c.cmd(bin().fctl, {"hold", std::to_string(b)});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(reason_of(c, b) == "JobHeldAdmin");
  r = c.cmd(bin().fctl, {"release", std::to_string(b)}, &alice);
  CHECK(r.status == 1);
  CHECK(r.err.find("only root may release it") != std::string::npos);

  // The node frees up; the held jobs stay pending.
  c.wait_state(busy, {job_state::completed});
  std::this_thread::sleep_for(1500ms);
  CHECK(c.job(a)->state == job_state::pending);
  CHECK(c.job(b)->state == job_state::pending);
  r = c.cmd(bin().fctl, {"release", std::to_string(a)}, &alice);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  r = c.cmd(bin().fctl, {"release", std::to_string(b)});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(c.wait_state(a, {job_state::completed}).exit_code == 0);
  CHECK(c.wait_state(b, {job_state::completed}).exit_code == 0);

  // The history says who held and released it, with times.
  r = c.cmd(bin().fjobs, {"--history", std::to_string(a)});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("held by aqsctla") != std::string::npos);
  CHECK(r.out.find("released by aqsctla") != std::string::npos);

  // Bad input: one line, non-zero, nothing changed.
  r = c.cmd(bin().fctl, {"frobnicate", "1"});
  CHECK(r.status == 2);
  CHECK(r.err.find("unknown action 'frobnicate'") != std::string::npos);
  r = c.cmd(bin().fctl, {"hold"});
  CHECK(r.status == 2);
  r = c.cmd(bin().fctl, {"update", std::to_string(a)});
  CHECK(r.status == 2);
  CHECK(r.err.find("update needs") != std::string::npos);
  r = c.cmd(bin().fctl, {"hold", "--min", "2", std::to_string(a)});
  CHECK(r.status == 2);
  r = c.cmd(bin().fctl, {"hold", std::to_string(a)});
  CHECK(r.status == 1);
  CHECK(r.err.find("has already ended (COMPLETED)") != std::string::npos);
  r = c.cmd(bin().fctl, {"hold", "999999"});
  CHECK(r.status == 1);
  CHECK(r.err.find("no pending or running job 999999") != std::string::npos);
  for (const auto* s : {&r.err}) CHECK(std::count(s->begin(), s->end(), '\n') == 1);
}

TEST_CASE("a suspended rigid job frees its processors, resumes on them and completes with all its output") {
  test::test_database db;
  test::cluster c(one_node(db, 4));
  c.wait_nodes_up(1);
  const auto alice = c.user("aqsctla");
  const fs::path out = alice.home / "count.out";
  // 20 lines, 0.1 s apart: about 2 s of work, under a time limit of 8 s.
  const std::int64_t a = c.submit({"-n", "2", "-t", "0:08", "-o", out.string(), "--wrap",
                                   "for i in $(seq 1 20); do echo $i; sleep 0.1; done"},
                                  &alice, alice.home.string());
  c.wait_state(a, {job_state::running});
  REQUIRE(eventually([&] { return lines_of(out) >= 3; }));
  auto r = c.cmd(bin().fctl, {"suspend", std::to_string(a)}, &alice);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto ja = c.wait_state(a, {job_state::suspended});
  CHECK(ja.nprocs == 0);
  // Stopped: its output does not grow.
  std::this_thread::sleep_for(500ms);
  const std::size_t at_stop = lines_of(out);
  std::this_thread::sleep_for(1500ms);
  CHECK(lines_of(out) == at_stop);
  CHECK(at_stop < 20);

  // A job of all 4 processors starts in the freed room.
  const std::int64_t b = c.submit({"-n", "4", "--wrap", "sleep 8"});
  c.wait_state(b, {job_state::running});
  // Asked to resume, it waits for its own processors.
  r = c.cmd(bin().fctl, {"resume", std::to_string(a)}, &alice);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  r = c.cmd(bin().fctl, {"resume", std::to_string(a)}, &alice);
  CHECK(r.status == 1);
  CHECK(r.err.find("already waiting to resume") != std::string::npos);
  std::this_thread::sleep_for(1s);
  CHECK(c.job(a)->state == job_state::suspended);
  CHECK(lines_of(out) == at_stop);
  c.wait_state(b, {job_state::completed});
  // Then it runs on and completes: its time limit (8 s) did not run while it
  // was stopped (it lived well over 10 s).
  const auto done = c.wait_state(a, {job_state::completed, job_state::timeout, job_state::failed}, 60s);
  CHECK(done.state == job_state::completed);
  std::string want;
  for (int i = 1; i <= 20; ++i) want += std::to_string(i) + "\n";
  CHECK(slurp(out) == want);

  r = c.cmd(bin().fjobs, {"--history", std::to_string(a)});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("SUSPENDED") != std::string::npos);
  CHECK(r.out.find("suspended by aqsctla") != std::string::npos);
  CHECK(r.out.find("resume asked by aqsctla") != std::string::npos);
  CHECK(r.out.find("resumed on") != std::string::npos);
}

TEST_CASE("fctl requeue kills a running job and runs it again; update changes a pending job") {
  test::test_database db;
  test::cluster c(one_node(db, 2));
  c.wait_nodes_up(1);
  const fs::path out = c.workdir() / "requeue.out";
  const std::int64_t a = c.submit({"-n", "1", "--wrap", "echo run >> " + out.string() + "; sleep 30"});
  c.wait_state(a, {job_state::running});
  REQUIRE(eventually([&] { return lines_of(out) >= 1; }));
  auto r = c.cmd(bin().fctl, {"requeue", std::to_string(a)});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  // Back to PENDING, then running again: a second "run" line.
  REQUIRE(eventually([&] { return lines_of(out) >= 2; }, 60s));
  CHECK(c.job(a)->state == job_state::running);
  r = c.cmd(bin().fjobs, {"--history", std::to_string(a)});
  CHECK(r.out.find("requeued by root") != std::string::npos);
  // Only one instance runs.
  CHECK(test::job_processes_mentioning("sleep 30").size() <= 2);  // the shell and its sleep

  // A pending rigid job's size and time limit change; a running one's does not.
  const std::int64_t p = c.submit({"-n", "2", "-t", "5", "--wrap", "true"});
  REQUIRE(c.cmd(bin().fctl, {"hold", std::to_string(p)}).status == 0);  // so that it stays pending
  r = c.cmd(bin().fctl, {"update", std::to_string(p), "--min", "1", "--max", "1", "-t", "10"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto jp = c.job(p);
  REQUIRE(jp);
  CHECK(jp->min_pe == 1);
  CHECK(jp->max_pe == 1);
  r = c.cmd(bin().fctl, {"update", std::to_string(a), "--min", "2", "--max", "2"});
  CHECK(r.status == 1);
  CHECK(r.err.find("rigid and has started") != std::string::npos);
  r = c.cmd(bin().fctl, {"update", std::to_string(p), "--min", "1", "--max", "3"});
  CHECK(r.status == 1);
  CHECK(r.err.find("is rigid") != std::string::npos);
  r = c.cmd(bin().fctl, {"update", std::to_string(p), "--min", "5", "--max", "5"});
  CHECK(r.status == 1);
  CHECK(r.err.find("can never have that") != std::string::npos);
  CHECK(c.cmd(bin().fkill, {std::to_string(a)}).status == 0);
  REQUIRE(c.cmd(bin().fctl, {"release", std::to_string(p)}).status == 0);
  c.wait_state(p, {job_state::completed}, 60s);
  c.wait_idle();
}

TEST_CASE("an adaptive job's --pref is kept, listed by fjobs, and survives a restart of aqsd") {
  test::test_database db;
  test::cluster c(one_node(db, 4));
  c.wait_nodes_up(1);
  const std::int64_t id =
      c.submit({"--adaptive", "--min", "1", "--max", "4", "--pref", "2", "--speedup", "amdahl:0.9", "--wrap", "sleep 60"});
  c.wait_state(id, {job_state::running});
  auto j = c.job(id);
  REQUIRE(j);
  CHECK(j->pref_pe == 2);
  const auto table = c.cmd(bin().fjobs, {});
  CHECK(table.out.find("1-4 adaptive pref 2") != std::string::npos);
  c.kill_aqsd();
  c.start_aqsd();
  c.wait_nodes_up(1);
  j = c.job(id);
  REQUIRE(j);
  CHECK(j->pref_pe == 2);
  c.cmd(bin().fkill, {std::to_string(id)});
}
