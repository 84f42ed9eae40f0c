// token_desk: faucetsd's Unix socket: users get and revoke their bearer
// tokens there, where the kernel vouches for who they are (ftoken --socket
// PATH). Anything else asked there is refused with a pointer to the HTTP API.
// Rule: owns nothing but the default lifespan; the tokens are the
// faucets_server's token_authority (thread-safe). Called on the socket
// server's thread, faucetsd's one io_context thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "daemon_base/server.hpp"
#include "daemon_base/token_authority.hpp"

namespace aqs::faucets {

class token_desk final : public daemon::dispatcher {
public:
  token_desk(daemon::token_authority& tokens, std::int64_t lifespan_s) : tokens_(tokens), lifespan_(lifespan_s) {}
  void on_open(const std::shared_ptr<daemon::connection>&) override {}
  void on_close(const std::shared_ptr<daemon::connection>&) override {}
  std::optional<std::string> tcp_key(protocol::peer_role, std::optional<std::int64_t>) override { return std::nullopt; }
  void on_message(const std::shared_ptr<daemon::connection>& c, protocol::message m) override;

private:
  daemon::token_authority& tokens_;
  std::int64_t lifespan_;
};

}  // namespace aqs::faucets
