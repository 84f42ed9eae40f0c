// Staged files end to end (issue 35): a real faucetsd and a real AQS
// cluster (aqsd with its private PostgreSQL, an agent on a namespace host)
// joined over TLS; users submit with the real fsub -M --stage-in from their
// own directory, the job runs in its own directory on the cluster, and the
// real fjobs -M --fetch brings its outputs back. Bad paths, symlinks and
// sizes are refused with one line and change nothing; another user reads
// and fetches none of it.
#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <random>
#include <set>
#include <thread>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "e2e.hpp"
#include "faucets_client/faucets_api.hpp"
#include "faucets_site.hpp"
#include "protocol/auth.hpp"
#include "protocol/messages.hpp"
#include "temp_dir.hpp"

using aqs::test::cluster;
using aqs::test::run;
using aqs::test::run_result;
using nlohmann::json;
namespace fc = aqs::client::faucets;

namespace {

// The test's faucetsd (tests/support/faucets_site) with a users table of
// its own, and the directory where the cluster keeps jobs' files.
class stage_site {
public:
  stage_site(const std::vector<std::string>& clusters, const std::string& users_table,
             std::vector<std::string> extra = {})
      : site_(clusters, "aqs-stage-site") {
    site_.set_users(users_table);
    fs::create_directories(site_.dir() / "stage-parent");
    ::chmod((site_.dir() / "stage-parent").c_str(), 0755);
    std::vector<std::string> more{"--policy", "earliest-start", "--cluster-timeout", "5"};
    more.insert(more.end(), extra.begin(), extra.end());
    site_.start(more);
  }
  // Where the cluster keeps jobs' directories: under a directory anyone may
  // pass through, so that only the stage directories' own modes stand
  // between another user and a job's files.
  fs::path stage_root() const { return site_.dir() / "stage-parent" / "stage"; }
  std::vector<std::string> join_args(const std::string& name) const {
    std::vector<std::string> args = site_.join_args(name);
    args.insert(args.end(), {"--faucets-stage-dir", stage_root().string()});
    return args;
  }
  std::string token_for(const aqs::test::test_user& u) const { return site_.token_for(&u); }
  fc::client client(const std::string& token) const { return site_.client(token); }
  void wait_up(const std::string& token) const { site_.wait_up(token, 1); }
  std::string log() const { return site_.log(); }
  // fsub / fjobs through this server, as `u`, in `cwd`.
  run_result as(const std::string& binary, const std::string& token, const aqs::test::test_user& u,
                const fs::path& cwd, std::vector<std::string> args) const {
    std::vector<std::string> argv{binary, "--faucets", site_.url(), "--faucets-ca", site_.ca().string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, {{"AQS_TOKEN", token}}, u.uid, u.gid, cwd.string());
  }

private:
  aqs::test::faucets_site site_;
};

cluster::options one_node(std::vector<std::string> aqsd_args) {
  cluster::options o;
  o.nodes = 1;
  o.procs_per_node = 2;
  o.netns = true;
  o.aqsd_args = std::move(aqsd_args);
  return o;
}

// A directory of `u`'s under their home.
fs::path user_dir(const aqs::test::test_user& u, const std::string& name) {
  const fs::path p = u.home / name;
  fs::create_directories(p);
  REQUIRE(::chown(p.c_str(), u.uid, u.gid) == 0);
  return p;
}

void user_file(const aqs::test::test_user& u, const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  {
    std::ofstream out(p, std::ios::binary);
    out << bytes;
  }
  for (fs::path q = p; q != u.home && q.has_parent_path(); q = q.parent_path()) {
    REQUIRE(::chown(q.c_str(), u.uid, u.gid) == 0);
  }
}

std::string random_bytes(std::size_t n) {
  std::mt19937_64 rng(35);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

std::int64_t id_of(const run_result& r) {
  REQUIRE_MESSAGE(r.status == 0, r.err);
  return std::stoll(r.out.substr(std::string("Submitted job ").size()));
}

std::string wait_state(fc::client& c, std::int64_t id, const std::set<std::string>& states,
                       std::chrono::seconds limit = 120s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  std::string s;
  while (std::chrono::steady_clock::now() < until) {
    s = c.job(id).value("state", "");
    if (states.contains(s)) return s;
    std::this_thread::sleep_for(200ms);
  }
  FAIL("job " << id << " stayed " << s);
  return s;
}

// The error text of a refused call (its HTTP status in `status`).
std::string refusal(const std::function<void()>& call, int* status = nullptr) {
  try {
    call();
  } catch (const fc::error& e) {
    if (status) *status = e.http_status();
    return e.what();
  }
  return "";
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

}  // namespace

TEST_CASE("staged inputs reach the job in its own directory on the cluster, and its outputs come back byte-identical") {
  REQUIRE_MESSAGE(aqs::testbed::netns_hosts::available(), "needs root and ip netns");
  stage_site site({"one"}, "aqs-stage-a one *\n");
  cluster one(one_node(site.join_args("one")));
  one.wait_nodes_up(1);
  const auto alice = one.user("aqs-stage-a");
  const std::string ta = site.token_for(alice);
  site.wait_up(ta);
  auto c = site.client(ta);

  const fs::path submit = user_dir(alice, "submit");
  const std::string data = random_bytes(300 * 1024);
  user_file(alice, submit / "in" / "data.bin", data);
  user_file(alice, submit / "in" / "deeper" / "note.txt", "a note\n");
  user_file(alice, submit / "params.txt", "iterations=10\n");
  const std::string job =
      "set -e; test \"$(cat in/deeper/note.txt)\" = 'a note'; cat in/data.bin params.txt > out.bin; "
      "stat -c %U in/data.bin > owner.txt; pwd > where.txt; mkdir res; cp params.txt res/copy.txt";
  const auto id = id_of(site.as(aqs::test::bin().fsub, ta, alice, submit,
                                {"-M", "one", "--stage-in", "in", "--stage-in", "params.txt", "--wrap", job}));
  CHECK(wait_state(c, id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}) == "COMPLETED");

  // Explicit fetch, into the directory fjobs runs in: until the outputs are back.
  const fs::path back = user_dir(alice, "back");
  run_result f;
  const auto until = std::chrono::steady_clock::now() + 60s;
  do {
    f = site.as(aqs::test::bin().fjobs, ta, alice, back, {"-M", "one", "--fetch", std::to_string(id)});
    if (f.status == 0) break;
    CHECK_MESSAGE(f.err.find("not back yet") != std::string::npos, f.err);
    std::this_thread::sleep_for(300ms);
  } while (std::chrono::steady_clock::now() < until);
  REQUIRE_MESSAGE(f.status == 0, f.err << site.log());
  CHECK(slurp(back / "out.bin") == data + "iterations=10\n");
  CHECK(slurp(back / "in" / "data.bin") == data);
  CHECK(slurp(back / "res" / "copy.txt") == "iterations=10\n");
  // It ran in its own directory there, and its files were the user's.
  CHECK(slurp(back / "owner.txt") == "aqs-stage-a\n");
  CHECK(slurp(back / "where.txt") == (site.stage_root() / ("f" + std::to_string(id) + ".1")).string() + "\n");
  struct stat st {};
  REQUIRE(::stat((back / "out.bin").c_str(), &st) == 0);
  CHECK(st.st_uid == alice.uid);
  // The job's directory on the cluster is gone once its outputs are back.
  CHECK_FALSE(fs::exists(site.stage_root() / ("f" + std::to_string(id) + ".1")));
  const json h = c.history(id);
  bool outputs_event = false;
  for (const auto& e : h) outputs_event = outputs_event || e["event"] == "outputs";
  CHECK_MESSAGE(outputs_event, h.dump());

  // Fetching again into a directory where a name is a symlink: refused,
  // nothing written, the symlink's target untouched.
  const fs::path again = user_dir(alice, "again");
  const fs::path target = user_dir(alice, "elsewhere") / "victim";
  user_file(alice, target, "keep me");
  fs::create_symlink(target, again / "out.bin");
  const run_result g = site.as(aqs::test::bin().fjobs, ta, alice, again, {"-M", "one", "--fetch", std::to_string(id)});
  CHECK(g.status == 1);
  CHECK_MESSAGE(g.err.find("is a symlink") != std::string::npos, g.err);
  CHECK(one_line(g.err));
  CHECK(slurp(target) == "keep me");
  CHECK_FALSE(fs::exists(again / "owner.txt"));
}

TEST_CASE("a staged path with '..', an absolute one, a symlink out or too many bytes is refused in one line, nothing changes") {
  REQUIRE_MESSAGE(aqs::testbed::netns_hosts::available(), "needs root and ip netns");
  stage_site site({"one"}, "aqs-stage-a one *\n", {"--stage-max-bytes", "1000"});
  cluster one(one_node(site.join_args("one")));
  one.wait_nodes_up(1);
  const auto alice = one.user("aqs-stage-a");
  const std::string ta = site.token_for(alice);
  site.wait_up(ta);
  auto c = site.client(ta);
  const fs::path submit = user_dir(alice, "submit2");
  user_file(alice, alice.home / "outside.txt", "not in the submit directory");
  user_file(alice, submit / "big.bin", std::string(2000, 'x'));
  fs::create_symlink("/etc", submit / "etc-link");
  fs::create_symlink("../outside.txt", submit / "sneaky");
  auto fsub = [&](std::vector<std::string> args) {
    std::vector<std::string> a{"-M", "one"};
    a.insert(a.end(), args.begin(), args.end());
    a.insert(a.end(), {"--wrap", "true"});
    return site.as(aqs::test::bin().fsub, ta, alice, submit, a);
  };
  const struct {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"--stage-in", "../outside.txt"}, "contains '..'"},
      {{"--stage-in", "/etc/passwd"}, "is absolute"},
      {{"--stage-in", "etc-link/passwd"}, "leads out of the submit directory"},
      {{"--stage-in", "sneaky"}, "leads out of the submit directory"},
      {{"--stage-in", "big.bin"}, "over the limit of 1000 bytes"},
  };
  for (const auto& k : cases) {
    CAPTURE(k.args[1]);
    const run_result r = fsub(k.args);
    CHECK(r.status == 1);
    CHECK_MESSAGE(r.err.find(k.says) != std::string::npos, r.err);
    CHECK_MESSAGE(one_line(r.err), r.err);
  }
  // faucetsd does not trust the client: the same paths sent straight to the API.
  int status = 0;
  const json bad = json::array({json{{"path", "x/../../../etc/cron.d/evil"}, {"mode", 420}, {"data", "eA=="}}});
  aqs::protocol::job_spec spec;
  spec.name = "x";
  spec.argv = {"true"};
  spec.workdir = "/tmp";
  const json job = aqs::protocol::to_json(aqs::protocol::message{aqs::protocol::submit{1, spec}}).at("job");
  const std::string why = refusal([&] { c.submit("one", job, std::nullopt, nullptr, bad); }, &status);
  CHECK(status == 400);
  CHECK_MESSAGE(why.find("contains '..'") != std::string::npos, why);
  CHECK(c.list_jobs(true).empty());
  CHECK(one.jobs(true).empty());
  if (fs::exists(site.stage_root())) CHECK(fs::is_empty(site.stage_root()));
}

