// handshake: the opening of every connection (challenge, hello, verdict) as pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/messages.hpp"

namespace aqs::protocol {

// Unix socket connections are identified by SO_PEERCRED and need no auth;
// TCP connections start with a challenge and must prove the key.
enum class transport : unsigned char { unix_socket, tcp };

// The client side: the hello to send. On TCP pass the received challenge and
// the key (the cluster key for roles client and node, the job's token for
// role job); auth is then HMAC-SHA256(key, challenge.nonce) in hex. On a Unix
// socket pass no challenge: no auth is sent.
hello make_hello(std::int64_t id, peer_role role, const std::optional<challenge>& received,
                 std::string_view key, std::optional<std::int64_t> job_id = std::nullopt);

// Which key a hello must prove: the cluster key for client and node, the
// job's token for role job. nullopt refuses the peer (unknown job, no key).
using key_lookup = std::function<std::optional<std::string>(const hello&)>;

struct hello_verdict {
  bool accepted = false;
  // ok {id, protocol, role} when accepted; otherwise the error to send
  // before closing the connection.
  message reply;
};

// The server side: judges the first message of a connection. `nonce` is the
// one sent in the challenge (ignored on a Unix socket). Refusals, in order:
// not a hello -> bad_request; a protocol version other than
// k_protocol_version -> unsupported_version naming both versions; on TCP no
// key for the peer, no auth, or a wrong one -> unauthorized. Never throws
// except std::bad_alloc and what `keys` throws.
hello_verdict check_hello(const message& first, transport t, std::string_view nonce, const key_lookup& keys);

}  // namespace aqs::protocol
