// Unit tests of execvp's PATH search as frun and the node agent do it, on real files in a temporary directory.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "cmdline/exec_path.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace aqs::cmdline;

namespace {

void make_file(const fs::path& p, fs::perms mode) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "#!/bin/sh\n";
  fs::permissions(p, mode);
}

constexpr auto k_exec = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec;
constexpr auto k_no_exec = fs::perms::owner_read | fs::perms::owner_write;

}  // namespace

TEST_CASE("a name without a slash is the first executable regular file of that name on PATH") {
  aqs::test::temp_dir t;
  const auto& d = t.path();
  fs::create_directories(d / "a" / "prog");        // a directory: skipped
  make_file(d / "b" / "prog", k_no_exec);          // not executable: skipped
  make_file(d / "c" / "prog", k_exec);
  make_file(d / "e" / "prog", k_exec);
  const std::string path = (d / "none").string() + ":" + (d / "a").string() + ":" + (d / "b").string() + ":" +
                           (d / "c").string() + ":" + (d / "e").string();
  CHECK(find_executable("prog", path, "/") == (d / "c" / "prog").string());
  CHECK_FALSE(find_executable("other", path, "/").has_value());
  CHECK_FALSE(find_executable("", path, "/").has_value());
}

TEST_CASE("empty and relative PATH entries, and names with a slash, are relative to the working directory") {
  aqs::test::temp_dir t;
  const auto& d = t.path();
  make_file(d / "prog", k_exec);
  make_file(d / "bin" / "tool", k_exec);
  CHECK(find_executable("prog", std::string("/nonexistent:"), d.string()) == (d / "prog").string());
  CHECK(find_executable("tool", std::string("bin"), d.string()) == (d / "bin" / "tool").string());
  // execvp does not look in the working directory unless PATH says so.
  CHECK_FALSE(find_executable("prog", std::string("/nonexistent"), d.string()).has_value());
  const auto dotted = find_executable("./prog", std::string("/nonexistent"), d.string());
  REQUIRE(dotted.has_value());
  CHECK(fs::equivalent(*dotted, d / "prog"));
  CHECK(find_executable("bin/tool", std::nullopt, d.string()) == (d / "bin" / "tool").string());
  CHECK(find_executable((d / "prog").string(), std::nullopt, "/elsewhere") == (d / "prog").string());
  CHECK_FALSE(find_executable("./missing", std::nullopt, d.string()).has_value());
  CHECK_FALSE(find_executable("bin", std::nullopt, d.string()).has_value());  // a directory
}

TEST_CASE("without PATH the node agent's default is searched") {
  const auto r = find_executable("true", std::nullopt, "/");
  REQUIRE(r.has_value());
  CHECK(r->ends_with("/true"));
  CHECK(fs::path(*r).is_absolute());
}

TEST_CASE("PATH is read from a KEY=VALUE environment, the last entry winning") {
  CHECK_FALSE(path_variable({"HOME=/root", "PATHX=/x"}).has_value());
  CHECK(path_variable({"PATH=/a", "HOME=/root", "PATH=/b"}) == "/b");
  CHECK(path_variable({"PATH="}) == "");
}
