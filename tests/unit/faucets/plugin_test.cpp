// Broker plugins (plugin_host.hpp) run for real: shell and Python programs,
// the C example library through faucetsd's plugin host; names, the
// directory's safety, the request and answer, and every way a plugin fails.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "broker/plugin_host.hpp"
#include "temp_dir.hpp"

using namespace aqs::faucets;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

void write_file(const fs::path& p, const std::string& text, mode_t mode) {
  std::ofstream(p) << text;
  ::chmod(p.c_str(), mode);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<cluster_view> three() {
  std::vector<cluster_view> cs(3);
  cs[0].name = "alpha";
  cs[1].name = "gamma";
  cs[2].name = "beta";
  for (auto& c : cs) c.procs_total = c.max_job_procs = 8;
  cs[1].start_in_s = 12.5;
  return cs;
}

plugin_job a_job() {
  plugin_job j;
  j.id = 7;
  j.owner = "alice";
  j.name = "solver";
  j.ask.min_pe = 2;
  j.ask.max_pe = 4;
  return j;
}

struct site {
  aqs::test::temp_dir dir{"aqs-plugins", 0755};
  plugin_options options() const {
    plugin_options o;
    o.dir = dir.path();
    o.limits.time_limit = 1500ms;
    o.library_host = FAUCETSD_BINARY;
    return o;
  }
  // A /bin/sh plugin called `name`.
  void shell(const std::string& name, const std::string& body) const {
    write_file(dir.path() / name, "#!/bin/sh\n" + body + "\n", 0755);
  }
  plugin_ranking rank(const std::string& name) const {
    const auto cs = three();
    return plugin_host(options()).rank(name, a_job(), cs);
  }
};

std::string thrown_by(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a plugin's name is a name: '/' and '..' are refused, so no one reaches past the admin's directory") {
  CHECK_FALSE(bad_plugin_name("last-name"));
  CHECK_FALSE(bad_plugin_name("rank_v2.1"));
  for (const char* bad : {"", "../bin/sh", "a/b", "/bin/sh", "..", "x..y", ".hidden", "-x", "a b", "a;b"}) {
    CAPTURE(bad);
    CHECK(bad_plugin_name(bad));
  }
  site s;
  // Even with a file of that name one level up, the path is never built.
  s.shell("ok", "echo '[\"alpha\"]'");
  const std::string why = thrown_by([&] { plugin_host(s.options()).check("../" + s.dir.path().filename().string() + "/ok"); });
  CHECK(why.find("no '/' or '..'") != std::string::npos);
  const auto r = s.rank("../ok");
  REQUIRE(r.failure);
  CHECK(r.ranked.empty());
  CHECK(plugin_name_of("plugin:x") == "x");
  CHECK_FALSE(plugin_name_of("earliest-start"));
}

TEST_CASE("an unknown plugin is one line naming the directory searched") {
  site s;
  const std::string why = thrown_by([&] { plugin_host(s.options()).check("nope"); });
  CHECK(why == "unknown broker plugin 'nope' (looked for nope.so and nope in " + s.dir.path().string() + ")");
  CHECK(why.find('\n') == std::string::npos);
  plugin_options none;
  CHECK(thrown_by([&] { plugin_host(none).check("x"); }).find("--plugin-dir") != std::string::npos);
}

TEST_CASE("a plugin or directory that others could write, or a plugin that cannot run, is refused") {
  site s;
  s.shell("open", "echo '[\"alpha\"]'");
  ::chmod((s.dir.path() / "open").c_str(), 0777);
  CHECK(thrown_by([&] { plugin_host(s.options()).check("open"); }).find("writable by group or others") != std::string::npos);
  CHECK(s.rank("open").failure);
  s.shell("plain", "echo '[\"alpha\"]'");
  ::chmod((s.dir.path() / "plain").c_str(), 0644);
  CHECK(thrown_by([&] { plugin_host(s.options()).check("plain"); }).find("not executable") != std::string::npos);
  s.shell("fine", "echo '[\"alpha\"]'");
  CHECK_NOTHROW(plugin_host(s.options()).check("fine"));
  ::chmod(s.dir.path().c_str(), 0777);
  CHECK(thrown_by([&] { plugin_host(s.options()).check("fine"); }).find("plugin directory") != std::string::npos);
  ::chmod(s.dir.path().c_str(), 0755);
}

TEST_CASE("the Python example ranks the candidates by name, lexically last first, from the request it reads") {
  site s;
  fs::copy_file(fs::path(EXAMPLES_DIR) / "last-name", s.dir.path() / "last-name");
  ::chmod((s.dir.path() / "last-name").c_str(), 0755);
  CHECK_NOTHROW(plugin_host(s.options()).check("last-name"));
  const auto r = s.rank("last-name");
  REQUIRE_MESSAGE(!r.failure, *r.failure);
  CHECK(r.ranked == std::vector<std::string>{"gamma", "beta", "alpha"});
  CHECK(r.reason == "lexically last name of 3");
}

TEST_CASE("the request holds the job and every candidate with its estimate") {
  const auto cs = three();
  const auto req = plugin_request("x", a_job(), cs);
  CHECK(req["version"] == 1);
  CHECK(req["policy"] == "plugin:x");
  CHECK(req["job"]["id"] == 7);
  CHECK(req["job"]["owner"] == "alice");
  CHECK(req["job"]["min_pe"] == 2);
  REQUIRE(req["clusters"].size() == 3);
  CHECK(req["clusters"][0]["start_in_s"].is_null());
  CHECK(req["clusters"][1]["start_in_s"] == 12.5);
  // What a plugin reads is exactly what it was sent.
  site s;
  s.shell("echo-back", "cat > " + (s.dir.path() / "got").string() + "; echo '[\"beta\"]'");
  const auto r = s.rank("echo-back");
  REQUIRE_MESSAGE(!r.failure, *r.failure);
  CHECK(nlohmann::json::parse(slurp(s.dir.path() / "got")) == plugin_request("echo-back", a_job(), cs));
}

TEST_CASE("answers that are not a ranking of the candidates are refused with the reason") {
  const auto cs = three();
  CHECK(parse_plugin_answer("[\"beta\", \"alpha\"]", cs).ranked == std::vector<std::string>{"beta", "alpha"});
  CHECK(parse_plugin_answer("{\"ranked\": [\"gamma\"], \"reason\": \"why\\nnot\"}", cs).reason == "why");
  const std::pair<const char*, const char*> bad[] = {
      {"garbage", "not JSON"},
      {"", "not JSON"},
      {"{\"best\": \"alpha\"}", "neither a list"},
      {"[\"alpha\", 3]", "other than a cluster name"},
      {"[\"delta\"]", "'delta', which is not a candidate"},
      {"[\"alpha\", \"alpha\"]", "twice"},
      {"[]", "no cluster"},
      {"{\"ranked\": [\"alpha\"], \"reason\": 5}", "not a string"},
  };
  for (const auto& [text, why] : bad) {
    CAPTURE(text);
    const auto r = parse_plugin_answer(text, cs);
    REQUIRE(r.failure);
    CHECK(r.failure->find(why) != std::string::npos);
    CHECK(r.ranked.empty());
  }
}

TEST_CASE("a plugin that exits non-zero, crashes, prints garbage or too much is ignored with the reason") {
  site s;
  s.shell("exits", "echo 'no data' >&2; exit 1");
  auto r = s.rank("exits");
  REQUIRE(r.failure);
  CHECK(*r.failure == "exited with status 1: no data");
  s.shell("crashes", "kill -SEGV $$");
  r = s.rank("crashes");
  REQUIRE(r.failure);
  CHECK(r.failure->find("killed by signal 11") != std::string::npos);
  s.shell("garbage", "echo 'hello'");
  r = s.rank("garbage");
  REQUIRE(r.failure);
  CHECK(r.failure->find("not JSON") != std::string::npos);
  s.shell("stranger", "echo '[\"delta\"]'");
  CHECK(s.rank("stranger").failure);
  s.shell("floods", "head -c 5000000 /dev/zero");
  r = s.rank("floods");
  REQUIRE(r.failure);
  CHECK(r.failure->find("printed more than") != std::string::npos);
  // One that never reads its stdin does not hurt the server (no SIGPIPE).
  s.shell("deaf", "echo '[\"alpha\"]'");
  r = s.rank("deaf");
  CHECK_FALSE(r.failure);
}

TEST_CASE("a plugin that hangs is killed past its time limit, with everything it started") {
  site s;
  const fs::path pids = s.dir.path() / "pids";
  s.shell("hangs", "sleep 1000 & echo $! > " + pids.string() + "; sleep 1000");
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = s.rank("hangs");
  REQUIRE(r.failure);
  CHECK(*r.failure == "timed out after 1500 ms (killed)");
  // A bound, not a timing: it came back, well before the sleeps would end.
  CHECK(std::chrono::steady_clock::now() - t0 < 100s);
  const pid_t child = static_cast<pid_t>(std::stol(slurp(pids)));
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    std::getline(stat, line);
    gone = line.empty() || line.find(") Z ") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(50ms);
  }
  CHECK_MESSAGE(gone, "the plugin's child " << child << " outlived it");
}

