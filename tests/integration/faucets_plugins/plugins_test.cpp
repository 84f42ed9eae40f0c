// faucetsd's broker plugins end to end: one real faucetsd whose plugin
// directory holds the Python and C examples (lexically last cluster first)
// and plugins that hang, exit 1 or print garbage; three real AQS clusters
// (each its own aqsd and agents) joined over TLS; jobs submitted with the
// real fsub. And faucetsd --daemon with its pid file.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <set>
#include <thread>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "e2e.hpp"
#include "faucets_site.hpp"
#include "faucets_client/faucets_api.hpp"
#include "protocol/auth.hpp"
#include "temp_dir.hpp"

using aqs::test::cluster;
using aqs::test::run;
using aqs::test::run_result;
using nlohmann::json;

namespace {

// The files of one faucetsd (certificate, cluster keys, tables, plugins).
class plugin_site : public aqs::test::faucets_site {
public:
  explicit plugin_site(const std::vector<std::string>& clusters) : faucets_site(clusters, "aqs-plugins-site") {
    const fs::path p = plugins();
    fs::create_directories(p);
    ::chmod(p.c_str(), 0755);
    fs::copy_file(fs::path(EXAMPLES_DIR) / "last-name", p / "last-name");
    fs::copy_file(EXAMPLE_SO, p / "last-name-c.so");
    write_file(p / "sleeps", "#!/bin/sh\nsleep 987654\n", 0755);
    write_file(p / "fails", "#!/bin/sh\necho 'no luck today' >&2\nexit 1\n", 0755);
    write_file(p / "babbles", "#!/bin/sh\necho '[\"nowhere\"]'\n", 0755);
    for (const char* f : {"last-name", "last-name-c.so"}) ::chmod((p / f).c_str(), 0755);
  }
  fs::path plugins() const { return dir() / "plugins"; }

  // faucetsd's flags but the policy's.
  std::vector<std::string> base_args() const {
    std::vector<std::string> a = faucets_site::base_args();
    a.insert(a.end(), {"--plugin-dir", plugins().string(), "--cluster-timeout", "5"});
    return a;
  }
  // Starts faucetsd with `more` flags and waits until it serves.
  void start(const std::vector<std::string>& more) {
    std::vector<std::string> a{"--plugin-dir", plugins().string(), "--cluster-timeout", "5"};
    a.insert(a.end(), more.begin(), more.end());
    faucets_site::start(a);
  }
  std::vector<std::string> join_args(const std::string& name, double speed) const {
    std::vector<std::string> a = faucets_site::join_args(name);
    a.insert(a.end(), {"--faucets-speed", std::to_string(speed)});
    return a;
  }
  std::string token_for(const aqs::test::test_user& u) const { return faucets_site::token_for(&u); }
  void wait_up(const std::string& token, const std::set<std::string>& names) {
    auto c = client(token);
    const bool up = eventually(
        [&] {
          std::set<std::string> seen;
          for (const auto& x : c.clusters()) {
            if (x["state"] == "UP" && x.contains("report") && x["report"]["nodes_up"].get<int>() > 0) {
              seen.insert(x["name"].get<std::string>());
            }
          }
          return std::includes(seen.begin(), seen.end(), names.begin(), names.end());
        },
        90s);
    REQUIRE_MESSAGE(up, "clusters not up at the server; its log:\n" << log());
  }
  run_result fsub(const std::string& token, const aqs::test::test_user& u, std::vector<std::string> args) const {
    std::vector<std::string> argv{aqs::test::bin().fsub, "--faucets", url(), "--faucets-ca", ca().string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, {{"AQS_TOKEN", token}}, u.uid, u.gid, u.home.string());
  }
};

cluster::options shape(int nodes, int procs, std::vector<std::string> aqsd_args) {
  cluster::options o;
  o.nodes = nodes;
  o.procs_per_node = procs;
  o.aqsd_args = std::move(aqsd_args);
  return o;
}

std::int64_t submitted_id(const run_result& r) {
  REQUIRE_MESSAGE(r.status == 0, r.err);
  return std::stoll(r.out.substr(std::string("Submitted job ").size()));
}

// Waits until job `id` has ended; its server-side record.
json wait_done(aqs::client::faucets::client& c, std::int64_t id) {
  json j;
  const bool done = eventually(
      [&] {
        j = c.job(id);
        const std::string st = j.value("state", "");
        return st == "COMPLETED" || st == "FAILED" || st == "CANCELLED" || st == "TIMEOUT" || st == "NODE_FAIL";
      },
      120s);
  REQUIRE_MESSAGE(done, "job " << id << " did not end: " << j.dump() << "\nhistory: " << c.history(id).dump());
  return j;
}

std::string history_text(aqs::client::faucets::client& c, std::int64_t id) {
  std::string out;
  for (const auto& e : c.history(id)) out += e["event"].get<std::string>() + ": " + e["detail"].get<std::string>() + "\n";
  return out;
}

}  // namespace

