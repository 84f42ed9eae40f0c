// cluster_hub: the clusters' side of faucetsd: a TLS listener, the
// challenge each cluster answers with its key, the reports it sends, the
// round trip and bandwidth to it, and how long it has been away.
//
// Rule: the hub owns the cluster links and everything known about each
// cluster (its report, whether it synced, latency, what was placed there
// since its last report); nobody else holds a link. Job messages a cluster
// sends go to one cluster_listener (the job_router), which answers through
// the hub's cluster_links interface. Everything runs on faucetsd's one io_context thread: no locks,
// and the listener is called on that thread, never re-entered.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <utility>  // before Boost.Asio's awaitable.hpp, which needs std::exchange

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <nlohmann/json.hpp>

#include "broker/broker.hpp"
#include "cluster_link/link_channel.hpp"
#include "cluster_link/link_messages.hpp"
#include "server/conn_limits.hpp"

namespace aqs::faucets {

// What the hub tells the part that follows jobs. Each call may throw: a
// link_error is logged and the link kept; any other error (the store
// failing) closes the link, and the cluster reports everything again when
// it connects anew.
class cluster_listener {
public:
  virtual ~cluster_listener() = default;
  // `cluster` proved its key and was welcomed; send() reaches it.
  virtual void cluster_up(const std::string& cluster) = 0;
  // Its link is gone (closed, silent, replaced by nothing).
  virtual void cluster_down(const std::string& cluster) = 0;
  // Away longer than the hub's lost_after, once per loss.
  virtual void cluster_lost(const std::string& cluster) = 0;
  // A message about jobs: forwarded, refused, estimate_reply, start, job_update, outputs.
  virtual void job_message(const std::string& cluster, const std::string& type, const nlohmann::json& m) = 0;
  // What the clusters offer changed (a report, a sync): placing may go on.
  virtual void capacity_changed() = 0;
};

// The clusters as the job_router reaches them: the cluster_hub below, or a
// fake in the unit tests.
class cluster_links {
public:
  virtual ~cluster_links() = default;
  virtual std::vector<std::string> names() const = 0;
  virtual bool knows(const std::string& cluster) const = 0;
  virtual bool connected(const std::string& cluster) const = 0;
  // Sends to a connected cluster; false (nothing sent) when it is not.
  virtual bool send(const std::string& cluster, nlohmann::json message) = 0;
  // The brokers' view of every cluster: up only once connected, reported
  // and synced; what was placed there since its last report counted in.
  virtual std::vector<cluster_view> views() const = 0;
  // Whether every known cluster has reported at least once.
  virtual bool all_reported() const = 0;
  // A job of `procs` processors was placed on `cluster`: counted in views()
  // until its next report.
  virtual void note_placed(const std::string& cluster, std::int64_t procs) = 0;
};

// Questions the web desk (web_desk.hpp) asks clusters carry qids from here
// up: their estimate_reply goes to the desk, not the router (whose qids count
// from 1). The uplink takes qids up to 2^40.
inline constexpr std::int64_t k_desk_qid_base = std::int64_t{1} << 39;
// Where the hub hands the desk's answers: job_view_reply, and estimate_reply
// with a qid from k_desk_qid_base.
using desk_handler = std::function<void(const std::string& cluster, const std::string& type, const nlohmann::json& m)>;

// The admin's cluster table: "NAME KEYFILE" per line (a relative key file is
// relative to the table), as name -> key. Throws std::runtime_error naming
// the file and line, or when it names no cluster.
std::map<std::string, std::string> load_cluster_keys(const std::filesystem::path& file);

struct hub_options {
  std::string listen = "0.0.0.0:7878";               // clusters connect here (TLS)
  std::filesystem::path cert, key;                    // the server's certificate and key
  std::map<std::string, std::string> cluster_keys;    // name -> key
  std::string policy;                                 // told to each cluster in its welcome
  std::chrono::seconds lost_after{60};                // cluster_lost after this long away
  // Nothing heard from a connected cluster for this long (it reports every
  // second): the link is dead, though TCP may not know it yet.
  std::chrono::milliseconds silence_limit{10'000};
  server_limits limits;
};

class cluster_hub final : public cluster_links {
public:
  // Knows the clusters of `options.cluster_keys`, none connected yet.
  cluster_hub(boost::asio::io_context& io, hub_options options);
  ~cluster_hub() override;
  cluster_hub(const cluster_hub&) = delete;
  cluster_hub& operator=(const cluster_hub&) = delete;

  // Where job messages go; set before start().
  void set_listener(cluster_listener& l) noexcept { listener_ = &l; }
  // Where the web desk's answers go; set before start().
  void set_desk(desk_handler d) { desk_ = std::move(d); }
  // Binds the listener (throws std::runtime_error naming the address) and
  // starts accepting and pinging.
  void start();
  // Closes the listener and every link (posted: call from any thread).
  void stop();
  unsigned short port() const noexcept { return port_; }

  // cluster_links
  std::vector<std::string> names() const override;
  bool knows(const std::string& cluster) const override { return clusters_.contains(cluster); }
  bool connected(const std::string& cluster) const override;
  bool send(const std::string& cluster, nlohmann::json message) override;
  std::vector<cluster_view> views() const override;
  bool all_reported() const override;
  void note_placed(const std::string& cluster, std::int64_t procs) override;
  // GET /api/v1/clusters: name, state, latency, bandwidth, last report.
  nlohmann::json clusters_json() const;

private:
  struct entry {
    std::string name;
    std::shared_ptr<link_channel> channel;  // null while disconnected
    std::optional<cluster_report> report;
    std::chrono::steady_clock::time_point lost_at{};
    bool ever_seen = false;
    // Since it last connected, it has reported the copies it holds that the
    // server did not list ("synced"): only then are jobs placed there, so
    // that a copy waiting there is adopted rather than forwarded again.
    bool synced = false;
    std::chrono::steady_clock::time_point last_heard{};
    double latency_s = 0;       // last ping round trip
    double bandwidth_bps = 0;   // last probe
    std::int64_t placed_pending = 0;  // placed since its last report (optimistic view)
    std::int64_t placed_procs = 0;
  };

  boost::asio::awaitable<void> session(boost::asio::ip::tcp::socket sock, conn_slot slot);
  void up(entry& c);
  void down(entry& c);
  void on_message(entry& c, const nlohmann::json& m);
  boost::asio::awaitable<void> pinger();
  void check_lost();

  boost::asio::io_context& io_;
  hub_options options_;
  cluster_listener* listener_ = nullptr;
  desk_handler desk_;
  std::unique_ptr<boost::asio::ssl::context> tls_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  unsigned short port_ = 0;
  std::shared_ptr<conn_counts> conns_ = std::make_shared<conn_counts>();
  std::map<std::string, entry> clusters_;
  bool stopped_ = false;
};

}  // namespace aqs::faucets
