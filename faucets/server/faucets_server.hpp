// faucets_server: faucetsd's state and its three fronts, one concern per
// file: cluster_hub.cpp (the clusters' TLS links: who they are, what they
// report, how far away they are), job_router.cpp (placing each job by the
// broker policy, following it to its end, sending a lost cluster's queued
// jobs elsewhere) and user_api.cpp (users' HTTP API and the overview page).
// Every port's caps and deadlines are in conn_limits.hpp.
// Everything runs on one io_context thread: no locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "broker/broker.hpp"
#include "daemon/token_authority.hpp"
#include "link/link_channel.hpp"
#include "link/link_messages.hpp"
#include "server/conn_limits.hpp"
#include "server/faucets_store.hpp"

namespace aqs::faucets {

// The admin's table of which server user runs as which local account on
// which cluster: "SERVER_USER CLUSTER LOCAL_USER" per line, "*" for any
// cluster, "*" as local user for the same name.
class user_map {
public:
  static user_map parse(const std::string& text, const std::string& origin);
  static user_map load(const std::filesystem::path& file);
  std::optional<std::string> local_user(const std::string& user, const std::string& cluster) const;
  // Whether a rule that matches maps `user` to root on `cluster` (so that
  // local_user refuses it: faucetsd never runs a job as root).
  bool maps_to_root(const std::string& user, const std::string& cluster) const;

private:
  struct rule {
    std::string user, cluster, local;
  };
  std::vector<rule> rules_;
};

struct server_options {
  std::string listen = "0.0.0.0:7878";  // clusters connect here (TLS)
  std::filesystem::path cert, key;       // the server's certificate and key
  std::optional<std::string> http;       // users' API, HOST:PORT
  bool http_tls = true;                  // false: plain HTTP (loopback only)
  std::map<std::string, std::string> cluster_keys;  // name -> key
  user_map users;
  std::string policy = "earliest-start";
  std::uint64_t seed = 0;  // for random; 0: from the clock
  std::chrono::seconds cluster_timeout{60};  // queued jobs of a lost cluster go elsewhere after this
  std::chrono::milliseconds estimate_timeout{2000};
  // Nothing heard from a connected cluster for this long (it reports every
  // second): the link is dead, though TCP may not know it yet.
  std::chrono::milliseconds silence_limit{10'000};
  std::string token_key;  // signs the users' bearer tokens
  std::optional<std::filesystem::path> revoked_tokens;
  server_limits limits;  // caps and deadlines of every port (conn_limits.hpp)
};

struct cluster_entry {
  std::string name;
  std::shared_ptr<link_channel> channel;  // null while disconnected
  std::optional<cluster_report> report;
  std::chrono::steady_clock::time_point lost_at{};
  bool ever_seen = false;
  // Since it last connected, it has reported the copies it holds that the
  // server did not list ("synced"): only then are jobs placed there, so that
  // a copy waiting there is adopted rather than forwarded again.
  bool synced = false;
  std::chrono::steady_clock::time_point last_heard{};
  double latency_s = 0;       // last ping round trip
  double bandwidth_bps = 0;   // last probe
  std::int64_t placed_pending = 0;  // forwarded since its last report (optimistic view)
  std::int64_t placed_procs = 0;
};

class faucets_server {
public:
  faucets_server(boost::asio::io_context& io, faucets_store& store, server_options options);
  ~faucets_server();
  // Binds the listeners; throws std::runtime_error naming the address.
  void start();
  void stop();
  unsigned short cluster_port() const noexcept { return cluster_port_; }
  unsigned short http_port() const noexcept { return http_port_; }

  // ---- user_api.cpp uses these ---------------------------------------
  std::int64_t submit(const std::string& owner, const std::string& cluster, nlohmann::json submit_message,
                      std::string* error);
  std::optional<std::string> cancel(const stored_job& j);
  nlohmann::json clusters_json() const;
  const daemon::token_authority& tokens() const noexcept { return tokens_; }
  faucets_store& store() noexcept { return store_; }
  const std::string& policy() const noexcept { return options_.policy; }
  const server_limits& limits() const noexcept { return options_.limits; }
  // Why `owner` may run on no cluster of this server, or nullopt.
  std::optional<std::string> no_cluster_for(const std::string& owner) const;

private:
  // cluster_hub.cpp
  boost::asio::awaitable<void> accept_clusters();
  boost::asio::awaitable<void> cluster_session(boost::asio::ip::tcp::socket sock, conn_slot slot);
  void cluster_up(cluster_entry& c);
  void cluster_down(cluster_entry& c);
  void on_cluster_message(cluster_entry& c, const nlohmann::json& m);
  boost::asio::awaitable<void> pinger();
  std::vector<cluster_view> views() const;
  // job_router.cpp
  boost::asio::awaitable<void> router();
  void wake_router();
  boost::asio::awaitable<bool> place(stored_job j);
  void on_forwarded(cluster_entry& c, std::int64_t fid, std::int64_t local_id);
  void on_refused(cluster_entry& c, std::int64_t fid, const std::string& why);
  void on_update(cluster_entry& c, const job_update& u);
  void on_copy(cluster_entry& c, const stored_job& j, const job_update& u);
  // A cluster spoke of a job faucetsd never forwarded there: one log line.
  void refuse_claim(cluster_entry& c, std::int64_t fid, std::int64_t local_id, const std::string& what);
  void on_start(cluster_entry& c, std::int64_t fid, std::int64_t local_id);
  void check_lost_clusters();
  // user_api.cpp
  boost::asio::awaitable<void> accept_users();
  template <class Stream>
  boost::asio::awaitable<void> user_session(Stream& stream, conn_slot& slot, watchdog& dog);

  boost::asio::io_context& io_;
  faucets_store& store_;
  server_options options_;
  std::unique_ptr<broker> broker_;
  daemon::token_authority tokens_;
  std::unique_ptr<boost::asio::ssl::context> tls_, http_tls_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> clusters_acceptor_, users_acceptor_;
  unsigned short cluster_port_ = 0, http_port_ = 0;
  std::shared_ptr<conn_counts> http_conns_ = std::make_shared<conn_counts>();
  std::shared_ptr<conn_counts> cluster_conns_ = std::make_shared<conn_counts>();
  std::shared_ptr<body_budget> bodies_ = std::make_shared<body_budget>();
  log_throttle http_refusals_, cluster_refusals_, http_accept_errors_, cluster_accept_errors_;
  std::map<std::string, cluster_entry> clusters_;
  boost::asio::steady_timer router_wake_;
  bool stopped_ = false;
  // Placing one job at a time: the answers it waits for.
  std::int64_t next_qid_ = 1;
  std::map<std::int64_t, std::pair<std::string, double>> estimates_;  // qid -> cluster, start_in_s (-1: never)
  struct forward_wait {
    std::string cluster;
    std::int64_t attempt = 0;
    std::optional<std::int64_t> local_id;
    std::optional<std::string> refusal;
    bool lost = false;  // the link broke first: a copy may wait there, unknown
  };
  std::map<std::int64_t, forward_wait> forwards_;  // fid -> answer
  std::map<std::int64_t, std::set<std::string>> refused_by_;  // fid -> clusters that refused it
  boost::asio::steady_timer answer_wake_;
};

}  // namespace aqs::faucets
