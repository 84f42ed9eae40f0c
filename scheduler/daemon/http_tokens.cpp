// http_tokens (http_tokens.hpp): ftoken's requests: a bearer token for the HTTP API as the caller,
// and revoking tokens. Over the Unix socket only, where the kernel vouches
// for the caller.
#include <algorithm>

#include "daemon/http_tokens.hpp"
#include "daemon/pipeline.hpp"
#include "daemon_base/unix_user.hpp"
#include "daemon_base/permissions.hpp"
#include "logging/log.hpp"
#include "protocol/auth.hpp"

namespace aqs::daemon {

void http_tokens::handle_issue(const std::shared_ptr<connection>& c, const protocol::issue_token& m) {
  // The routing table let only may_get_token() peers through (a Unix
  // socket uid, which the kernel vouches for).
  const peer_info& p = c->peer();
  const auto uid = static_cast<std::int64_t>(*p.uid);
  protocol::token_reply r;
  r.user = user_name_of(uid);
  r.uid = uid;
  if (m.login) {
    // A one-time code for the dashboard: short-lived, good once, kept in
    // memory only (a restarted aqsd forgets it: ftoken --login again).
    const std::string code = protocol::random_hex(16);
    const std::int64_t now = clock_.wall_us() / 1'000'000;
    {
      std::lock_guard lock(codes_mu_);
      for (auto it = codes_.begin(); it != codes_.end();) it = it->second.expires_at <= now ? codes_.erase(it) : std::next(it);
      while (codes_.size() >= k_max_codes) {
        auto soonest = std::min_element(codes_.begin(), codes_.end(),
                                        [](const auto& a, const auto& b) { return a.second.expires_at < b.second.expires_at; });
        codes_.erase(soonest);
      }
      codes_[protocol::compute_auth("aqs dashboard login code", code)] = {uid, r.user, m.lifespan_s.value_or(lifespan_s_), now + protocol::k_login_code_lifespan_s};
    }
    r.token = code;
    // An id for logs, not the code: the first half of its keyed hash.
    r.token_id = protocol::compute_auth("aqs dashboard login code", code).substr(0, 32);
    r.expires_at = now + protocol::k_login_code_lifespan_s;
    logging::info("dashboard login code issued to {} (uid {}), good for {} s", r.user, uid, protocol::k_login_code_lifespan_s);
    c->send(protocol::make_ok(m.id, r));
    return;
  }
  auto [token, claims] = authority_.issue(uid, r.user, m.lifespan_s.value_or(lifespan_s_), clock_.wall_us());
  r.token = std::move(token);
  r.token_id = claims.id;
  r.expires_at = claims.expires_at;
  logging::info("HTTP token {} issued to {} (uid {}), expires at {}", claims.id, r.user, uid, claims.expires_at);
  c->send(protocol::make_ok(m.id, r));
}

std::optional<protocol::token_reply> http_tokens::redeem_login(const std::string& code) {
  login_code found;
  {
    std::lock_guard lock(codes_mu_);
    const auto it = codes_.find(protocol::compute_auth("aqs dashboard login code", code));
    if (it == codes_.end()) return std::nullopt;
    found = it->second;
    codes_.erase(it);  // once only, whatever happens next
  }
  if (found.expires_at <= clock_.wall_us() / 1'000'000) return std::nullopt;
  protocol::token_reply r;
  r.user = found.user;
  r.uid = found.uid;
  auto [token, claims] = authority_.issue(found.uid, found.user, found.lifespan_s, clock_.wall_us());
  r.token = std::move(token);
  r.token_id = claims.id;
  r.expires_at = claims.expires_at;
  logging::info("HTTP token {} issued to {} (uid {}) for a dashboard login code, expires at {}", claims.id, r.user,
                r.uid, claims.expires_at);
  return r;
}

void http_tokens::handle_revoke(const std::shared_ptr<connection>& c, const protocol::revoke_token& m) {
  // The routing table let only may_get_token() peers through (a Unix
  // socket uid, which the kernel vouches for).
  const peer_info& p = c->peer();
  const auto uid = static_cast<std::int64_t>(*p.uid);
  try {
    if (m.all) {
      authority_.revoke_all(uid, clock_.wall_us());
      logging::info("every HTTP token of uid {} revoked", uid);
    } else {
      const std::string& id = *m.token_id;
      const bool hex = id.size() == 32 && std::all_of(id.begin(), id.end(), [](char ch) {
        return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
      });
      if (!hex) {
        return reply_error(c, m.id, protocol::error_code::bad_request,
                           "field 'token_id' must be a token id (32 lowercase hex digits, as ftoken printed it)");
      }
      // Root revokes whoever's token it is; a user only a valid one of their
      // own, and is told so when the id names no such token.
      if (!authority_.revoke(is_admin(p) ? std::nullopt : std::optional<std::int64_t>(uid), id, clock_.wall_us())) {
        return reply_error(c, m.id, protocol::error_code::not_found,
                           "you have no valid token with id " + id +
                               ": nothing revoked (ftoken --revoke-all revokes every token of yours)");
      }
      logging::info("HTTP token {} revoked by uid {}", id, uid);
    }
  } catch (const std::exception& e) {
    return reply_error(c, m.id, protocol::error_code::internal, std::string("cannot keep the revocation: ") + e.what());
  }
  c->send(protocol::ok{m.id, {}});
}

}  // namespace aqs::daemon
