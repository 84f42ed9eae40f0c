// Unit tests of job_script: the spool's checks, scripts written fresh with the right mode and owner, and job files
// found and removed by job id.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "file_text.hpp"
#include "job_script.hpp"
#include "temp_dir.hpp"

using namespace aqs;
using namespace aqs::node;
namespace fs = std::filesystem;

namespace {

struct stat stat_of(const fs::path& p) {
  struct stat sb {};
  REQUIRE(::lstat(p.c_str(), &sb) == 0);
  return sb;
}

// Throws std::runtime_error with a message containing `part`, or the test fails.
void check_refused(const fs::path& spool, const std::string& part) {
  try {
    prepare_spool(spool);
    FAIL("prepare_spool accepted " << spool);
  } catch (const std::runtime_error& e) {
    CHECK_MESSAGE(std::string(e.what()).find(part) != std::string::npos, e.what());
  }
}

}  // namespace

TEST_CASE("a job script is written whole to a file only its owner may read, write and run") {
  test::temp_dir spool;
  const auto path = script_path(spool.path(), 42);
  const std::string text = "#!/bin/sh\necho hello\n" + std::string(200000, '#') + "\n";
  REQUIRE(write_job_script(path, text, std::nullopt));
  CHECK(test::slurp(path) == text);
  const auto sb = stat_of(path);
  CHECK(S_ISREG(sb.st_mode));
  CHECK((sb.st_mode & 07777) == 0700);
  CHECK(sb.st_uid == ::geteuid());
}

TEST_CASE("a job script replaces what was at its path, and never writes through a link planted there") {
  test::temp_dir spool;
  const auto path = script_path(spool.path(), 42);
  const auto victim = spool.path() / "victim";
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, path);
  REQUIRE(write_job_script(path, "echo mine\n", std::nullopt));
  CHECK(test::slurp(victim) == "precious");
  CHECK(S_ISREG(stat_of(path).st_mode));
  CHECK(test::slurp(path) == "echo mine\n");

  REQUIRE(write_job_script(path, "echo again\n", std::nullopt));  // an earlier script of the same job
  CHECK(test::slurp(path) == "echo again\n");
}

TEST_CASE("as root, a job script belongs to the job's user") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root");
    return;
  }
  test::temp_dir spool;
  const auto path = script_path(spool.path(), 42);
  REQUIRE(write_job_script(path, "echo hi\n", file_owner{4321, 8765}));
  const auto sb = stat_of(path);
  CHECK(sb.st_uid == 4321);
  CHECK(sb.st_gid == 8765);
  CHECK((sb.st_mode & 07777) == 0700);
}

TEST_CASE("a job script that cannot be created is reported as not written") {
  test::temp_dir spool;
  CHECK_FALSE(write_job_script(spool.path() / "missing" / "job-1.script", "echo\n", std::nullopt));
}

TEST_CASE("a script without a shebang runs with /bin/sh, one with a shebang runs itself") {
  const fs::path path = "/spool/job-42.script";
  CHECK(script_command(path, "echo hi\n") == std::vector<std::string>{"/bin/sh", "/spool/job-42.script"});
  CHECK(script_command(path, "") == std::vector<std::string>{"/bin/sh", "/spool/job-42.script"});
  CHECK(script_command(path, "#!/usr/bin/env python3\n") == std::vector<std::string>{"/spool/job-42.script"});
  CHECK(script_command(path, " #!/bin/sh\n") == std::vector<std::string>{"/bin/sh", "/spool/job-42.script"});
}

TEST_CASE("a job's files are named after its id in the spool and removed together") {
  test::temp_dir spool;
  CHECK(script_path(spool.path(), 42) == spool.path() / "job-42.script");
  CHECK(mpi_launch_dir(spool.path(), 42) == spool.path() / "job-42.mpi");
  REQUIRE(write_job_script(script_path(spool.path(), 42), "echo\n", std::nullopt));
  fs::create_directories(mpi_launch_dir(spool.path(), 42));
  std::ofstream(mpi_launch_dir(spool.path(), 42) / "hostfile") << "a slots=1\n";
  REQUIRE(write_job_script(script_path(spool.path(), 420), "echo\n", std::nullopt));
  remove_job_files(spool.path(), 42);
  CHECK_FALSE(fs::exists(script_path(spool.path(), 42)));
  CHECK_FALSE(fs::exists(mpi_launch_dir(spool.path(), 42)));
  CHECK(fs::exists(script_path(spool.path(), 420)));
  remove_job_files(spool.path(), 42);  // nothing left: nothing to complain about
}

TEST_CASE("stale job files are the scripts and MPI directories of jobs not running, and nothing else") {
  test::temp_dir spool;
  for (const char* name : {"job-1.script", "job-3.script", "job-x.script", "job-4.step", "job-4.status", "notes.txt"}) {
    std::ofstream(spool.path() / name) << "x";
  }
  fs::create_directories(spool.path() / "job-2.mpi");
  fs::create_directories(spool.path() / "job-3.mpi");
  auto stale = stale_job_files(spool.path(), [](std::int64_t id) { return id == 3; });
  std::sort(stale.begin(), stale.end());
  CHECK(stale == std::vector<fs::path>{spool.path() / "job-1.script", spool.path() / "job-2.mpi"});
  CHECK(stale_job_files(spool.path() / "missing", [](std::int64_t) { return false; }).empty());
}

TEST_CASE("a spool is created private to the agent, and one that is a symlink or a file is refused") {
  test::temp_dir top;
  const auto spool = top.path() / "var" / "spool";
  prepare_spool(spool);
  CHECK(S_ISDIR(stat_of(spool).st_mode));
  CHECK((stat_of(spool).st_mode & 07777) == 0711);
  ::chmod(spool.c_str(), 0777);
  prepare_spool(spool);  // one that is there already gets its mode back
  CHECK((stat_of(spool).st_mode & 07777) == 0711);

  const auto link = top.path() / "link";
  fs::create_directory_symlink(spool, link);
  check_refused(link, "is not a directory (a symlink?)");
  const auto file = top.path() / "file";
  std::ofstream(file) << "x";
  check_refused(file, "is not a directory");
}

TEST_CASE("as root, a spool of another user is refused") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root");
    return;
  }
  test::temp_dir top;
  const auto spool = top.path() / "spool";
  fs::create_directory(spool);
  REQUIRE(::chown(spool.c_str(), 4321, 4321) == 0);
  check_refused(spool, "belongs to uid 4321");
}