TEST_CASE("a plugin runs with a clean environment, in /, with nothing but the request on stdin") {
  ::setenv("AQS_PLUGIN_TEST_SECRET", "s3cret", 1);
  site s;
  s.shell("env-check",
          "[ -z \"$AQS_PLUGIN_TEST_SECRET\" ] || exit 3\n"
          "[ \"$(pwd)\" = / ] || exit 4\n"
          "[ \"$AQS_BROKER_PLUGIN\" = env-check ] || exit 5\n"
          "[ -e /proc/self/fd/3 ] && exit 6\n"
          "cat >/dev/null; echo '[\"beta\"]'");
  const auto r = s.rank("env-check");
  ::unsetenv("AQS_PLUGIN_TEST_SECRET");
  REQUIRE_MESSAGE(!r.failure, *r.failure);
  CHECK(r.ranked.front() == "beta");
}

TEST_CASE("the C example library ranks through faucetsd's plugin host; a library without the ABI is refused") {
  site s;
  fs::copy_file(EXAMPLE_SO, s.dir.path() / "last-name-c.so");
  ::chmod((s.dir.path() / "last-name-c.so").c_str(), 0755);
  CHECK_NOTHROW(plugin_host(s.options()).check("last-name-c"));
  const auto r = s.rank("last-name-c");
  REQUIRE_MESSAGE(!r.failure, *r.failure);
  CHECK(r.ranked == std::vector<std::string>{"gamma", "beta", "alpha"});
  // Any other library: no aqs_broker_rank.
  const char* libm = "/lib/x86_64-linux-gnu/libm.so.6";
  if (fs::exists(libm)) {
    fs::copy_file(libm, s.dir.path() / "libm.so");
    ::chmod((s.dir.path() / "libm.so").c_str(), 0755);
    const std::string why = thrown_by([&] { plugin_host(s.options()).check("libm"); });
    CHECK(why.find("does not export aqs_broker_plugin_abi") != std::string::npos);
    CHECK(why.find('\n') == std::string::npos);
    CHECK(s.rank("libm").failure);
  }
}
