// faucets_server: construction, listeners, the admin's user table, and
// taking a user's job into the server's queue.
#include "server/faucets_server.hpp"

#include <fstream>
#include <random>
#include <sstream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "link/tls.hpp"
#include "link/word_table.hpp"
#include "logging/log.hpp"
#include "protocol/messages.hpp"

namespace aqs::faucets {

namespace asio = boost::asio;
using nlohmann::json;

user_map user_map::parse(const std::string& text, const std::string& origin) {
  user_map m;
  for (auto& row : parse_word_table(text, origin, 3, "SERVER_USER CLUSTER LOCAL_USER")) {
    m.rules_.push_back(rule{std::move(row[0]), std::move(row[1]), std::move(row[2])});
  }
  return m;
}

user_map user_map::load(const std::filesystem::path& file) { return parse(read_text_file(file, "user table"), file.string()); }

std::optional<std::string> user_map::local_user(const std::string& user, const std::string& cluster) const {
  for (const auto& r : rules_) {
    if ((r.user == "*" || r.user == user) && (r.cluster == "*" || r.cluster == cluster)) {
      const std::string local = r.local == "*" ? user : r.local;
      if (local == "root") continue;  // never through the server
      return local;
    }
  }
  return std::nullopt;
}

bool user_map::maps_to_root(const std::string& user, const std::string& cluster) const {
  for (const auto& r : rules_) {
    if ((r.user == "*" || r.user == user) && (r.cluster == "*" || r.cluster == cluster)) {
      if ((r.local == "*" ? user : r.local) == "root") return true;
    }
  }
  return false;
}

namespace {
std::pair<std::string, std::string> split(const std::string& hp, const char* what) {
  const auto colon = hp.rfind(':');
  if (colon == std::string::npos || colon + 1 == hp.size()) {
    throw std::runtime_error(std::string(what) + " must be HOST:PORT, not '" + hp + "'");
  }
  std::string host = hp.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  return {host.empty() ? "0.0.0.0" : host, hp.substr(colon + 1)};
}

std::unique_ptr<asio::ip::tcp::acceptor> listen_on(asio::io_context& io, const std::string& hp, const char* what) {
  const auto [host, port] = split(hp, what);
  asio::ip::tcp::resolver resolver(io);
  boost::system::error_code ec;
  const auto results = resolver.resolve(host, port, asio::ip::resolver_base::passive, ec);
  if (ec || results.empty()) throw std::runtime_error(std::string("cannot resolve ") + what + " " + hp);
  const auto ep = results.begin()->endpoint();
  auto acc = std::make_unique<asio::ip::tcp::acceptor>(io);
  acc->open(ep.protocol(), ec);
  if (!ec) acc->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acc->bind(ep, ec);
  if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error(std::string("cannot listen on ") + hp + " (" + what + "): " + ec.message());
  return acc;
}
}  // namespace

faucets_server::faucets_server(asio::io_context& io, faucets_store& store, server_options options)
    : io_(io),
      store_(store),
      options_(std::move(options)),
      broker_(make_broker(options_.policy, options_.seed != 0 ? options_.seed : std::random_device{}())),
      tokens_(options_.token_key, options_.revoked_tokens),
      router_wake_(io),
      answer_wake_(io) {
  for (const auto& [name, key] : options_.cluster_keys) clusters_[name].name = name;
  bodies_->cap = options_.limits.max_bodies_in_flight;
}

faucets_server::~faucets_server() = default;

void faucets_server::start() {
  tls_ = server_tls(options_.cert, options_.key);
  clusters_acceptor_ = listen_on(io_, options_.listen, "--listen");
  cluster_port_ = clusters_acceptor_->local_endpoint().port();
  if (options_.http) {
    users_acceptor_ = listen_on(io_, *options_.http, "--http");
    http_port_ = users_acceptor_->local_endpoint().port();
    if (options_.http_tls) {
      http_tls_ = server_tls(options_.cert, options_.key);
    } else if (!users_acceptor_->local_endpoint().address().is_loopback()) {
      throw std::runtime_error("--http " + *options_.http + " is not on loopback: give it a certificate (TLS)");
    }
    asio::co_spawn(io_, accept_users(), asio::detached);
  }
  asio::co_spawn(io_, accept_clusters(), asio::detached);
  asio::co_spawn(io_, pinger(), asio::detached);
  asio::co_spawn(io_, router(), asio::detached);
}

void faucets_server::stop() {
  asio::post(io_, [this] {
    stopped_ = true;
    boost::system::error_code ec;
    if (clusters_acceptor_) clusters_acceptor_->close(ec);
    if (users_acceptor_) users_acceptor_->close(ec);
    for (auto& [name, c] : clusters_) {
      if (c.channel) c.channel->close();
    }
    router_wake_.cancel();
    answer_wake_.cancel();
  });
}

std::optional<std::string> faucets_server::no_cluster_for(const std::string& owner) const {
  if (owner == "root") return "faucetsd never runs a job as root: submit as the user the job should run as";
  std::string root_on;
  for (const auto& [name, c] : clusters_) {
    if (options_.users.local_user(owner, name)) return std::nullopt;
    if (options_.users.maps_to_root(owner, name)) root_on += (root_on.empty() ? "" : ", ") + name;
  }
  if (!root_on.empty()) {
    return "the admin's user table maps user '" + owner + "' to root (on " + root_on +
           ") and lets them run nowhere else; faucetsd never runs a job as root";
  }
  return "the admin's user table lets user '" + owner + "' run on no cluster of this server";
}

std::int64_t faucets_server::submit(const std::string& owner, const std::string& cluster, json submit_message,
                                    std::string* error) {
  if (cluster != "auto" && !clusters_.contains(cluster)) {
    *error = "no cluster '" + cluster + "' at this Faucets server (known: " + [&] {
      std::string names;
      for (const auto& [n, c] : clusters_) names += (names.empty() ? "" : ", ") + n;
      return names;
    }() + ")";
    return 0;
  }
  if (owner == "root") {
    *error = *no_cluster_for(owner);
    return 0;
  }
  if (cluster != "auto" && !options_.users.local_user(owner, cluster)) {
    *error = options_.users.maps_to_root(owner, cluster)
                 ? "the admin's user table maps user '" + owner + "' to root on cluster '" + cluster +
                       "', and faucetsd never runs a job as root"
                 : "user '" + owner + "' may not run jobs on cluster '" + cluster + "' (the admin's user table)";
    return 0;
  }
  if (cluster == "auto") {
    // Queued, it would wait for ever: no cluster would ever take it.
    if (auto why = no_cluster_for(owner)) {
      *error = *why;
      return 0;
    }
  }
  // The job must be one aqsd would take: validated here with aqsd's own rules.
  protocol::message parsed;
  try {
    parsed = protocol::parse_message(submit_message);
  } catch (const std::exception& e) {
    *error = e.what();
    return 0;
  }
  const auto* s = std::get_if<protocol::submit>(&parsed);
  if (s == nullptr) {
    *error = "not a job";
    return 0;
  }
  if (s->job.interactive) {
    *error = "interactive jobs (frun) cannot go through the Faucets server";
    return 0;
  }
  stored_job j;
  j.owner = owner;
  j.name = s->job.name;
  j.asked_cluster = cluster;
  j.submit = submit_message.dump();
  j.min_pe = s->job.min_pe;
  j.max_pe = s->job.max_pe;
  j.adaptive = s->job.adaptive;
  j.walltime_s = s->job.walltime_s ? static_cast<double>(*s->job.walltime_s) : 3600.0;
  const std::int64_t id = store_.add_job(j);
  logging::info("job {} of {} ({} to {} processors) queued for {}", id, owner, j.min_pe, j.max_pe, cluster);
  wake_router();
  return id;
}

}  // namespace aqs::faucets
