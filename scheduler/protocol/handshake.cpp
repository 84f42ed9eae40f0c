// handshake: hello construction and the server's verdict on it.
#include "protocol/handshake.hpp"

#include "protocol/auth.hpp"

namespace aqs::protocol {

hello make_hello(std::int64_t id, peer_role role, const std::optional<challenge>& received,
                 std::string_view key, std::optional<std::int64_t> job_id) {
  hello h;
  h.id = id;
  h.protocol = k_protocol_version;
  h.role = role;
  h.job_id = job_id;
  if (received) h.auth = compute_auth(key, received->nonce);
  return h;
}

hello_verdict check_hello(const message& first, transport t, std::string_view nonce, const key_lookup& keys) {
  const auto* h = std::get_if<hello>(&first);
  if (h == nullptr) {
    return {false, error{id_of(first), error_code::bad_request,
                         "the first message must be hello, not " + std::string(type_of(first))}};
  }
  if (h->protocol != k_protocol_version) {
    return {false, error{h->id, error_code::unsupported_version,
                         "peer speaks protocol version " + std::to_string(h->protocol) +
                             ", this server speaks version " + std::to_string(k_protocol_version)}};
  }
  if (t == transport::tcp) {
    const auto key = keys ? keys(*h) : std::nullopt;
    if (!key) {
      return {false, error{h->id, error_code::unauthorized,
                           h->role == peer_role::job ? "no such job to authenticate as" : "no key to authenticate with"}};
    }
    if (!h->auth) return {false, error{h->id, error_code::unauthorized, "TCP connections must send auth"}};
    if (!verify_auth(*key, nonce, *h->auth)) {
      return {false, error{h->id, error_code::unauthorized, "authentication failed"}};
    }
  }
  nlohmann::json result = {{"protocol", k_protocol_version}, {"role", to_string(h->role)}};
  return {true, ok{h->id, std::move(result)}};
}

}  // namespace aqs::protocol
