// token_desk: issuing and revoking users' bearer tokens on the Unix socket.
#include "server/token_desk.hpp"

#include <chrono>

#include "daemon_base/permissions.hpp"
#include "daemon_base/unix_user.hpp"
#include "logging/log.hpp"
#include "protocol/replies.hpp"

namespace aqs::faucets {

void token_desk::on_message(const std::shared_ptr<daemon::connection>& c, protocol::message m) {
  const auto& p = c->peer();
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  if (const auto* t = std::get_if<protocol::issue_token>(&m)) {
    if (!daemon::may_get_token(p)) {
      c->send(protocol::error{t->id, protocol::error_code::permission_denied, "tokens are issued over the Unix socket"});
      return;
    }
    const auto uid = static_cast<std::int64_t>(*p.uid);
    protocol::token_reply r;
    r.user = daemon::user_name_of(uid);
    r.uid = uid;
    auto [token, claims] = tokens_.issue(uid, r.user, t->lifespan_s.value_or(lifespan_), now_us);
    r.token = std::move(token);
    r.token_id = claims.id;
    r.expires_at = claims.expires_at;
    logging::info("token {} issued to {} (uid {})", claims.id, r.user, uid);
    c->send(protocol::make_ok(t->id, r));
    return;
  }
  if (const auto* t = std::get_if<protocol::revoke_token>(&m)) {
    if (!daemon::may_get_token(p)) {
      c->send(protocol::error{t->id, protocol::error_code::permission_denied, "tokens are revoked over the Unix socket"});
      return;
    }
    const auto uid = static_cast<std::int64_t>(*p.uid);
    if (t->all) {
      tokens_.revoke_all(uid, now_us);
    } else {
      tokens_.revoke(uid == 0 ? std::nullopt : std::optional<std::int64_t>(uid), *t->token_id, now_us);
    }
    c->send(protocol::ok{t->id, {}});
    return;
  }
  if (const auto id = protocol::id_of(m)) {
    c->send(protocol::error{*id, protocol::error_code::bad_request,
                            "faucetsd's socket only issues tokens; submit through its HTTP API (fsub --faucets URL)"});
  }
}

}  // namespace aqs::faucets
