// token_authority: token text, signatures, and the revocation file.
#include "daemon_base/token_authority.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <unistd.h>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon_base/state_dir.hpp"
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

token_authority::token_authority(std::string_view cluster_key, std::optional<std::filesystem::path> revocations,
                                 std::int64_t now_us)
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
    if (kind == "issued" && (words >> c)) {
      issued_[a] = {b, c};
    } else if (kind == "revoked" && (words >> c)) {
      revoked_ids_.emplace(a, std::pair{b, c});
    } else if (kind == "id" && (words >> c)) {
      // Written before revocations knew their token's expiry: kept as long
      // as the longest lifespan after the revocation.
      revoked_ids_.emplace(a, std::pair{b, c + k_keep_us});
    } else if (kind == "all") {
      revoked_before_[std::stoll(a)] = b;
    } else {
      throw std::runtime_error(file_->string() + ":" + std::to_string(n) + ": malformed");
    }
  }
  file_lines_ = static_cast<std::size_t>(n);
  if (now_us == 0) {
    now_us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count();
  }
  std::lock_guard lock(mu_);
  prune_locked(now_us);
  if (file_lines_ != entries_locked()) {
    save_locked();
    file_lines_ = entries_locked();
  }
  kept_at_prune_ = entries_locked();
}

std::pair<std::string, token_claims> token_authority::issue(std::int64_t uid, const std::string& user,
                                                            std::int64_t lifespan_s, std::int64_t now_us) {
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
  std::lock_guard lock(mu_);
  issued_[c.id] = {uid, c.expires_at};
  try {
    // Not synced: a record lost in a crash only means that its user must
    // revoke it with --revoke-all.
    append_locked("issued " + c.id + " " + std::to_string(uid) + " " + std::to_string(c.expires_at), false, now_us);
  } catch (const std::exception&) {
  }
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

bool token_authority::revoke(std::optional<std::int64_t> uid, const std::string& id, std::int64_t now_us) {
  std::lock_guard lock(mu_);
  const auto it = issued_.find(id);
  const bool alive = it != issued_.end() && it->second.second > now_us / 1'000'000;
  // A user may name only a token of theirs that is still valid: anything
  // else (someone else's id, an expired or unknown one) is refused, so that
  // "revoked" is never said of a revocation that did nothing.
  if (uid && (!alive || it->second.first != *uid)) return false;
  const std::int64_t until = alive ? it->second.second * 1'000'000 : now_us + k_keep_us;
  revoked_ids_.emplace(id, std::pair{uid.value_or(-1), until});
  append_locked("revoked " + id + " " + std::to_string(uid.value_or(-1)) + " " + std::to_string(until), true, now_us);
  return true;
}

void token_authority::revoke_all(std::int64_t uid, std::int64_t now_us) {
  std::lock_guard lock(mu_);
  revoked_before_[uid] = now_us;
  append_locked("all " + std::to_string(uid) + " " + std::to_string(now_us), true, now_us);
}

std::size_t token_authority::entries() const {
  std::lock_guard lock(mu_);
  return entries_locked();
}

std::size_t token_authority::entries_locked() const {
  return issued_.size() + revoked_ids_.size() + revoked_before_.size();
}

void token_authority::prune_locked(std::int64_t now_us) {
  std::erase_if(issued_, [&](const auto& e) { return e.second.second <= now_us / 1'000'000; });
  std::erase_if(revoked_ids_, [&](const auto& e) { return e.second.second <= now_us; });
  std::erase_if(revoked_before_, [&](const auto& e) { return now_us - e.second > k_keep_us; });
}

void token_authority::save_locked() const {
  if (!file_) return;
  std::string text;
  for (const auto& [id, who] : issued_) {
    text += "issued " + id + " " + std::to_string(who.first) + " " + std::to_string(who.second) + "\n";
  }
  for (const auto& [id, who] : revoked_ids_) {
    text += "revoked " + id + " " + std::to_string(who.first) + " " + std::to_string(who.second) + "\n";
  }
  for (const auto& [uid, before] : revoked_before_) {
    text += "all " + std::to_string(uid) + " " + std::to_string(before) + "\n";
  }
  state_dir::write_file(*file_, text, 0600);
}

void token_authority::append_locked(const std::string& line, bool durable, std::int64_t now_us) {
  ++file_lines_;
  // The file (and the tables) hold at most about twice what was alive at
  // the last pruning, plus 1,024 lines: beyond that, what concerns expired
  // tokens goes and the file is written again, so each event costs one
  // appended line, and a rewrite only once per as many events as are kept.
  if (file_lines_ > 2 * kept_at_prune_ + 1024) {
    prune_locked(now_us);
    save_locked();
    file_lines_ = kept_at_prune_ = entries_locked();
    return;
  }
  if (!file_) return;
  const int fd = ::open(file_->c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw std::runtime_error("cannot open " + file_->string() + ": " + std::strerror(errno));
  const std::string text = line + "\n";
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       (!durable || ::fsync(fd) == 0);
  const int err = errno;
  ::close(fd);
  if (!written) throw std::runtime_error("cannot write " + file_->string() + ": " + std::strerror(err));
}

}  // namespace aqs::daemon
