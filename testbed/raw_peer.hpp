// raw_peer: a hand-driven protocol peer for the security tests and benchmarks: connections
// made as any local user (SO_PEERCRED names them) or over TCP, and frames
// sent and read one by one, with no client library in between to correct
// what an attacker would send.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include "protocol/framing.hpp"
#include "protocol/messages.hpp"

namespace aqs::test {

// `count` connections to the Unix socket at `path`, made by a child process
// running as uid/gid (so the kernel records that user as their peer), handed
// back to this process. Connections the server refused at once are included
// (they read an error, then EOF).
std::vector<int> connect_unix_as(const std::string& path, uid_t uid, gid_t gid, int count = 1);
// A connection to the Unix socket at `path` from this process; -1 if refused.
int connect_unix(const std::string& path);
// A TCP connection to host:port from this process; -1 if refused.
int connect_tcp(const std::string& host, int port);
// `count` TCP connections to host:port (IPv4) made by a child process running
// as uid/gid (the sockets belong to that user, as an attacker's would),
// handed back to this process. Throws if any connect fails.
std::vector<int> connect_tcp_as(const std::string& host, int port, uid_t uid, gid_t gid, int count = 1);

class raw_peer {
public:
  explicit raw_peer(int fd) : fd_(fd) {}
  ~raw_peer();
  raw_peer(raw_peer&& o) noexcept : fd_(o.fd_), decoder_(std::move(o.decoder_)), queued_(std::move(o.queued_)) {
    o.fd_ = -1;
  }
  raw_peer(const raw_peer&) = delete;
  raw_peer& operator=(const raw_peer&) = delete;

  int fd() const noexcept { return fd_; }
  void send(const protocol::message& m);
  void send_bytes(std::string_view bytes);  // raw, e.g. a frame with a bad body
  // The next message from the server within `limit`; nullopt on EOF or when
  // nothing came in time.
  std::optional<protocol::message> next(std::chrono::milliseconds limit = std::chrono::seconds(10));
  // Messages until one carries request id `id` (ok or error); nullopt if none.
  std::optional<protocol::message> reply_to(std::int64_t id,
                                            std::chrono::milliseconds limit = std::chrono::seconds(10));
  // Whether the server closed the connection within `limit` (what it sent
  // before is read and dropped).
  bool closed_within(std::chrono::milliseconds limit);
  // hello as `role` (plain client by default); returns the server's answer.
  std::optional<protocol::message> hello(protocol::peer_role role = protocol::peer_role::client,
                                         std::optional<std::int64_t> job_id = std::nullopt,
                                         std::optional<std::string> auth = std::nullopt, bool launcher = false);

private:
  bool fill(std::chrono::milliseconds limit);  // false on EOF or timeout
  int fd_ = -1;
  protocol::frame_decoder decoder_;
  std::vector<std::string> queued_;
  bool eof_ = false;
};

// The error code of `m`, or nullopt if it is not an error.
std::optional<protocol::error_code> error_of(const std::optional<protocol::message>& m);
bool is_ok(const std::optional<protocol::message>& m);
std::string describe(const std::optional<protocol::message>& m);

}  // namespace aqs::test
