// job_files (aqsd's side of staged files) on a real file system: files
// written as the job's user, paths and symlinks kept inside the job's
// directory, the outputs' limit, removal. Run as root (the files belong to
// nobody, uid 65534); as another user only the checks that need no root.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include "daemon/job_files.hpp"
#include "temp_dir.hpp"

using namespace aqs::daemon;
using aqs::protocol::staged_file;
namespace fs = std::filesystem;

namespace {

const stage_owner k_nobody{65534, 65534};

stage_owner owner_for_test() { return ::geteuid() == 0 ? k_nobody : stage_owner{::geteuid(), ::getegid()}; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("staged inputs land in the job's own directory, as its user, byte for byte") {
  aqs::test::temp_dir tmp("aqs-stage-files", 0755);
  const fs::path root = tmp.path() / "stage";
  const auto owner = owner_for_test();
  const std::string bin("\0\x01\xfe\xff", 4);
  const auto dir = stage_in(root, 7, 2, owner, {{"in/data.bin", 0640, bin}, {"run.sh", 0755, "#!/bin/sh\n"}});
  CHECK(dir == root / "f7.2");
  CHECK(slurp(dir / "in" / "data.bin") == bin);
  struct stat st {};
  REQUIRE(::stat((dir / "in" / "data.bin").c_str(), &st) == 0);
  CHECK(st.st_uid == owner.uid);
  CHECK((st.st_mode & 0777) == 0640);
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK(st.st_uid == owner.uid);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(::stat(root.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0711);
  // The same forward again keeps what is there.
  CHECK(stage_in(root, 7, 2, owner, {{"other", 0644, "x"}}) == dir);
  CHECK_FALSE(fs::exists(dir / "other"));
}

TEST_CASE("a staged path with '..' or an absolute one is refused on the cluster too, and nothing is left") {
  aqs::test::temp_dir tmp("aqs-stage-files", 0755);
  const fs::path root = tmp.path() / "stage";
  const auto owner = owner_for_test();
  CHECK_THROWS_WITH_AS(stage_in(root, 1, 1, owner, {{"ok", 0644, "1"}, {"../../escape", 0644, "x"}}),
                       doctest::Contains("contains '..'"), stage_error);
  CHECK_THROWS_WITH_AS(stage_in(root, 1, 1, owner, {{"/tmp/escape", 0644, "x"}}), doctest::Contains("is absolute"),
                       stage_error);
  CHECK_FALSE(fs::exists(tmp.path() / "escape"));
  CHECK_FALSE(fs::exists("/tmp/escape"));
  if (fs::exists(root)) CHECK(fs::is_empty(root));
}

TEST_CASE("staged files are never written as root") {
  aqs::test::temp_dir tmp("aqs-stage-files", 0755);
  CHECK_THROWS_AS(stage_in(tmp.path() / "stage", 1, 1, stage_owner{0, 0}, {{"a", 0644, "1"}}), stage_error);
}

TEST_CASE("outputs: regular files only, symlinks never followed out of the job's directory, bounded") {
  aqs::test::temp_dir tmp("aqs-stage-files", 0755);
  const fs::path root = tmp.path() / "stage";
  const auto owner = owner_for_test();
  const auto dir = stage_in(root, 3, 1, owner, {{"in.txt", 0644, "input"}});
  // What a job could leave there: its results, and links out.
  {
    std::ofstream(dir / "out.txt") << "result";
  }
  fs::create_directory(dir / "sub");
  {
    std::ofstream(dir / "sub" / "deep.txt") << "deep";
  }
  const fs::path secret = tmp.path() / "secret";
  {
    std::ofstream(secret) << "not yours";
  }
  fs::create_symlink(secret, dir / "leak");
  fs::create_directory_symlink(tmp.path(), dir / "up");
  if (::geteuid() == 0) {
    for (const auto& p : {dir / "out.txt", dir / "sub", dir / "sub" / "deep.txt"}) {
      REQUIRE(::lchown(p.c_str(), owner.uid, owner.gid) == 0);
    }
  }
  const auto files = collect_outputs(dir, owner, 1000);
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.path);
  CHECK(names == std::vector<std::string>{"in.txt", "out.txt", "sub/deep.txt"});
  CHECK(files[1].data == "result");
  CHECK_THROWS_WITH_AS(collect_outputs(dir, owner, 10), doctest::Contains("over the limit of 10 bytes"), stage_error);
  CHECK(remove_stage_dir(dir, owner).empty());
  CHECK_FALSE(fs::exists(dir));
  CHECK(slurp(secret) == "not yours");  // a link's target is never touched
}
