// faucets_server: faucetsd assembled from its parts, and nothing else:
//   cluster_hub  (cluster_hub.hpp)  the clusters' TLS links and what each reports;
//   job_router   (job_router.hpp)   placing each job by the broker policy, following it;
//   user_api     (user_api.hpp)     the users' HTTP API and the overview page;
//   faucets_store (faucets_store.hpp) the jobs, in PostgreSQL.
// The server owns the parts and the token authority and wires them: the
// router listens to the hub, the API reaches the router and the store
// through user_backend. It holds no state of its own beyond them. Every
// part runs on the one io_context thread given here: no locks. Every
// port's caps and deadlines are in conn_limits.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <boost/asio/io_context.hpp>

#include "daemon_base/token_authority.hpp"
#include "server/cluster_hub.hpp"
#include "server/conn_limits.hpp"
#include "server/faucets_store.hpp"
#include "server/job_router.hpp"
#include "server/user_api.hpp"
#include "server/user_map.hpp"

namespace aqs::faucets {

struct server_options {
  std::string listen = "0.0.0.0:7878";  // clusters connect here (TLS)
  std::filesystem::path cert, key;       // the server's certificate and key
  std::optional<std::string> http;       // users' API, HOST:PORT
  bool http_tls = true;                  // false: plain HTTP (loopback only)
  std::map<std::string, std::string> cluster_keys;  // name -> key
  user_map users;
  owners_table owners;  // --owners: clusters' owners, users' homes, debt limits (market.hpp)
  std::string policy = "earliest-start";
  std::uint64_t seed = 0;  // for random; 0: from the clock
  std::shared_ptr<const plugin_host> plugins;  // broker plugins (--plugin-dir), or null
  std::set<std::string> job_plugins;           // the plugins a job may name (--allow-job-plugins)
  std::chrono::seconds cluster_timeout{60};  // queued jobs of a lost cluster go elsewhere after this
  std::chrono::milliseconds estimate_timeout{2000};
  // Nothing heard from a connected cluster for this long (it reports every
  // second): the link is dead, though TCP may not know it yet.
  std::chrono::milliseconds silence_limit{10'000};
  std::string token_key;  // signs the users' bearer tokens
  std::optional<std::filesystem::path> revoked_tokens;
  server_limits limits;  // caps and deadlines of every port (conn_limits.hpp)
  // Staged files: the most a job may take in, or bring back (--stage-max-bytes).
  std::size_t stage_max_bytes = protocol::k_default_stage_max_bytes;
};

class faucets_server {
public:
  // Throws std::invalid_argument for an unknown policy.
  faucets_server(boost::asio::io_context& io, faucets_store& store, server_options options);
  ~faucets_server();
  faucets_server(const faucets_server&) = delete;
  faucets_server& operator=(const faucets_server&) = delete;
  // Binds the listeners; throws std::runtime_error naming the address.
  void start();
  void stop();  // posted: call from any thread
  unsigned short cluster_port() const noexcept { return hub_.port(); }
  unsigned short http_port() const noexcept { return api_ ? api_->port() : 0; }
  // ftoken's desk on the Unix socket issues and revokes with these.
  daemon::token_authority& tokens() noexcept { return tokens_; }

private:
  class backend;  // user_backend over the router, the hub and the store

  server_options options_;
  daemon::token_authority tokens_;
  cluster_hub hub_;
  job_router router_;
  web_desk desk_;  // the page's quotes and job views (asks the clusters through hub_)
  std::unique_ptr<backend> backend_;
  std::unique_ptr<user_api> api_;
};

}  // namespace aqs::faucets