TEST_CASE("another local user can neither read a job's staged files on the cluster nor fetch its outputs") {
  REQUIRE_MESSAGE(aqs::testbed::netns_hosts::available(), "needs root and ip netns");
  stage_site site({"one"}, "aqs-stage-a one *\naqs-stage-b one *\n");
  cluster one(one_node(site.join_args("one")));
  one.wait_nodes_up(1);
  const auto alice = one.user("aqs-stage-a");
  const auto bob = one.user("aqs-stage-b");
  const std::string ta = site.token_for(alice), tb = site.token_for(bob);
  site.wait_up(ta);
  auto c = site.client(ta);
  const fs::path submit = user_dir(alice, "submit3");
  user_file(alice, submit / "secret.txt", "alice's secret\n");
  const auto id = id_of(site.as(aqs::test::bin().fsub, ta, alice, submit,
                                {"-M", "one", "--stage-in", "secret.txt", "--wrap", "cp secret.txt result.txt; sleep 6"}));
  REQUIRE(wait_state(c, id, {"RUNNING"}) == "RUNNING");
  const fs::path dir = site.stage_root() / ("f" + std::to_string(id) + ".1");
  REQUIRE(fs::exists(dir / "secret.txt"));
  // On the cluster: bob reads nothing of it, and cannot list whose jobs have files.
  const run_result cat = run({"/bin/cat", (dir / "secret.txt").string()}, {}, bob.uid, bob.gid);
  CHECK(cat.status != 0);
  CHECK(cat.out.find("secret") == std::string::npos);
  const run_result ls = run({"/bin/ls", site.stage_root().string()}, {}, bob.uid, bob.gid);
  CHECK(ls.status != 0);
  CHECK(ls.out.find("f" + std::to_string(id)) == std::string::npos);
  REQUIRE(wait_state(c, id, {"COMPLETED"}) == "COMPLETED");
  // Through the server: bob's token sees no such job; his fetch gets nothing.
  int status = 0;
  auto cb = site.client(tb);
  CHECK(refusal([&] { cb.outputs(id); }, &status).find("no job") != std::string::npos);
  CHECK(status == 404);
  const fs::path bobs = user_dir(bob, "loot");
  const run_result f = site.as(aqs::test::bin().fjobs, tb, bob, bobs, {"-M", "one", "--fetch", std::to_string(id)});
  CHECK(f.status == 1);
  CHECK(fs::is_empty(bobs));
  // Alice's own fetch works.
  const fs::path mine = user_dir(alice, "mine");
  const auto until = std::chrono::steady_clock::now() + 60s;
  run_result g;
  do {
    g = site.as(aqs::test::bin().fjobs, ta, alice, mine, {"-M", "one", "--fetch", std::to_string(id)});
    if (g.status == 0) break;
    std::this_thread::sleep_for(300ms);
  } while (std::chrono::steady_clock::now() < until);
  REQUIRE_MESSAGE(g.status == 0, g.err);
  CHECK(slurp(mine / "result.txt") == "alice's secret\n");
}
