// bench_faucets: what the Faucets end-to-end benchmarks (bench_faucets_server,
// bench_faucets_contract) share: a site (a temporary directory, a throwaway
// submitting user, the server's TLS certificate, a key per cluster and the
// tables faucetsd and the clusters read), a faucetsd per broker policy with
// the user's API client, and the submission and polling loops around it.
// Needs root (the user is made with useradd, and submits as itself).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_probe.hpp"
#include "bench_system.hpp"
#include "faucets_client/faucets_api.hpp"

namespace aqs::bench::faucets {

// Wall-clock seconds since the epoch (what the API's times compare with).
double now_s();
// Sleeps until now_s() reaches `due`; throws when interrupted (stop_on_signals).
void sleep_until(double due);

class site {
public:
  // A directory $TMPDIR/<prefix>.XXXXXX holding: work/ (owned by `user`,
  // the jobs' directory), server.crt and server.key (openssl, for
  // 127.0.0.1), <cluster>.key for each name in `clusters`, the tables
  // `clusters` (name and key file), `users` ("* * *": anyone),
  // `cluster-users` ("* *") and, when `owners` is not empty, `owners` with
  // that text. `user` is made (useradd --system) when missing and removed
  // again on destruction only then. Throws std::runtime_error.
  site(const std::string& prefix, const std::string& user, const std::vector<std::string>& clusters,
       const std::string& owners = "");
  ~site();  // removes the directory, unless AQS_BENCH_KEEP is set (then says where it is)
  site(const site&) = delete;
  site& operator=(const site&) = delete;

  const std::filesystem::path& top() const noexcept { return top_; }
  std::filesystem::path work() const { return top_ / "work"; }
  std::filesystem::path cert() const { return top_ / "server.crt"; }
  uid_t uid() const noexcept { return user_.uid; }
  gid_t gid() const noexcept { return user_.gid; }
  bool has_owners() const noexcept { return owners_; }

private:
  std::filesystem::path top_;
  bench_user user_;
  bool owners_ = false;
};

// A fresh faucetsd for one broker policy: state in <top>/faucetsd-<policy>
// (log beside it), the site's certificate and tables (and owners), cluster
// timeout 60 s, seed 7, listeners on ephemeral ports of 127.0.0.1.
class broker {
public:
  broker(const site& s, const std::string& faucetsd_binary, const std::string& policy);
  broker(const broker&) = delete;
  broker& operator=(const broker&) = delete;

  // The aqsd options that join a cluster `name` (one of the site's) to it.
  std::vector<std::string> join_args(const std::string& name) const;
  // A cluster `name` joined to it: aqsd (join_args, then `aqsd_args`) and
  // one agent of `procs` processors named <node_prefix>0.
  std::unique_ptr<system> start_cluster(const std::string& aqsd_binary, const std::string& node_binary,
                                        const std::string& name, int procs,
                                        const std::vector<std::string>& aqsd_args = {},
                                        const std::string& node_prefix = "node") const;
  // The site's user's token from faucetsd's socket (ftoken, run as the
  // user) and an API client holding it.
  aqs::client::faucets::client user_client(const std::string& ftoken_binary) const;
  void stop() { faucetsd_->stop(); }

private:
  const site& site_;
  std::filesystem::path state_;
  std::unique_ptr<child> faucetsd_;
  std::string addr_, url_;
};

// The command line both benchmarks take: [--quick] [--policy NAME]...
// (no --policy: `default_policies`). Returns 0, or 2 after saying on stderr
// why not (a usage line, or that it needs root).
struct options {
  bool quick = false;
  std::vector<std::string> policies;
};
int parse_options(int argc, char** argv, const std::string& program, const std::vector<std::string>& default_policies,
                  options& out);

// Polls until `count` clusters are UP at the server and `ready` (when
// given) holds for each of them; throws after `limit` with the listing.
void wait_clusters_up(aqs::client::faucets::client& api, std::size_t count, std::chrono::seconds limit,
                      const std::function<bool(const nlohmann::json&)>& ready = {});

// Polls GET /api/v1/jobs?all=1 until every job of `ids` has ended (a final
// state with an end time, or FAILED without one: never placed) and returns
// that listing; throws after `limit`.
nlohmann::json wait_ended(aqs::client::faucets::client& api, const std::set<std::int64_t>& ids,
                          std::chrono::seconds limit);

}  // namespace aqs::bench::faucets
