// user_limits: the per-user caps, their aqs.conf lines and the ledger.
#include "daemon/user_limits.hpp"

#include <cctype>
#include <limits>
#include <stdexcept>

namespace aqs::daemon {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// "100000", "64M", "4k": a whole number, with K, M or G (powers of 1024)
// where `bytes`; nullopt if it is not one.
std::optional<std::int64_t> number(std::string_view v, bool bytes) {
  if (v.empty()) return std::nullopt;
  std::int64_t mult = 1;
  if (bytes) {
    switch (std::tolower(static_cast<unsigned char>(v.back()))) {
      case 'k': mult = std::int64_t{1} << 10; break;
      case 'm': mult = std::int64_t{1} << 20; break;
      case 'g': mult = std::int64_t{1} << 30; break;
      default: break;
    }
    if (mult != 1) v.remove_suffix(1);
  }
  if (v.empty() || v.size() > 15) return std::nullopt;
  std::int64_t n = 0;
  for (char ch : v) {
    if (ch < '0' || ch > '9') return std::nullopt;
    n = n * 10 + (ch - '0');
  }
  if (n > std::numeric_limits<std::int64_t>::max() / mult) return std::nullopt;
  return n * mult;
}

struct key_info {
  std::string_view name;
  std::int64_t user_limits::*field;
  bool bytes;
  std::int64_t least;
};
constexpr key_info k_keys[] = {
    {k_max_jobs_per_user, &user_limits::max_jobs_per_user, false, 1},
    {k_max_array_size, &user_limits::max_array_size, false, 1},
    {k_max_script_bytes, &user_limits::max_script_bytes, true, 1024},
    {k_max_script_bytes_per_user, &user_limits::max_script_bytes_per_user, true, 1024},
    {k_max_pending_submits_per_user, &user_limits::max_pending_submits_per_user, false, 1},
};

const key_info* find_key(std::string_view key) {
  const std::string k = lower(key);
  for (const auto& info : k_keys) {
    if (lower(info.name) == k) return &info;
  }
  return nullptr;
}

std::string over(std::string_view what, std::int64_t value, std::string_view cap, std::int64_t limit) {
  return std::string(what) + " (" + std::to_string(value) + ") would be over " + std::string(cap) + " " +
         std::to_string(limit);
}

}  // namespace

std::string take_limit_lines(std::string_view text, std::string_view file, user_limits& out) {
  std::string rest;
  rest.reserve(text.size());
  std::size_t line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    std::string_view body = line.substr(0, line.find('#'));
    // The line's KEY=VALUE words.
    std::vector<std::pair<std::string_view, std::string_view>> words;
    bool limits = false, others = false;
    std::size_t i = 0;
    while (i < body.size()) {
      while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
      std::size_t j = i;
      while (j < body.size() && !std::isspace(static_cast<unsigned char>(body[j]))) ++j;
      if (j > i) {
        const std::string_view word = body.substr(i, j - i);
        const auto eq = word.find('=');
        const std::string_view key = word.substr(0, eq);
        if (find_key(key) != nullptr) {
          limits = true;
          words.emplace_back(key, eq == std::string_view::npos ? std::string_view{} : word.substr(eq + 1));
        } else {
          others = true;
        }
      }
      i = j;
    }
    const std::string where = std::string(file) + ":" + std::to_string(line_no) + ": ";
    if (limits && others) {
      throw std::invalid_argument(where + "the per-user limits (" + std::string(words.front().first) +
                                  ", ...) go on lines of their own, not with partition keys");
    }
    if (!limits) {
      rest.append(line);
      if (nl != std::string_view::npos) rest.push_back('\n');
      continue;
    }
    for (const auto& [key, value] : words) {
      const key_info& info = *find_key(key);
      const auto n = number(value, info.bytes);
      if (!n || *n < info.least) {
        throw std::invalid_argument(where + "invalid " + std::string(info.name) + "='" + std::string(value) +
                                    "' (a whole number of at least " + std::to_string(info.least) +
                                    (info.bytes ? ", K, M or G for bytes)" : ")"));
      }
      out.*info.field = *n;
    }
    if (nl != std::string_view::npos) rest.push_back('\n');  // the line stays, empty
  }
  return rest;
}

