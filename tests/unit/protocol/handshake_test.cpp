// Unit tests of the connection handshake: challenge, hello with HMAC, and the server's verdict.
#include <doctest/doctest.h>

#include <string>

#include "protocol/auth.hpp"
#include "protocol/handshake.hpp"

using namespace aqs::protocol;

namespace {
const std::string k_key = "cluster-secret";

key_lookup cluster_keys() {
  return [](const hello& h) -> std::optional<std::string> {
    if (h.role == peer_role::job) {
      if (h.job_id == 7) return std::string("job7-token");
      return std::nullopt;
    }
    return k_key;
  };
}

error refusal(const hello_verdict& v) {
  REQUIRE_FALSE(v.accepted);
  REQUIRE(std::holds_alternative<error>(v.reply));
  return std::get<error>(v.reply);
}
}  // namespace

TEST_CASE("a TCP client with the cluster key is accepted and told the version") {
  const challenge c{make_nonce()};
  const hello h = make_hello(1, peer_role::node, c, k_key);
  REQUIRE(h.auth.has_value());
  const auto v = check_hello(h, transport::tcp, c.nonce, cluster_keys());
  CHECK(v.accepted);
  const auto& reply = std::get<ok>(v.reply);
  CHECK(reply.id == 1);
  CHECK(reply.result["protocol"] == k_protocol_version);
  CHECK(reply.result["role"] == "node");
}

TEST_CASE("a TCP hello with a wrong key, another nonce or no auth is unauthorized") {
  const challenge c{make_nonce()};
  CHECK(refusal(check_hello(make_hello(1, peer_role::client, c, "wrong"), transport::tcp, c.nonce, cluster_keys())).code ==
        error_code::unauthorized);
  const challenge other{make_nonce()};
  CHECK(refusal(check_hello(make_hello(1, peer_role::client, other, k_key), transport::tcp, c.nonce, cluster_keys())).code ==
        error_code::unauthorized);
  const hello bare = make_hello(2, peer_role::client, std::nullopt, k_key);
  CHECK_FALSE(bare.auth.has_value());
  const auto e = refusal(check_hello(bare, transport::tcp, c.nonce, cluster_keys()));
  CHECK(e.code == error_code::unauthorized);
  CHECK(e.id == 2);
}

TEST_CASE("a job authenticates with its own token, not the cluster key, and unknown jobs are refused") {
  const challenge c{make_nonce()};
  CHECK(check_hello(make_hello(1, peer_role::job, c, "job7-token", 7), transport::tcp, c.nonce, cluster_keys()).accepted);
  CHECK_FALSE(check_hello(make_hello(1, peer_role::job, c, k_key, 7), transport::tcp, c.nonce, cluster_keys()).accepted);
  CHECK(refusal(check_hello(make_hello(1, peer_role::job, c, "x", 8), transport::tcp, c.nonce, cluster_keys())).message ==
        "no such job to authenticate as");
}

TEST_CASE("on the Unix socket no auth is needed") {
  const hello h = make_hello(3, peer_role::client, std::nullopt, "");
  CHECK(check_hello(h, transport::unix_socket, "", cluster_keys()).accepted);
  CHECK(check_hello(h, transport::unix_socket, "", nullptr).accepted);
}

TEST_CASE("a version mismatch is unsupported_version naming both versions") {
  hello h = make_hello(4, peer_role::client, std::nullopt, "");
  h.protocol = k_protocol_version + 1;
  const auto e = refusal(check_hello(h, transport::unix_socket, "", cluster_keys()));
  CHECK(e.code == error_code::unsupported_version);
  CHECK(e.id == 4);
  CHECK(e.message.find(std::to_string(k_protocol_version + 1)) != std::string::npos);
  CHECK(e.message.find("version " + std::to_string(k_protocol_version)) != std::string::npos);
}

TEST_CASE("anything but hello first is refused as bad_request") {
  const auto e = refusal(check_hello(submit{5, {}}, transport::unix_socket, "", cluster_keys()));
  CHECK(e.code == error_code::bad_request);
  CHECK(e.id == 5);
  CHECK(e.message.find("submit") != std::string::npos);
}