TEST_CASE("broker plugins choose clusters as written; one that hangs, exits 1 or names no candidate does not stop placement") {
  plugin_site site({"alpha", "beta", "gamma"});
  // earliest-start for jobs that name no plugin; the plugins a job may name.
  site.start({"--policy", "earliest-start", "--plugin-timeout", "2", "--allow-job-plugins",
              "last-name,last-name-c,sleeps,fails,babbles"});
  // alpha is the biggest and fastest: earliest-start's choice for a small
  // job on idle clusters; gamma, lexically last, is the smallest and slowest.
  cluster alpha(shape(2, 4, site.join_args("alpha", 4.0)));
  cluster beta(shape(1, 2, site.join_args("beta", 1.0)));
  cluster gamma(shape(1, 2, site.join_args("gamma", 0.25)));
  alpha.wait_nodes_up(2);
  beta.wait_nodes_up(1);
  gamma.wait_nodes_up(1);
  const auto u = alpha.user("aqs-plugins-a");
  const std::string token = site.token_for(u);
  site.wait_up(token, {"alpha", "beta", "gamma"});
  auto c = site.client(token);

  auto submit = [&](const std::string& name, const std::optional<std::string>& broker) {
    std::vector<std::string> args{"-M", "auto", "-n", "1", "-t", "5", "-J", name, "--wrap", "true"};
    if (broker) args.insert(args.begin() + 2, {"--broker", *broker});
    const run_result r = site.fsub(token, u, args);
    REQUIRE_MESSAGE(r.status == 0, r.err << "\nfaucetsd's log:\n" << site.log());
    return submitted_id(r);
  };
  // The default policy, then each plugin, each twice.
  std::map<std::string, std::vector<std::int64_t>> ids;
  for (int round = 0; round < 2; ++round) {
    ids["default"].push_back(submit("default", std::nullopt));
    for (const char* p : {"last-name", "last-name-c", "sleeps", "fails", "babbles"}) ids[p].push_back(submit(p, p));
  }
  for (const auto& [broker, list] : ids) {
    for (const std::int64_t id : list) {
      const json j = wait_done(c, id);
      const std::string hist = history_text(c, id);
      CAPTURE(broker);
      CAPTURE(hist);
      CHECK(j["state"] == "COMPLETED");
      if (broker == "last-name" || broker == "last-name-c") {
        CHECK(j["cluster"] == "gamma");  // as written: lexically last, whatever its speed
        CHECK(hist.find("by plugin:" + broker) != std::string::npos);
      } else {
        CHECK(j["cluster"] == "alpha");  // earliest-start decided
        CHECK(hist.find("by earliest-start") != std::string::npos);
      }
    }
  }
  // Each failure is logged with its reason, in the job's history and the server's log.
  const std::string sleeps = history_text(c, ids["sleeps"][0]);
  CHECK(sleeps.find("plugin sleeps ignored: timed out after 2 s (killed); earliest-start decides") != std::string::npos);
  const std::string fails = history_text(c, ids["fails"][0]);
  CHECK(fails.find("plugin fails ignored: exited with status 1: no luck today") != std::string::npos);
  const std::string babbles = history_text(c, ids["babbles"][0]);
  CHECK(babbles.find("'nowhere', which is not a candidate") != std::string::npos);
  CHECK(site.log().find("broker plugin sleeps ignored") != std::string::npos);
  // No plugin outlives its decision.
  const run_result left = run({"/usr/bin/pgrep", "-f", "sleep 987654"});
  CHECK_MESSAGE(left.out.empty(), "left behind: " << left.out);

  // A plugin the admin did not allow per job, or a path, is refused at submission: nothing queued.
  const auto before = c.list_jobs(true).size();
  run_result r = site.fsub(token, u, {"-M", "auto", "--broker", "secret", "--wrap", "true"});
  CHECK(r.status != 0);
  CHECK(r.err.find("broker plugin 'secret' is not one this server lets a job choose (allowed: babbles, fails, last-name, last-name-c, sleeps)") != std::string::npos);
  r = site.fsub(token, u, {"-M", "auto", "--broker", "../../bin/sh", "--wrap", "true"});
  CHECK(r.status != 0);
  // Past fsub's own check, straight to the API: the server refuses a path too.
  try {
    c.submit("auto", json{{"name", "x"}}, std::string("../plugins/last-name"));
    FAIL("a path was taken as a plugin's name");
  } catch (const std::exception& e) {
    CHECK(std::string(e.what()).find("no '/' or '..'") != std::string::npos);
  }
  CHECK(c.list_jobs(true).size() == before);
}

