#include "bench_faucets.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace fs = std::filesystem;
namespace fc = aqs::client::faucets;
using namespace std::chrono_literals;
using nlohmann::json;

namespace aqs::bench::faucets {

namespace {

std::string hex_key() {
  std::random_device rd;
  static const char* digits = "0123456789abcdef";
  std::string k;
  for (int i = 0; i < 64; ++i) k += digits[rd() % 16];
  return k;
}

const fs::perms k_traversable = fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec;

}  // namespace

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void sleep_until(double due) {
  while (now_s() < due) {
    throw_if_interrupted();
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(0.05, due - now_s())));
  }
}

site::site(const std::string& prefix, const std::string& user, const std::vector<std::string>& clusters,
           const std::string& owners) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + ".XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl + " failed");
  top_ = tmpl;
  try {
    fs::permissions(top_, k_traversable);
    user_ = make_user(user);
    fs::create_directories(work());
    if (::chown(work().c_str(), user_.uid, user_.gid) != 0) {
      throw std::runtime_error("chown " + work().string() + " failed");
    }
    const std::string openssl = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 "
                                "-addext subjectAltName=IP:127.0.0.1 -keyout " +
                                (top_ / "server.key").string() + " -out " + cert().string() + " >/dev/null 2>&1";
    if (std::system(openssl.c_str()) != 0) throw std::runtime_error("openssl req failed");
    fs::permissions(cert(), fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                fs::perms::others_read);
    std::string table;
    for (const auto& c : clusters) {
      write_text(top_ / (c + ".key"), hex_key() + "\n");
      table += c + " " + (top_ / (c + ".key")).string() + "\n";
    }
    write_text(top_ / "clusters", table);
    write_text(top_ / "users", "* * *\n");
    write_text(top_ / "cluster-users", "* *\n");
    if (!owners.empty()) {
      write_text(top_ / "owners", owners);
      owners_ = true;
    }
  } catch (...) {
    remove_user(user_);
    std::error_code ec;
    fs::remove_all(top_, ec);
    throw;
  }
}

site::~site() {
  remove_user(user_);
  if (std::getenv("AQS_BENCH_KEEP") != nullptr) {
    std::fprintf(stderr, "AQS_BENCH_KEEP: kept %s\n", top_.c_str());
    return;
  }
  std::error_code ec;
  fs::remove_all(top_, ec);
}

broker::broker(const site& s, const std::string& faucetsd_binary, const std::string& policy)
    : site_(s), state_(s.top() / ("faucetsd-" + policy)) {
  fs::create_directories(state_);
  fs::permissions(state_, k_traversable);
  const fs::path log = s.top() / ("faucetsd-" + policy + ".log");
  std::vector<std::string> argv = {faucetsd_binary,
                                   "--state-dir", state_.string(),
                                   "--listen", "127.0.0.1:0",
                                   "--http", "127.0.0.1:0",
                                   "--cert", s.cert().string(),
                                   "--key", (s.top() / "server.key").string(),
                                   "--clusters", (s.top() / "clusters").string(),
                                   "--users", (s.top() / "users").string()};
  if (s.has_owners()) argv.insert(argv.end(), {"--owners", (s.top() / "owners").string()});
  argv.insert(argv.end(), {"--policy", policy, "--cluster-timeout", "60", "--seed", "7"});
  faucetsd_ = std::make_unique<child>(argv, log);
  addr_ = wait_file(state_ / "faucetsd.addr", 120s, log);
  url_ = wait_file(state_ / "faucetsd.http", 10s, log);
}

std::vector<std::string> broker::join_args(const std::string& name) const {
  return {"--faucets-server", addr_,
          "--faucets-name", name,
          "--faucets-ca", site_.cert().string(),
          "--faucets-key", (site_.top() / (name + ".key")).string(),
          "--faucets-users", (site_.top() / "cluster-users").string()};
}

std::unique_ptr<system> broker::start_cluster(const std::string& aqsd_binary, const std::string& node_binary,
                                              const std::string& name, int procs,
                                              const std::vector<std::string>& aqsd_args,
                                              const std::string& node_prefix) const {
  system::options o;
  o.aqsd = aqsd_binary;
  o.aqs_node = node_binary;
  o.nodes = 1;
  o.procs_per_node = procs;
  o.node_prefix = node_prefix;
  o.aqsd_args = join_args(name);
  o.aqsd_args.insert(o.aqsd_args.end(), aqsd_args.begin(), aqsd_args.end());
  return std::make_unique<system>(o);
}

fc::client broker::user_client(const std::string& ftoken_binary) const {
  const std::string out =
      run_as(site_.uid(), site_.gid(), {ftoken_binary, "--socket", (state_ / "faucetsd.sock").string()});
  fc::client_options co;
  co.url = fc::parse_base_url(url_);
  co.ca_file = site_.cert().string();
  co.token = last_line(out);
  return fc::client(co);
}

int parse_options(int argc, char** argv, const std::string& program, const std::vector<std::string>& default_policies,
                  options& out) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      out.quick = true;
    } else if (a == "--policy" && i + 1 < argc) {
      out.policies.emplace_back(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--policy NAME]...\n", program.c_str());
      return 2;
    }
  }
  if (out.policies.empty()) out.policies = default_policies;
  if (::geteuid() != 0) {
    std::fprintf(stderr, "%s: needs root (a throwaway user submits through faucetsd)\n", program.c_str());
    return 2;
  }
  return 0;
}

void wait_clusters_up(fc::client& api, std::size_t count, std::chrono::seconds limit,
                      const std::function<bool(const json&)>& ready) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    throw_if_interrupted();
    std::size_t up = 0;
    for (const auto& c : api.clusters()) up += c.value("state", "") == "UP" && (!ready || ready(c));
    if (up == count) return;
    if (std::chrono::steady_clock::now() > until) {
      throw std::runtime_error("clusters not all UP at faucetsd within " + std::to_string(limit.count()) +
                               " s: " + api.clusters().dump());
    }
    std::this_thread::sleep_for(200ms);
  }
}

json wait_ended(fc::client& api, const std::set<std::int64_t>& ids, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    throw_if_interrupted();
    json all = api.list_jobs(true);
    std::size_t ended = 0;
    for (const auto& j : all) {
      if (!ids.count(j.value("id", std::int64_t{0}))) continue;
      const std::string st = j.value("state", "");
      const bool final = st == "COMPLETED" || st == "FAILED" || st == "CANCELLED" || st == "TIMEOUT" ||
                         st == "NODE_FAIL" || st == "OUT_OF_MEMORY";
      ended += final && (st == "FAILED" || (j.contains("end_time") && j["end_time"].is_string()));
    }
    if (ended == ids.size()) return all;
    if (std::chrono::steady_clock::now() > until) {
      throw std::runtime_error("jobs not all ended within " + std::to_string(limit.count()) + " s (" +
                               std::to_string(ended) + " of " + std::to_string(ids.size()) + ")");
    }
    std::this_thread::sleep_for(500ms);
  }
}

}  // namespace aqs::bench::faucets
