// conn_limits: what bounds the work one peer can make faucetsd do on a
// listening port (docs/security.md "Limits: faucetsd"): connection counts
// in total and per key (an address until the peer proves who it is, then its
// user or cluster), a deadline that closes a connection which is too slow, an
// accept loop's backoff when descriptors run out, and a budget of request
// bodies being read. faucetsd runs on one thread: nothing here locks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include "core/settings.hpp"

namespace aqs::faucets {

// The caps and deadlines of faucetsd's three fronts, with their defaults
// (faucetsd's flags of the same names set them).
struct server_limits {
  // Users' HTTP port.
  std::size_t http_max_connections = 1024;  // in total
  std::size_t http_max_per_address = 64;    // from one address, before a request proves a token
  std::size_t http_max_per_user = 32;       // held by one token's user
  // Clusters' port.
  std::size_t cluster_max_connections = 256;  // links and handshakes in total
  std::size_t cluster_max_per_address = 16;   // handshakes from one address, before the key is proven
  // Unix socket (ftoken).
  std::size_t socket_max_connections = 256;
  std::size_t socket_max_per_user = 16;  // root is not counted
  // Deadlines: the TLS handshake (and a cluster's hello); a request's line
  // and headers, counted from the connection's start or the previous answer
  // (so it also ends an idle keep-alive connection); a request's body.
  std::chrono::milliseconds handshake_timeout{10'000};
  std::chrono::milliseconds head_timeout{10'000};
  std::chrono::milliseconds body_timeout{30'000};
  // Bodies: POST /api/v1/jobs (a job carries its script, up to 8 MiB in
  // aqsd), every other route, a request's head; and the bytes of bodies
  // being read at once over all connections.
  std::size_t max_job_body = std::size_t{16} << 20;
  std::size_t max_other_body = std::size_t{64} << 10;
  std::size_t max_head = std::size_t{16} << 10;
  std::size_t max_bodies_in_flight = std::size_t{256} << 20;
  // A cluster's hello, read before its key is proven.
  std::size_t max_hello_frame = std::size_t{64} << 10;

  // Lowers the connection caps so that together they fit in `nofile`
  // descriptors with `reserve` left for the store, files and the logs.
  // Returns a one-line note when it lowered any, else nullopt.
  std::optional<std::string> fit_descriptors(std::uint64_t nofile, std::size_t reserve = 64);
};

// faucetsd's flags for the limits above (core/settings.hpp), pointing into `l`.
std::vector<core::setting> server_limit_settings(server_limits& l);

// Connections open on one port: in total and per key.
struct conn_counts {
  std::size_t total = 0;
  std::map<std::string, std::size_t> per_key;
  std::size_t of(const std::string& key) const;
};

// Why a new connection under `key` is refused ("too many connections from
// KEY ..."), or nullopt: it may open.
std::optional<std::string> admit(const conn_counts& c, const std::string& key, std::size_t total_cap,
                                 std::size_t key_cap, const std::string& port_name);

// One open connection, counted while it lives (move-only).
class conn_slot {
public:
  conn_slot(std::shared_ptr<conn_counts> counts, std::string key);
  ~conn_slot();
  conn_slot(conn_slot&& o) noexcept;
  conn_slot& operator=(conn_slot&&) = delete;
  conn_slot(const conn_slot&) = delete;
  conn_slot& operator=(const conn_slot&) = delete;
  // Counts it under `key` from now on, if `key` holds fewer than `cap`
  // (its own count aside); false (and unchanged) otherwise.
  bool rekey(const std::string& key, std::size_t cap);
  const std::string& key() const noexcept { return key_; }

private:
  std::shared_ptr<conn_counts> counts_;
  std::string key_;
};

// Bytes of request bodies being read, over all connections.
struct body_budget {
  std::size_t in_use = 0, cap = 0;
};
// A reservation from the budget, returned when it goes.
class body_reservation {
public:
  body_reservation() = default;
  // nullopt when the budget cannot spare `bytes` now.
  static std::optional<body_reservation> take(const std::shared_ptr<body_budget>& b, std::size_t bytes);
  ~body_reservation();
  body_reservation(body_reservation&& o) noexcept;
  body_reservation& operator=(body_reservation&& o) noexcept;

private:
  std::shared_ptr<body_budget> budget_;
  std::size_t bytes_ = 0;
};

// Closes a socket when a phase outlasts its deadline. arm() starts a phase
// (replacing any earlier one), disarm() ends it. The socket must outlive the
// watchdog; a firing that a later arm() or disarm() superseded does nothing.
class watchdog {
public:
  explicit watchdog(boost::asio::ip::tcp::socket& sock);
  ~watchdog();
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;
  void arm(std::chrono::milliseconds d);
  void disarm();
  bool fired() const noexcept { return state_->fired; }

private:
  struct state {
    std::uint64_t generation = 0;
    bool fired = false;
    boost::asio::ip::tcp::socket* sock = nullptr;
  };
  boost::asio::steady_timer timer_;
  std::shared_ptr<state> state_;
};

// An accept that failed: EMFILE, ENFILE, ENOBUFS, ENOMEM and the like. The
// accept loop waits this long before it tries again, so that a process out
// of descriptors sleeps instead of spinning on a listening socket that stays
// readable.
inline constexpr std::chrono::milliseconds k_accept_backoff{100};
bool out_of_resources(const boost::system::error_code& ec) noexcept;

// At most one log line per `every` for a recurring condition, saying how
// many were folded into it.
class log_throttle {
public:
  explicit log_throttle(std::chrono::milliseconds every = std::chrono::seconds(1)) : every_(every) {}
  // Call for each occurrence: the number to report (>= 1) when a line is
  // due now, else 0.
  std::size_t due();

private:
  std::chrono::milliseconds every_;
  std::chrono::steady_clock::time_point last_{};
  std::size_t folded_ = 0;
};

}  // namespace aqs::faucets
