// token_authority: token text, signatures, and the revocation file.
#include "daemon/token_authority.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/state_dir.hpp"
#include "protocol/auth.hpp"
#include "protocol/base64.hpp"

namespace aqs::daemon {

namespace {

// base64url without padding (RFC 4648 section 5), as JWTs write it.
std::string b64url(std::string_view bytes) {
  std::string s = protocol::base64_encode(bytes);
  while (!s.empty() && s.back() == '=') s.pop_back();
  for (char& c : s) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return s;
}

std::optional<std::string> un_b64url(std::string_view text) {
  std::string s(text);
  for (char& c : s) {
    if (c == '-') c = '+';
    else if (c == '_') c = '/';
    else if (c == '+' || c == '/' || c == '=') return std::nullopt;
  }
  while (s.size() % 4 != 0) s += '=';
  return protocol::base64_decode(s);
}

// Revocations older than the longest lifespan concern only expired tokens.
constexpr std::int64_t k_keep_us = std::int64_t{31} * 24 * 3600 * 1'000'000 + 3'600'000'000;

}  // namespace

token_authority::token_authority(std::string_view cluster_key, std::optional<std::filesystem::path> revocations)
    : key_(protocol::compute_auth(cluster_key, "aqs http bearer token v1")), file_(std::move(revocations)) {
  if (!file_ || !std::filesystem::exists(*file_)) return;
  std::ifstream in(*file_);
  if (!in) throw std::runtime_error("cannot read " + file_->string());
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    std::istringstream words(line);
    std::string kind, a;
    std::int64_t b = 0, c = 0;
    if (!(words >> kind >> a >> b)) throw std::runtime_error(file_->string() + ":" + std::to_string(n) + ": malformed");
    if (kind == "id" && (words >> c)) {
      revoked_ids_.emplace(a, std::pair{b, c});
    } else if (kind == "all") {
      revoked_before_[std::stoll(a)] = b;
    } else {
      throw std::runtime_error(file_->string() + ":" + std::to_string(n) + ": malformed");
    }
  }
}

std::pair<std::string, token_claims> token_authority::issue(std::int64_t uid, const std::string& user,
                                                            std::int64_t lifespan_s, std::int64_t now_us) const {
  token_claims c;
  c.uid = uid;
  c.user = user;
  c.issued_us = now_us;
  c.expires_at = now_us / 1'000'000 + lifespan_s;
  c.id = protocol::random_hex(16);
  const nlohmann::json payload = {
      {"uid", c.uid}, {"user", c.user}, {"iat_us", c.issued_us}, {"exp", c.expires_at}, {"jti", c.id}};
  std::string signed_part = std::string(k_prefix) + b64url(payload.dump());
  std::string token = signed_part + "." + protocol::compute_auth(key_, signed_part);
  return {std::move(token), std::move(c)};
}

std::variant<token_claims, std::string> token_authority::verify(std::string_view token, std::int64_t now_us) const {
  if (token.size() > 4096 || !token.starts_with(k_prefix)) return std::string("malformed token");
  const auto dot = token.rfind('.');
  if (dot < k_prefix.size()) return std::string("malformed token");
  const std::string_view signed_part = token.substr(0, dot);
  if (!protocol::verify_auth(key_, signed_part, token.substr(dot + 1))) return std::string("bad token signature");
  const auto payload = un_b64url(signed_part.substr(k_prefix.size()));
  if (!payload) return std::string("malformed token");
  token_claims c;
  try {
    const auto j = nlohmann::json::parse(*payload);
    c.uid = j.at("uid").get<std::int64_t>();
    c.user = j.at("user").get<std::string>();
    c.issued_us = j.at("iat_us").get<std::int64_t>();
    c.expires_at = j.at("exp").get<std::int64_t>();
    c.id = j.at("jti").get<std::string>();
  } catch (const std::exception&) {
    return std::string("malformed token");  // signed by us, so never in practice
  }
  if (now_us / 1'000'000 >= c.expires_at) return std::string("token expired");
  std::lock_guard lock(mu_);
  if (revoked_locked(c)) return std::string("token revoked");
  return c;
}

bool token_authority::revoked_locked(const token_claims& c) const {
  if (auto it = revoked_before_.find(c.uid); it != revoked_before_.end() && c.issued_us <= it->second) return true;
  auto [from, to] = revoked_ids_.equal_range(c.id);
  for (auto it = from; it != to; ++it) {
    if (it->second.first < 0 || it->second.first == c.uid) return true;
  }
  return false;
}

void token_authority::revoke(std::optional<std::int64_t> uid, const std::string& id, std::int64_t now_us) {
  std::lock_guard lock(mu_);
  revoked_ids_.emplace(id, std::pair{uid.value_or(-1), now_us});
  save_locked(now_us);
}

void token_authority::revoke_all(std::int64_t uid, std::int64_t now_us) {
  std::lock_guard lock(mu_);
  revoked_before_[uid] = now_us;
  save_locked(now_us);
}

void token_authority::save_locked(std::int64_t now_us) const {
  if (!file_) return;
  std::string text;
  for (const auto& [id, who] : revoked_ids_) {
    if (now_us - who.second > k_keep_us) continue;
    text += "id " + id + " " + std::to_string(who.first) + " " + std::to_string(who.second) + "\n";
  }
  for (const auto& [uid, before] : revoked_before_) {
    if (now_us - before > k_keep_us) continue;
    text += "all " + std::to_string(uid) + " " + std::to_string(before) + "\n";
  }
  state_dir::write_file(*file_, text, 0600);
}

}  // namespace aqs::daemon