TEST_CASE("faucetsd --policy plugin:NAME: every job goes where the plugin says; an unknown plugin is one line naming the directory") {
  plugin_site site({"one", "two"});
  // Unknown at startup: one line, nothing started.
  std::vector<std::string> argv = site.base_args();
  argv.insert(argv.end(), {"--policy", "plugin:nope"});
  run_result r = run(argv);
  CHECK(r.status == 2);
  CHECK(r.err == "faucetsd: unknown broker plugin 'nope' (looked for nope.so and nope in " + site.plugins().string() + ")\n");
  argv = site.base_args();
  argv.insert(argv.end(), {"--allow-job-plugins", "last-name,../x"});
  r = run(argv);
  CHECK(r.status == 2);
  CHECK(r.err.find("no '/' or '..'") != std::string::npos);
  CHECK_FALSE(fs::exists(site.state() / "faucetsd.pid"));

  site.start({"--policy", "plugin:last-name"});
  cluster one(shape(2, 4, site.join_args("one", 4.0)));
  cluster two(shape(1, 2, site.join_args("two", 0.25)));
  one.wait_nodes_up(2);
  two.wait_nodes_up(1);
  const auto u = one.user("aqs-plugins-b");
  const std::string token = site.token_for(u);
  site.wait_up(token, {"one", "two"});
  auto c = site.client(token);
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(submitted_id(site.fsub(token, u, {"-M", "auto", "-n", "1", "-t", "5", "--wrap", "true"})));
  for (const auto id : ids) {
    const json j = wait_done(c, id);
    CHECK(j["state"] == "COMPLETED");
    CHECK_MESSAGE(j["cluster"] == "two", history_text(c, id));
  }
  // Per-job plugins are off unless the admin allows them.
  r = site.fsub(token, u, {"-M", "auto", "--broker", "last-name", "--wrap", "true"});
  CHECK(r.status != 0);
  CHECK(r.err.find("lets no job choose its broker") != std::string::npos);
}

TEST_CASE("faucetsd --daemon: detaches once serving, keeps its pid file, refuses a second copy, removes the file at exit") {
  plugin_site site({"one"});
  const fs::path pid_file = site.state() / "run" / "faucetsd.pid";
  fs::create_directories(pid_file.parent_path());
  std::vector<std::string> argv = site.base_args();
  argv.insert(argv.end(), {"--daemon", "--pid-file", pid_file.string()});
  run_result r = run(argv);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  // Serving when the command returned: its addresses and pid are written.
  REQUIRE(fs::exists(pid_file));
  CHECK(fs::exists(site.state() / "faucetsd.http"));
  const pid_t pid = static_cast<pid_t>(std::stol(slurp(pid_file)));
  REQUIRE(pid > 1);
  CHECK(::kill(pid, 0) == 0);
  CHECK(::getsid(pid) != ::getsid(0));  // its own session, off our terminal
  CHECK(slurp(fs::path("/proc") / std::to_string(pid) / "comm") == "faucetsd\n");
  CHECK(fs::exists(site.state() / "faucetsd.log"));
  // A second one on the same pid file: one line, the first keeps running.
  r = run(argv);
  CHECK(r.status != 0);
  CHECK(r.err == "faucetsd: faucetsd is already running as pid " + std::to_string(pid) + " (" + pid_file.string() + ")\n");
  CHECK(::kill(pid, 0) == 0);
  // SIGTERM: it stops and takes its pid file with it.
  ::kill(pid, SIGTERM);
  CHECK(eventually([&] { return ::kill(pid, 0) != 0; }, 60s));
  CHECK_FALSE(fs::exists(pid_file));
  // A stale file (a pid that is no faucetsd) does not stop a start.
  write_file(pid_file, "1\n");
  r = run(argv);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const pid_t again = static_cast<pid_t>(std::stol(slurp(pid_file)));
  CHECK(again != 1);
  ::kill(again, SIGTERM);
  CHECK(eventually([&] { return ::kill(again, 0) != 0; }, 60s));
  // A start that fails after detaching still says why, on the terminal.
  argv = site.base_args();
  argv.insert(argv.end(), {"--daemon", "--pid-file", pid_file.string(), "--db", "postgresql:///none?host=/nonexistent"});
  r = run(argv);
  CHECK(r.status == 1);
  CHECK(r.err.rfind("faucetsd: ", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}
