// server: aqsd's listeners (Unix socket for local users, TCP for agents and
// remote clients) and the sessions they accept.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "daemon_base/dispatcher.hpp"

namespace aqs::daemon {

// A listener could not be set up: the message names the address and why.
class server_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct server_options {
  // Local users; created mode 0666 (identity comes from SO_PEERCRED, so
  // anyone may connect). A stale socket file is replaced; one that answers
  // means another aqsd runs there (server_error).
  std::optional<std::filesystem::path> unix_socket;
  // "HOST:PORT" (port 0 picks a free one, see tcp_port()).
  std::optional<std::string> tcp_listen;
  std::string cluster_key;  // what TCP peers prove they hold (HMAC of a nonce)
  // The peer must complete hello within this.
  std::chrono::milliseconds handshake_timeout{10'000};
  // Once a frame has begun, its remaining bytes must arrive within this
  // (no slow-loris). Between frames a connection may stay idle.
  std::chrono::milliseconds frame_timeout{30'000};
  std::size_t max_connections = 4096;  // more are closed at once (trusted peers excepted)
  // One local user (Unix socket, by SO_PEERCRED uid) may hold this many
  // connections; more are refused at once with an error. Root and the uid
  // that runs aqsd (node agents) are not counted, and get in even when
  // max_connections is reached.
  std::size_t max_connections_per_user = 256;
  // TCP connections from one address that have not yet proven the cluster
  // key or a job token; once a peer is authenticated it no longer counts.
  std::size_t max_handshakes_per_address = 64;
  // The same in total (every address): strangers cannot hold all
  // max_connections while agents reconnect.
  std::size_t max_handshakes = 1024;
  // A client connection with no request outstanding and no stream (watch)
  // open is closed after this long without a frame.
  std::chrono::milliseconds idle_timeout{300'000};
  // Local users trusted as node agents on the Unix socket, and not limited:
  // root and the user running aqsd.
  std::vector<uid_t> trusted_uids{0, ::geteuid()};
  std::size_t max_queued_bytes = std::size_t{64} << 20;  // per connection, unsent replies
};

// Accepts connections and runs one session per connection on its own strand
// of the io_context (which the caller runs on any number of threads). The
// dispatcher must outlive every session: stop() the server and drain the
// io_context before destroying it.
class server {
public:
  server(boost::asio::io_context& io, server_options options, dispatcher& handler);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds and starts accepting. Throws server_error (address in use, bad
  // "HOST:PORT", socket path too long, another aqsd on the socket).
  void start();
  // Stops accepting and closes every connection. Thread-safe, idempotent.
  void stop();

  unsigned short tcp_port() const noexcept;  // 0 without TCP
  std::size_t connections() const noexcept;

  struct state;  // shared with the sessions (internal)

private:
  std::shared_ptr<state> state_;
};

}  // namespace aqs::daemon
