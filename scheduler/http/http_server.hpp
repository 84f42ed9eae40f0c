// http_server: aqsd's HTTP front (--http): the REST API, server-sent events
// and /metrics, on aqsd's own io_context with Boost.Beast, plain or TLS.
// Requests carrying a bearer token act as its user through the same
// dispatcher (handlers and permission checks) as the Unix socket.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <boost/asio/io_context.hpp>

namespace aqs::daemon {
class controller;
}

namespace aqs::http {

// The listener could not be set up (bad HOST:PORT, address in use, a
// non-loopback address without TLS, unreadable certificate): one line.
class http_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct http_options {
  std::string listen;  // "HOST:PORT" (port 0: any free one, see port())
  // Both or neither: TLS with this certificate chain and private key (PEM).
  std::optional<std::filesystem::path> cert_file;
  std::optional<std::filesystem::path> key_file;
  // Plain HTTP on an address other than loopback is refused unless this is
  // set: tokens would cross the network in clear.
  bool insecure = false;
  // Read-only views (job list, one job, nodes, processor map, events,
  // metrics) answer requests without a token.
  bool public_read = false;
  // Limits (docs/security.md, "Limits: aqsd's ports and HTTP"). A
  // connection is anonymous until a request on it shows a valid token; it
  // then belongs to that token's user. Anonymous connections share a pool
  // of their own: when it is full (in total, or for one address) the
  // oldest anonymous connection is closed to make room, so a flood of
  // half-sent requests from one address (127.0.0.1, a reverse proxy) never
  // refuses a newcomer, and can never take an authenticated user's place.
  std::size_t max_connections = 4096;              // all connections; past it, the oldest anonymous one goes
  std::size_t max_anonymous_connections = 1024;    // connections without a valid token yet, in total
  std::size_t max_connections_per_address = 256;   // ... and from one client address
  std::size_t max_connections_per_user = 256;      // connections one token's user holds; more: 429
  // Requests one user (by token uid) may have under way at once, event
  // streams included; more are answered 429.
  std::size_t max_requests_per_user = 256;
  // Bodies: POST /api/v1/jobs carries a script (protocol k_max_script, 8
  // MiB) in JSON; every other route takes a small body; a request without
  // a token takes none. The token is checked on the head, before any body
  // byte is read.
  std::size_t max_submit_body = (std::size_t{10} << 20) + (std::size_t{64} << 10);
  std::size_t max_body = std::size_t{64} << 10;
  // Memory held in request bodies being read or handled, in total and per
  // user: a body that does not fit is answered 503 before it is read.
  std::size_t max_body_bytes_in_flight = std::size_t{256} << 20;
  std::size_t max_body_bytes_per_user = std::size_t{64} << 20;
  std::size_t max_header = std::size_t{16} << 10;
  // The request head must be complete within head_timeout of its first
  // byte (of the connection, for the first request); the body within
  // body_timeout of the head; an idle keep-alive connection is closed
  // after keepalive_timeout; an answer must be taken within write_timeout.
  std::chrono::milliseconds head_timeout{5'000};
  std::chrono::milliseconds body_timeout{30'000};
  std::chrono::milliseconds keepalive_timeout{30'000};
  std::chrono::milliseconds write_timeout{30'000};
  std::chrono::milliseconds handshake_timeout{5'000};  // TLS
  // An answer from the controller that takes longer is a 504.
  std::chrono::milliseconds handler_timeout{60'000};
  // Event-stream bytes a slow client may leave unread before it is dropped.
  std::size_t max_stream_backlog = std::size_t{4} << 20;
  std::chrono::milliseconds keepalive_interval{15'000};  // SSE comment lines
  // Utilisation over time (GET /api/v1/cluster/utilization): the busy
  // processors sampled this often, and within a second of a job change;
  // the newest this many samples are kept (memory only: a restarted aqsd
  // starts a new history).
  std::chrono::milliseconds utilization_interval{10'000};
  std::size_t utilization_samples = 20'000;
};

// Checks the options without binding: HOST:PORT resolves, certificate and
// key go together, a non-loopback address has TLS or `insecure`. Throws
// http_error with one line (aqsd checks before it starts anything).
void validate(const http_options& o);

// Serves until stop(); the controller must outlive it, and the io_context
// must be drained before it is destroyed.
class http_server {
public:
  http_server(boost::asio::io_context& io, http_options options, daemon::controller& ctl);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  // Binds and starts accepting; subscribes to the controller's job changes
  // (call before the controller starts). Throws http_error.
  void start();
  // Stops accepting, ends every connection and event stream. Idempotent.
  void stop();
  unsigned short port() const noexcept;
  bool tls() const noexcept;

  struct state;

private:
  std::shared_ptr<state> state_;
};

// The OpenAPI 3 document of the API (scheduler/http/openapi.json, compiled in).
std::string_view openapi_document() noexcept;
// The dashboard served at / (scheduler/http/dashboard.html, compiled in).
std::string_view dashboard_document() noexcept;

}  // namespace aqs::http
