// http_tokens: the tokens part of aqsd: ftoken's requests (a bearer token
// for the HTTP API as the caller, revoking tokens) over the Unix socket
// only, where the kernel vouches for the caller, and the token authority
// the HTTP front checks tokens with.
//
// Rule: it owns the token authority (thread-safe: the HTTP front reads it
// from its own threads); the routing table sends it `issue_token` and
// `revoke_token` on the session threads, from peers may_get_token() let
// through. It touches no job or node state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <memory>
#include <optional>

#include "daemon/clock.hpp"
#include "daemon_base/dispatcher.hpp"
#include "daemon_base/token_authority.hpp"
#include "protocol/messages.hpp"
#include "protocol/replies.hpp"

namespace aqs::daemon {

class http_tokens {
public:
  http_tokens(const std::string& cluster_key, std::optional<std::filesystem::path> revoked_file,
              std::int64_t default_lifespan_s, clock& time)
      : authority_(cluster_key, std::move(revoked_file)), lifespan_s_(default_lifespan_s), clock_(time) {}

  void handle_issue(const std::shared_ptr<connection>& c, const protocol::issue_token& m);
  void handle_revoke(const std::shared_ptr<connection>& c, const protocol::revoke_token& m);
  const token_authority& authority() const noexcept { return authority_; }

  // POST /api/v1/login: a login code ftoken --login got is exchanged, once,
  // within protocol::k_login_code_lifespan_s, for a token of the lifespan
  // asked then. nullopt: no such code, used already, or expired (the
  // caller cannot tell which: a guess learns nothing). Thread-safe.
  std::optional<protocol::token_reply> redeem_login(const std::string& code);

private:
  token_authority authority_;
  std::int64_t lifespan_s_;
  clock& clock_;
  struct login_code {
    std::int64_t uid = 0;
    std::string user;
    std::int64_t lifespan_s = 0;
    std::int64_t expires_at = 0;  // Unix seconds
  };
  std::mutex codes_mu_;
  std::map<std::string, login_code> codes_;  // by the code's hash (a timing leak learns nothing of a live code)
  static constexpr std::size_t k_max_codes = 4096;  // past them the soonest to expire go
};

}  // namespace aqs::daemon
