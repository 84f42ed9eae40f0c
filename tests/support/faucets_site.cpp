// faucets_site: the files, the process and the clients of a test's faucetsd.
#include "faucets_site.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <doctest/doctest.h>

#include "file_text.hpp"
#include "protocol/auth.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace aqs::test {

namespace {

std::string first_line(const fs::path& p) {
  std::string s = slurp(p);
  return s.substr(0, s.find('\n'));
}

}  // namespace

faucets_site::faucets_site(const std::vector<std::string>& clusters, const std::string& prefix) : dir_(prefix, 0755) {
  const fs::path d = dir();
  const run_result cert = run({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                               "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                               (d / "server.key").string(), "-out", ca().string()});
  REQUIRE_MESSAGE(cert.status == 0, cert.err);
  ::chmod(ca().c_str(), 0644);
  std::string table;
  for (const auto& name : clusters) {
    write_file(d / (name + ".key"), protocol::random_hex(32) + "\n", 0600);
    table += name + " " + name + ".key\n";
  }
  write_file(d / "clusters", table);
  write_file(d / "users", "* * *\n");
  fs::create_directories(state());
  ::chmod(state().c_str(), 0755);
}

faucets_site::~faucets_site() {
  if (pid_ > 0) stop_process(pid_, 20s);
}

std::vector<std::string> faucets_site::base_args() const {
  const fs::path d = dir();
  return {AQS_SITE_FAUCETSD, "--state-dir", state().string(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
          "--cert", ca().string(), "--key", (d / "server.key").string(), "--clusters", (d / "clusters").string(),
          "--users", (d / "users").string()};
}

void faucets_site::start(const std::vector<std::string>& more) {
  const fs::path d = dir();
  std::vector<std::string> argv = base_args();
  argv.insert(argv.end(), more.begin(), more.end());
  const int fd = ::open((d / "faucetsd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_ = spawn(argv, {}, std::nullopt, std::nullopt, "", fd, fd);
  ::close(fd);
  const auto until = std::chrono::steady_clock::now() + 120s;
  while (!(fs::exists(state() / "faucetsd.http") && fs::exists(state() / "faucetsd.addr"))) {
    REQUIRE_MESSAGE(alive(pid_), "faucetsd exited at start: " << log());
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < until, "faucetsd did not come up in 120 s: " << log());
    std::this_thread::sleep_for(50ms);
  }
  addr_ = first_line(state() / "faucetsd.addr");
  url_ = first_line(state() / "faucetsd.http");
}

void faucets_site::set_users(const std::string& table) const { write_file(dir() / "users", table); }

std::vector<std::string> faucets_site::join_args(const std::string& name, const std::string& cluster_users) const {
  write_file(dir() / (name + ".users"), cluster_users);
  return {"--faucets-server", addr_, "--faucets-name", name, "--faucets-ca", ca().string(), "--faucets-key",
          (dir() / (name + ".key")).string(), "--faucets-users", (dir() / (name + ".users")).string()};
}

std::string faucets_site::token_for(const test_user* u) const {
  const run_result r = run({AQS_SITE_FTOKEN, "--socket", (state() / "faucetsd.sock").string()}, {},
                           u ? std::optional<uid_t>(u->uid) : std::nullopt,
                           u ? std::optional<gid_t>(u->gid) : std::nullopt);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const std::string out = r.out.substr(0, r.out.find_last_not_of('\n') + 1);
  return out.substr(out.rfind('\n') + 1);
}

client::faucets::client faucets_site::client(const std::string& token) const {
  client::faucets::client_options o;
  o.url = client::faucets::parse_base_url(url_);
  if (url_.starts_with("https:")) o.ca_file = ca().string();
  o.token = token;
  return client::faucets::client(o);
}

void faucets_site::wait_up(const std::string& token, std::size_t n) const {
  auto c = client(token);
  const auto until = std::chrono::steady_clock::now() + 90s;
  while (std::chrono::steady_clock::now() < until) {
    std::size_t up = 0;
    for (const auto& x : c.clusters()) {
      up += x["state"] == "UP" && x.contains("report") && x["report"]["nodes_up"].get<int>() > 0;
    }
    if (up == n) return;
    std::this_thread::sleep_for(200ms);
  }
  FAIL("clusters not up at the server; its log:\n" << log());
}

std::string faucets_site::log() const { return slurp(dir() / "faucetsd.log"); }

}  // namespace aqs::test
