// layers_test: every quoted #include of the source tree points down the layers.
//
// The include roots are the libraries' include directories (CMake INCLUDE of
// each aqs_add_library): an include "daemon/x.hpp" is resolved the way the
// compiler would, to the first root holding that file, and the rule is
// checked on the folder the resolved file sits in. The tree to scan is
// AQS_SOURCE_DIR, or $AQS_LAYERS_TREE when set (to try the rules on a copy).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace {

// A folder (relative to the tree) whose files may not include files of
// another folder, and why.
struct rule {
  std::string from;
  std::string to;
  std::string why;
};

const std::vector<rule> k_rules = {
    {"scheduler/", "faucets/", "the scheduler is below faucetsd; shared code goes to service/"},
    {"scheduler/", "tools/", "the scheduler is below the commands and the agent; shared code goes to service/ or scheduler/core"},
    {"faucets/", "scheduler/daemon/", "faucetsd and aqsd are peers; what both need goes to service/"},
    {"service/", "scheduler/daemon/", "service/ is the library below both daemons"},
    {"service/", "faucets/", "service/ is the library below both daemons"},
    {"service/", "tools/", "service/ is the library below both daemons"},
};

// Where quoted includes are looked up, in order (besides the including
// file's own folder): the include directories the libraries export.
const std::vector<std::string> k_roots = {"scheduler", "service", "faucets", "tools", "tools/node", "mpi_adapter/include",
                                          "runtime/include", "runtime/src", "testbed", "bench", "tests/support"};

// The folders whose sources are scanned (tests, bench and examples use
// everything and are not layers).
const std::vector<std::string> k_scanned = {"scheduler", "service", "faucets", "tools", "runtime", "mpi_adapter"};

struct violation {
  std::string file;
  int line = 0;
  std::string include;
  std::string target;
  std::string why;
};

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

std::optional<std::string> resolve(const fs::path& tree, const fs::path& including, const std::string& name) {
  std::vector<fs::path> candidates{including.parent_path() / name};
  for (const auto& r : k_roots) candidates.push_back(tree / r / name);
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(c, ec)) return fs::relative(fs::weakly_canonical(c), fs::weakly_canonical(tree)).generic_string();
  }
  return std::nullopt;
}

// Every root that holds the include's name: more than one means the include
// line alone does not say which library it reaches (the compiler takes the
// first on its path, which differs per target).
std::vector<std::string> roots_holding(const fs::path& tree, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& r : k_roots) {
    std::error_code ec;
    if (fs::is_regular_file(tree / r / name, ec)) out.push_back(r);
  }
  return out;
}

std::vector<violation> scan(const fs::path& tree) {
  static const std::regex include_line(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<violation> out;
  for (const auto& top : k_scanned) {
    if (!fs::is_directory(tree / top)) continue;
    for (const auto& e : fs::recursive_directory_iterator(tree / top)) {
      if (!e.is_regular_file()) continue;
      const auto ext = e.path().extension();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".c") continue;
      const std::string rel = fs::relative(e.path(), tree).generic_string();
      std::ifstream in(e.path());
      std::string text;
      int n = 0;
      while (std::getline(in, text)) {
        ++n;
        std::smatch m;
        if (!std::regex_search(text, m, include_line)) continue;
        const auto target = resolve(tree, e.path(), m[1].str());
        if (!target) continue;  // a system or generated header
        for (const auto& r : k_rules) {
          if (starts_with(rel, r.from) && starts_with(*target, r.to)) out.push_back({rel, n, m[1].str(), *target, r.why});
        }
        if (const auto roots = roots_holding(tree, m[1].str()); roots.size() > 1) {
          out.push_back({rel, n, m[1].str(), roots[0] + "/" + m[1].str() + " and " + roots[1] + "/" + m[1].str(),
                         "two libraries have a file of this name and folder; give the folder a unique name"});
        }
      }
    }
  }
  return out;
}

fs::path tree_root() {
  if (const char* t = std::getenv("AQS_LAYERS_TREE"); t && *t) return t;
  return AQS_SOURCE_DIR;
}

}  // namespace

TEST_CASE("no include points back up the layers") {
  const fs::path tree = tree_root();
  REQUIRE(fs::is_directory(tree / "scheduler"));
  const auto found = scan(tree);
  for (const auto& v : found) {
    CHECK_MESSAGE(false, v.file << ":" << v.line << ": #include \"" << v.include << "\" reaches " << v.target
                                << ", which this layer may not include: " << v.why);
  }
  CHECK(found.empty());
}

TEST_CASE("the scanner sees an include that goes the wrong way") {
  // A tree of three files in a scratch folder: the scanner must resolve both
  // includes and report exactly the one that points up.
  const fs::path tmp = fs::temp_directory_path() / ("aqs-layers-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp / "scheduler/daemon");
  fs::create_directories(tmp / "scheduler/core");
  fs::create_directories(tmp / "tools/client");
  std::ofstream(tmp / "tools/client/time_limit.hpp") << "#pragma once\n";
  std::ofstream(tmp / "scheduler/core/job.hpp") << "#pragma once\n";
  std::ofstream(tmp / "scheduler/daemon/a.cpp") << "#include \"core/job.hpp\"\n#include <vector>\n"
                                                   "#include \"client/time_limit.hpp\"\n";
  const auto found = scan(tmp);
  fs::remove_all(tmp);
  REQUIRE(found.size() == 1);
  CHECK(found[0].file == "scheduler/daemon/a.cpp");
  CHECK(found[0].line == 3);
  CHECK(found[0].target == "tools/client/time_limit.hpp");
}

TEST_CASE("the scanner sees an include two libraries could answer") {
  const fs::path tmp = fs::temp_directory_path() / ("aqs-layers-twice-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp / "scheduler/daemon");
  fs::create_directories(tmp / "service/daemon");
  std::ofstream(tmp / "scheduler/daemon/server.hpp") << "#pragma once\n";
  std::ofstream(tmp / "service/daemon/server.hpp") << "#pragma once\n";
  std::ofstream(tmp / "scheduler/daemon/a.cpp") << "#include \"daemon/server.hpp\"\n";
  const auto found = scan(tmp);
  fs::remove_all(tmp);
  REQUIRE(found.size() == 1);
  CHECK(found[0].file == "scheduler/daemon/a.cpp");
  CHECK(found[0].why.find("unique name") != std::string::npos);
}
