// faucets_site: one real faucetsd for an integration test, in a directory of
// its own: a self-signed certificate for 127.0.0.1, a key per cluster and
// the cluster table, a users table letting everyone in ("* * *"). What the
// tests of the Faucets server share; each adds its own flags to start().
// Test code only (doctest's REQUIRE on failure).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "aqs_cluster.hpp"
#include "faucets_client/faucets_api.hpp"
#include "temp_dir.hpp"

namespace aqs::test {

class faucets_site {
public:
  // Writes the files for `clusters` (started by start()). `prefix` names the
  // directory (a test's own, so a failure's leftovers say whose).
  faucets_site(const std::vector<std::string>& clusters, const std::string& prefix);
  ~faucets_site();
  faucets_site(const faucets_site&) = delete;
  faucets_site& operator=(const faucets_site&) = delete;

  // Starts faucetsd (TCP for clusters and HTTPS for users on loopback, any
  // port) with `more` flags (a policy, --owners, --http-plain ...) and waits
  // until it serves.
  void start(const std::vector<std::string>& more = {});
  // Replaces the users table ("* * *": everyone, every cluster) before start().
  void set_users(const std::string& table) const;
  // faucetsd's command line as start() begins it (to run it otherwise).
  std::vector<std::string> base_args() const;

  const std::filesystem::path& dir() const { return dir_.path(); }
  std::filesystem::path state() const { return dir() / "state"; }
  std::filesystem::path ca() const { return dir() / "server.crt"; }
  const std::string& url() const { return url_; }    // the users' API
  const std::string& addr() const { return addr_; }  // where clusters join

  // aqsd's flags to join as `name` with the cluster's users table
  // `cluster_users` (default "* *": any user as themselves); a test adds
  // --faucets-speed, --config and the like.
  std::vector<std::string> join_args(const std::string& name, const std::string& cluster_users = "* *\n") const;
  // A token of faucetsd's for `u` (root when null), from ftoken on its socket.
  std::string token_for(const test_user* u) const;
  client::faucets::client client(const std::string& token) const;
  // Waits (90 s) until `n` clusters are UP with a node up, else fails with the log.
  void wait_up(const std::string& token, std::size_t n) const;
  std::string log() const;

private:
  temp_dir dir_;
  pid_t pid_ = -1;
  std::string addr_, url_;
};

}  // namespace aqs::test
