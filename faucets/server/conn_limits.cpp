// conn_limits: connection counts, deadlines, the accept backoff, the body
// budget.
#include "server/conn_limits.hpp"

#include <algorithm>
#include <cerrno>
#include <utility>

#include <boost/asio/error.hpp>

namespace aqs::faucets {

std::vector<core::setting> server_limit_settings(server_limits& l) {
  constexpr double k_count = 1'000'000;
  return {
      core::count_setting({}, "--http-max-connections", l.http_max_connections,
                          "connections on the users' port in total", 1, k_count),
      core::count_setting({}, "--http-max-per-address", l.http_max_per_address,
                          "users' port connections from one address before a request proves a token", 1, k_count),
      core::count_setting({}, "--http-max-per-user", l.http_max_per_user,
                          "users' port connections one token's user may hold", 1, k_count),
      core::count_setting({}, "--cluster-max-connections", l.cluster_max_connections,
                          "connections on the clusters' port in total", 1, k_count),
      core::count_setting({}, "--cluster-max-per-address", l.cluster_max_per_address,
                          "clusters' port handshakes from one address before the key is proven", 1, k_count),
      core::count_setting({}, "--socket-max-connections", l.socket_max_connections,
                          "connections on the Unix socket in total", 1, k_count),
      core::count_setting({}, "--socket-max-per-user", l.socket_max_per_user,
                          "Unix socket connections of one local user, root aside", 1, k_count),
      core::seconds_setting({}, "--handshake-timeout", l.handshake_timeout,
                            "seconds for a TLS handshake and a cluster's hello", 0.1, 3600),
      core::seconds_setting({}, "--head-timeout", l.head_timeout,
                            "seconds from a connection's start or its previous answer to a request's complete head",
                            0.1, 3600),
      core::seconds_setting({}, "--body-timeout", l.body_timeout,
                            "seconds to read a request's body, or write an answer", 0.1, 3600),
      core::bytes_setting({}, "--max-job-body", l.max_job_body, "bytes of a POST /api/v1/jobs body", 1024,
                          static_cast<double>(std::size_t{1} << 30)),
      core::bytes_setting({}, "--max-bodies-in-flight", l.max_bodies_in_flight,
                          "bytes of request bodies read at once over all connections", 1024,
                          static_cast<double>(std::size_t{1} << 40)),
  };
}

std::optional<std::string> server_limits::fit_descriptors(std::uint64_t nofile, std::size_t reserve) {
  const std::size_t want = http_max_connections + cluster_max_connections + socket_max_connections;
  const std::uint64_t have = nofile > reserve + 48 ? nofile - reserve : 48;
  if (want <= have) return std::nullopt;
  const auto scale = [&](std::size_t& cap) {
    cap = std::max<std::size_t>(16, static_cast<std::size_t>(static_cast<double>(cap) * static_cast<double>(have) /
                                                             static_cast<double>(want)));
  };
  scale(http_max_connections);
  scale(cluster_max_connections);
  scale(socket_max_connections);
  http_max_per_address = std::min(http_max_per_address, http_max_connections);
  http_max_per_user = std::min(http_max_per_user, http_max_connections);
  cluster_max_per_address = std::min(cluster_max_per_address, cluster_max_connections);
  socket_max_per_user = std::min(socket_max_per_user, socket_max_connections);
  return "RLIMIT_NOFILE is " + std::to_string(nofile) + ": connection caps lowered to fit (users' port " +
         std::to_string(http_max_connections) + ", clusters' port " + std::to_string(cluster_max_connections) +
         ", socket " + std::to_string(socket_max_connections) + ")";
}

std::size_t conn_counts::of(const std::string& key) const {
  const auto it = per_key.find(key);
  return it == per_key.end() ? 0 : it->second;
}

std::optional<std::string> admit(const conn_counts& c, const std::string& key, std::size_t total_cap,
                                 std::size_t key_cap, const std::string& port_name) {
  if (c.of(key) >= key_cap) {
    return "too many connections from " + key + " on the " + port_name + " (at most " + std::to_string(key_cap) + ")";
  }
  if (c.total >= total_cap) {
    return "too many connections on the " + port_name + " (at most " + std::to_string(total_cap) + ")";
  }
  return std::nullopt;
}

conn_slot::conn_slot(std::shared_ptr<conn_counts> counts, std::string key)
    : counts_(std::move(counts)), key_(std::move(key)) {
  ++counts_->total;
  ++counts_->per_key[key_];
}

conn_slot::conn_slot(conn_slot&& o) noexcept : counts_(std::move(o.counts_)), key_(std::move(o.key_)) {}

conn_slot::~conn_slot() {
  if (!counts_) return;
  --counts_->total;
  if (const auto it = counts_->per_key.find(key_); it != counts_->per_key.end() && --it->second == 0) {
    counts_->per_key.erase(it);
  }
}

bool conn_slot::rekey(const std::string& key, std::size_t cap) {
  if (!counts_ || key == key_) return true;
  if (counts_->of(key) >= cap) return false;
  if (const auto it = counts_->per_key.find(key_); it != counts_->per_key.end() && --it->second == 0) {
    counts_->per_key.erase(it);
  }
  key_ = key;
  ++counts_->per_key[key_];
  return true;
}

std::optional<body_reservation> body_reservation::take(const std::shared_ptr<body_budget>& b, std::size_t bytes) {
  if (b->in_use + bytes > b->cap) return std::nullopt;
  b->in_use += bytes;
  body_reservation r;
  r.budget_ = b;
  r.bytes_ = bytes;
  return r;
}

body_reservation::~body_reservation() {
  if (budget_) budget_->in_use -= bytes_;
}

body_reservation::body_reservation(body_reservation&& o) noexcept
    : budget_(std::move(o.budget_)), bytes_(std::exchange(o.bytes_, 0)) {}

body_reservation& body_reservation::operator=(body_reservation&& o) noexcept {
  if (this != &o) {
    if (budget_) budget_->in_use -= bytes_;
    budget_ = std::move(o.budget_);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

watchdog::watchdog(boost::asio::ip::tcp::socket& sock)
    : timer_(sock.get_executor()), state_(std::make_shared<state>()) {
  state_->sock = &sock;
}

watchdog::~watchdog() {
  state_->sock = nullptr;
  ++state_->generation;
}

void watchdog::arm(std::chrono::milliseconds d) {
  const std::uint64_t gen = ++state_->generation;
  timer_.expires_after(d);
  timer_.async_wait([st = state_, gen](const boost::system::error_code& ec) {
    if (ec || st->generation != gen || st->sock == nullptr) return;
    st->fired = true;
    boost::system::error_code ignore;
    st->sock->shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignore);
    st->sock->close(ignore);
  });
}

void watchdog::disarm() {
  ++state_->generation;
  timer_.cancel();
}

bool out_of_resources(const boost::system::error_code& ec) noexcept {
  if (ec == boost::asio::error::no_descriptors || ec == boost::asio::error::no_buffer_space ||
      ec == boost::asio::error::no_memory) {
    return true;
  }
  return ec.category() == boost::system::system_category() &&
         (ec.value() == EMFILE || ec.value() == ENFILE || ec.value() == ENOBUFS || ec.value() == ENOMEM);
}

std::size_t log_throttle::due() {
  ++folded_;
  const auto now = std::chrono::steady_clock::now();
  if (last_ != std::chrono::steady_clock::time_point{} && now - last_ < every_) return 0;
  last_ = now;
  return std::exchange(folded_, 0);
}

}  // namespace aqs::faucets
