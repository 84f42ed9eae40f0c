// token_authority: aqsd's bearer tokens for the HTTP API: issued to a user
// over the Unix socket (ftoken), signed with a key derived from the cluster
// key, checked on every HTTP request, revocable (revocations kept in a file
// of the state directory, so they survive a restart).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace aqs::daemon {

// What a token says. The signature covers all of it.
struct token_claims {
  std::int64_t uid = 0;
  std::string user;
  std::int64_t issued_us = 0;   // Unix time, microseconds (revoke-all compares it)
  std::int64_t expires_at = 0;  // Unix time, seconds
  std::string id;               // 16 random bytes as hex: what revoke names
  friend bool operator==(const token_claims&, const token_claims&) = default;
};

// Thread-safe.
class token_authority {
public:
  static constexpr std::int64_t k_default_lifespan_s = 3600;

  // `revocations`: the file revocations are kept in (read now if it exists;
  // nullopt: in memory only, as in tests). Throws std::runtime_error if the
  // file exists and cannot be read or is malformed (the message names it).
  token_authority(std::string_view cluster_key, std::optional<std::filesystem::path> revocations = std::nullopt);

  // A token for `uid`/`user`, valid `lifespan_s` seconds from `now_us`.
  // Throws std::runtime_error if the CSPRNG fails.
  std::pair<std::string, token_claims> issue(std::int64_t uid, const std::string& user, std::int64_t lifespan_s,
                                             std::int64_t now_us) const;
  // The claims of a valid token, or why it is refused (one line: malformed,
  // bad signature, expired, revoked). Constant-time signature check.
  std::variant<token_claims, std::string> verify(std::string_view token, std::int64_t now_us) const;

  // Revokes the token `id` if it is `uid`'s (`uid` unset: whoever's, for
  // root). Revoking an id that is someone else's changes nothing for them.
  // Throws std::runtime_error if the revocation cannot be written.
  void revoke(std::optional<std::int64_t> uid, const std::string& id, std::int64_t now_us);
  // Revokes every token issued to `uid` until `now_us`.
  void revoke_all(std::int64_t uid, std::int64_t now_us);

  // The token text's parts, for tests: "aqs1.<payload>.<signature>".
  static constexpr std::string_view k_prefix = "aqs1.";

private:
  bool revoked_locked(const token_claims& c) const;
  void save_locked(std::int64_t now_us) const;

  std::string key_;  // derived from the cluster key: tokens are not handshake MACs
  std::optional<std::filesystem::path> file_;
  mutable std::mutex mu_;
  // id -> {uid whose token it is (-1: anyone's, root revoked it), when}
  std::multimap<std::string, std::pair<std::int64_t, std::int64_t>> revoked_ids_;
  std::map<std::int64_t, std::int64_t> revoked_before_;  // uid -> tokens issued until then are revoked
};

}  // namespace aqs::daemon
