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
  // nullopt: in memory only, as in tests), with the ids of the tokens issued,
  // so that a revocation by id knows whose token it names. Entries that can
  // no longer matter (their tokens have expired) are dropped as it is read,
  // and the file is then written again without them. Throws
  // std::runtime_error if the file exists and cannot be read or is malformed
  // (the message names it). `now_us`: 0 is the system clock's now.
  token_authority(std::string_view cluster_key, std::optional<std::filesystem::path> revocations = std::nullopt,
                  std::int64_t now_us = 0);

  // A token for `uid`/`user`, valid `lifespan_s` seconds from `now_us`; its
  // id is recorded (appended to the file). Throws std::runtime_error if the
  // CSPRNG fails.
  std::pair<std::string, token_claims> issue(std::int64_t uid, const std::string& user, std::int64_t lifespan_s,
                                             std::int64_t now_us);
  // The claims of a valid token, or why it is refused (one line: malformed,
  // bad signature, expired, revoked). Constant-time signature check.
  std::variant<token_claims, std::string> verify(std::string_view token, std::int64_t now_us) const;

  // Revokes the token `id` if it is `uid`'s (`uid` unset: whoever's, for
  // root, even an id this daemon has no record of). Returns false, changing
  // nothing, when `uid` has no unexpired token of that id (someone else's,
  // expired, or never issued here). Throws std::runtime_error if the
  // revocation cannot be written.
  bool revoke(std::optional<std::int64_t> uid, const std::string& id, std::int64_t now_us);
  // Revokes every token issued to `uid` until `now_us`.
  void revoke_all(std::int64_t uid, std::int64_t now_us);

  // Entries kept (issued ids, revocations): bounded by the tokens alive.
  std::size_t entries() const;

  // The token text's parts, for tests: "aqs1.<payload>.<signature>".
  static constexpr std::string_view k_prefix = "aqs1.";

private:
  bool revoked_locked(const token_claims& c) const;
  std::size_t entries_locked() const;
  // Drops what concerns expired tokens only.
  void prune_locked(std::int64_t now_us);
  // Rewrites the file with what is kept (atomically).
  void save_locked() const;
  // Appends one line to the file (fsync'd when `durable`); every so often,
  // when the file holds many lines no longer needed, prunes and rewrites it.
  void append_locked(const std::string& line, bool durable, std::int64_t now_us);

  std::string key_;  // derived from the cluster key: tokens are not handshake MACs
  std::optional<std::filesystem::path> file_;
  mutable std::mutex mu_;
  // id -> {uid whose token it is (-1: anyone's, root revoked it), until
  // when it matters (the token's expiry, µs)}
  std::multimap<std::string, std::pair<std::int64_t, std::int64_t>> revoked_ids_;
  std::map<std::int64_t, std::int64_t> revoked_before_;  // uid -> tokens issued until then are revoked
  // id -> {uid, expiry (Unix seconds)} of the tokens issued and not expired
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> issued_;
  std::size_t file_lines_ = 0;     // lines in the file now (appended since the last rewrite included)
  std::size_t kept_at_prune_ = 0;  // entries kept by the last pruning
};

}  // namespace aqs::daemon
