// dispatcher: the seam between aqsd's network layer and what handles
// requests: who the peer is, how to reach it, and the handler interface.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>

#include "protocol/messages.hpp"

namespace aqs::daemon {

// http: a request to the HTTP API carrying a bearer token that aqsd issued
// (uid and gid are the token's user's; see daemon/token_authority.hpp).
enum class transport : unsigned char { unix_socket, tcp, http };

// Who is at the other end of a connection, as established by the handshake.
struct peer_info {
  transport via = transport::unix_socket;
  protocol::peer_role role = protocol::peer_role::client;
  // Unix socket: the kernel's SO_PEERCRED, which the peer cannot forge.
  // TCP: unset (the peer proved it holds the cluster key or a job token).
  // HTTP: the user of the bearer token, which aqsd signed.
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  std::optional<pid_t> pid;
  std::string remote;                  // "unix:pid=123" or "10.0.0.2:40122"
  std::string address;                 // TCP: the peer's IP alone ("10.0.0.2"); empty on Unix
  std::optional<std::int64_t> job_id;  // role job: the job it speaks for
  bool launcher = false;               // role job: aqs-rsh, not the job's shim
  std::int64_t map_epoch = 0;          // role job: the newest map its shim has seen (hello)
  // In-process only: the Faucets uplink submitting a job its server forwarded
  // (only it may give a job a "faucets:" submit token).
  bool faucets_uplink = false;
};

// A handle on one connection for whoever handles its requests. Thread-safe:
// send() and close() may be called from any thread, also after the peer is
// gone (then they do nothing).
class connection {
public:
  virtual ~connection() = default;
  // Queues a message for the peer, in order. If the peer does not read and
  // the queue exceeds the server's limit, the connection is closed.
  virtual void send(protocol::message m) = 0;
  // Closes after the messages already queued have been written.
  virtual void close() = 0;
  virtual const peer_info& peer() const noexcept = 0;
  virtual std::uint64_t serial() const noexcept = 0;  // unique per connection
  // The peer opened a stream (watch_job): the connection is never closed as
  // idle from now on. Thread-safe.
  virtual void streaming() {}
  // Reads nothing more from the peer for `d` from now (the longest of the
  // holds asked wins): a peer sending faster than it may is slowed at its
  // socket (its writes block or fail) instead of costing aqsd the parsing.
  // Thread-safe; takes effect after the message being handled.
  virtual void hold_reads(std::chrono::microseconds /*d*/) {}
};

// Handles what peers send after a successful handshake. Calls for one
// connection come one at a time, in order; calls for different connections
// may come concurrently from different threads. Implementations must not
// block for long: queue work elsewhere and answer later through conn.send().
class dispatcher {
public:
  virtual ~dispatcher() = default;
  // The peer said hello and was accepted. May refuse by throwing
  // protocol::protocol_error (sent to the peer, then the connection closes),
  // e.g. a role=job peer whose job is unknown.
  virtual void on_open(const std::shared_ptr<connection>& conn) = 0;
  // A validated request the peer's role may send. Reply with
  // protocol::ok/protocol::error carrying the request's id. A
  // protocol::protocol_error thrown here is sent back as the error reply
  // and the connection stays open; any other exception becomes an internal
  // error reply.
  virtual void on_message(const std::shared_ptr<connection>& conn, protocol::message m) = 0;
  // The connection is gone (either side closed, or an error).
  virtual void on_close(const std::shared_ptr<connection>& conn) = 0;
  // TCP: the secret a peer of this role must prove with the HMAC of the
  // challenge (the cluster key; a job's token for role=job). nullopt refuses
  // the peer as unauthorized.
  virtual std::optional<std::string> tcp_key(protocol::peer_role role,
                                             std::optional<std::int64_t> job_id) = 0;
};

}  // namespace aqs::daemon
