// user_limits: the per-user caps, their aqs.conf lines and the ledger.
#include "daemon/user_limits.hpp"

#include <algorithm>

namespace aqs::daemon {

namespace {

std::string over(std::string_view what, std::int64_t value, std::string_view cap, std::int64_t limit) {
  return std::string(what) + " (" + std::to_string(value) + ") would be over " + std::string(cap) + " " +
         std::to_string(limit);
}

}  // namespace

std::vector<core::setting> user_limit_settings(user_limits& l) {
  return {
      core::count_setting(k_max_jobs_per_user, "--max-jobs-per-user", l.max_jobs_per_user,
                          "live jobs one user may have, each array task one", 1, 100'000'000),
      core::count_setting(k_max_array_size, "--max-array-size", l.max_array_size,
                          "tasks in one job array (100000 is also the most)", 1, 100'000),
      core::bytes_setting(k_max_script_bytes, "--max-script-bytes", l.max_script_bytes,
                          "bytes of one job's script, arguments and environment", 1024,
                          static_cast<double>(std::int64_t{16} << 20)),
      core::bytes_setting(k_max_script_bytes_per_user, "--max-script-bytes-per-user", l.max_script_bytes_per_user,
                          "bytes of one user's live jobs' scripts, an array's once", 1024,
                          static_cast<double>(std::int64_t{1} << 40)),
      core::count_setting(k_max_pending_submits_per_user, "--max-pending-submits-per-user",
                          l.max_pending_submits_per_user, "submissions of one user being stored at once", 1, 1'000'000),
  };
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