std::optional<std::string> user_ledger::reserve(std::int32_t uid, std::int64_t jobs, std::int64_t bytes) {
  std::lock_guard lk(mu_);
  usage& u = users_[uid];
  if (uid != 0) {
    if (u.jobs + jobs > limits_.max_jobs_per_user) {
      return over("your live jobs", u.jobs + jobs, k_max_jobs_per_user, limits_.max_jobs_per_user);
    }
    if (u.bytes + bytes > limits_.max_script_bytes_per_user) {
      return over("the bytes of your live jobs' scripts and environments", u.bytes + bytes,
                  k_max_script_bytes_per_user, limits_.max_script_bytes_per_user);
    }
  }
  u.jobs += jobs;
  u.bytes += bytes;
  return std::nullopt;
}

void user_ledger::release(std::int32_t uid, std::int64_t jobs, std::int64_t bytes) {
  std::lock_guard lk(mu_);
  const auto it = users_.find(uid);
  if (it == users_.end()) return;
  it->second.jobs = std::max<std::int64_t>(0, it->second.jobs - jobs);
  it->second.bytes = std::max<std::int64_t>(0, it->second.bytes - bytes);
  if (it->second.jobs == 0 && it->second.bytes == 0 && it->second.pending == 0) users_.erase(it);
}

void user_ledger::add(std::int32_t uid, std::int64_t jobs, std::int64_t bytes) {
  std::lock_guard lk(mu_);
  usage& u = users_[uid];
  u.jobs += jobs;
  u.bytes += bytes;
}

std::int64_t user_ledger::jobs_of(std::int32_t uid) const {
  std::lock_guard lk(mu_);
  const auto it = users_.find(uid);
  return it == users_.end() ? 0 : it->second.jobs;
}

std::int64_t user_ledger::bytes_of(std::int32_t uid) const {
  std::lock_guard lk(mu_);
  const auto it = users_.find(uid);
  return it == users_.end() ? 0 : it->second.bytes;
}

std::int64_t user_ledger::pending_of(std::int32_t uid) const {
  std::lock_guard lk(mu_);
  const auto it = users_.find(uid);
  return it == users_.end() ? 0 : it->second.pending;
}

user_ledger::start user_ledger::start_submit(std::int32_t uid, const std::string& key, answer_fn answer,
                                             std::string& why) {
  std::lock_guard lk(mu_);
  if (!key.empty()) {
    if (const auto it = under_way_.find(key); it != under_way_.end()) {
      it->second.push_back(std::move(answer));
      return start::joined;
    }
  }
  usage& u = users_[uid];
  if (uid != 0 && u.pending + 1 > limits_.max_pending_submits_per_user) {
    why = over("your submissions being stored at once", u.pending + 1, k_max_pending_submits_per_user,
               limits_.max_pending_submits_per_user) + "; wait for an answer";
    return start::refused;
  }
  ++u.pending;
  if (!key.empty()) under_way_.emplace(key, std::vector<answer_fn>{});
  return start::started;
}

void user_ledger::finish_submit(std::int32_t uid, const std::string& key, bool ok, std::int64_t job_id,
                                int error_code, const std::string& message) {
  std::vector<answer_fn> waiting;
  {
    std::lock_guard lk(mu_);
    if (!key.empty()) {
      if (const auto it = under_way_.find(key); it != under_way_.end()) {
        waiting = std::move(it->second);
        under_way_.erase(it);
      }
    }
    if (const auto it = users_.find(uid); it != users_.end() && it->second.pending > 0) --it->second.pending;
  }
  for (auto& a : waiting) a(ok, job_id, error_code, message);
}

}  // namespace aqs::daemon
