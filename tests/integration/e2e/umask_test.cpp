// End to end: a job's output files and processes take the umask its
// submitter had when they ran fsub (Slurm's behaviour), not the agent's.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <thread>

#include "e2e.hpp"

namespace {

// Submits as `as` with the umask `mask` (fsub inherits ours) and waits for
// the job to complete.
std::int64_t submit_with_umask(test::cluster& c, const test::test_user& as, mode_t mask,
                               std::vector<std::string> args) {
  const mode_t before = ::umask(mask);
  std::int64_t id = 0;
  try {
    id = c.submit(std::move(args), &as, as.home.string());
  } catch (...) {
    ::umask(before);
    throw;
  }
  ::umask(before);
  c.wait_state(id, {job_state::completed, job_state::failed}, 60s);
  return id;
}

mode_t mode_of(const fs::path& p) {
  struct stat sb {};
  REQUIRE_MESSAGE(::stat(p.c_str(), &sb) == 0, p.string() << " is missing");
  return sb.st_mode & 0777;
}

}  // namespace

TEST_CASE("a job submitted with umask 077 has output files only its user can read, and runs with that umask") {
  test::test_database db;
  test::cluster c(test::nodes_of(db, 1, 4));
  const auto alice = c.user("aqs-test-alice");
  const auto secret = submit_with_umask(c, alice, 077, {"-e", "err-%j.txt", "--wrap", "umask; umask > made.txt"});
  CHECK(c.job(secret)->state == job_state::completed);
  CHECK(mode_of(alice.home / ("aqs-" + std::to_string(secret) + ".out")) == 0600);
  CHECK(mode_of(alice.home / ("err-" + std::to_string(secret) + ".txt")) == 0600);
  CHECK(mode_of(alice.home / "made.txt") == 0600);
  CHECK(test::slurp(alice.home / ("aqs-" + std::to_string(secret) + ".out")) == "0077\n");

  // The usual umask gives the usual modes.
  fs::remove(alice.home / "made.txt");
  const auto usual = submit_with_umask(c, alice, 022, {"--wrap", "umask > made.txt"});
  CHECK(c.job(usual)->state == job_state::completed);
  CHECK(mode_of(alice.home / ("aqs-" + std::to_string(usual) + ".out")) == 0644);
  CHECK(mode_of(alice.home / "made.txt") == 0644);
  CHECK(test::slurp(alice.home / "made.txt") == "0022\n");
}
