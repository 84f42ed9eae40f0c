// user_limits: what one user may hold in aqsd (issue 28): live jobs, the
// size of one array, a job's text and all of a user's, submissions being
// worked on at once; the aqs.conf lines that set them; the ledger that
// counts them, and the submissions under way by their token.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/settings.hpp"

namespace aqs::daemon {

// The caps, per user (docs/security.md, "Limits: per user in aqsd"). Each
// is the largest value allowed; root (uid 0) is exempt from the per-user
// totals (it is not from MaxArraySize and MaxScriptBytes).
struct user_limits {
  // MaxJobsPerUser: live jobs (PENDING to RUNNING), each array task one.
  std::int64_t max_jobs_per_user = 200'000;
  // MaxArraySize: tasks in one job array.
  std::int64_t max_array_size = 100'000;
  // MaxScriptBytes: one job's text (script, arguments and environment).
  std::int64_t max_script_bytes = std::int64_t{4} << 20;
  // MaxScriptBytesPerUser: the text of a user's live jobs (an array's once).
  std::int64_t max_script_bytes_per_user = std::int64_t{64} << 20;
  // MaxPendingSubmitsPerUser: submissions of one user being stored at once
  // (sent, not yet answered); a resend of one of them does not count.
  std::int64_t max_pending_submits_per_user = 64;
};

// The keys above, as aqs.conf and the one-line refusals name them.
inline constexpr std::string_view k_max_jobs_per_user = "MaxJobsPerUser";
inline constexpr std::string_view k_max_array_size = "MaxArraySize";
inline constexpr std::string_view k_max_script_bytes = "MaxScriptBytes";
inline constexpr std::string_view k_max_script_bytes_per_user = "MaxScriptBytesPerUser";
inline constexpr std::string_view k_max_pending_submits_per_user = "MaxPendingSubmitsPerUser";

// The caps as settings (core/settings.hpp): their aqs.conf keys, flags,
// bounds and help, pointing into `l`.
std::vector<core::setting> user_limit_settings(user_limits& l);

// Counts, per user, what the caps bound; thread-safe (the submit path runs
// on session threads, job ends on the strand).
class user_ledger {
public:
  explicit user_ledger(user_limits limits = {}) : limits_(limits) {}
  const user_limits& limits() const noexcept { return limits_; }

  // Reserves `jobs` live jobs and `bytes` of job text for `uid`: nullopt, or
  // the one-line refusal naming the cap and its value (nothing reserved).
  std::optional<std::string> reserve(std::int32_t uid, std::int64_t jobs, std::int64_t bytes);
  // Gives back what a job (or a refused or repeated submission) held.
  void release(std::int32_t uid, std::int64_t jobs, std::int64_t bytes);
  // Counts without a check (jobs recovered from the store).
  void add(std::int32_t uid, std::int64_t jobs, std::int64_t bytes);
  std::int64_t jobs_of(std::int32_t uid) const;
  std::int64_t bytes_of(std::int32_t uid) const;

  // A submission starts being worked on. `key` (its scoped submit token)
  // already under way: `answer` is kept and called with that submission's
  // reply (it is not worked on twice), and `joined` is returned. Else the
  // pending-submission cap is checked: `refused` with the one-line refusal
  // in `why`, or `started` (call finish_submit with its reply).
  enum class start { started, joined, refused };
  using answer_fn = std::function<void(bool ok, std::int64_t job_id, int error_code, const std::string& message)>;
  start start_submit(std::int32_t uid, const std::string& key, answer_fn answer, std::string& why);
  // The submission `key` of `uid` is answered: every joined resend is
  // answered the same, and the user's pending count goes down.
  void finish_submit(std::int32_t uid, const std::string& key, bool ok, std::int64_t job_id, int error_code,
                     const std::string& message);
  std::int64_t pending_of(std::int32_t uid) const;

private:
  struct usage {
    std::int64_t jobs = 0;
    std::int64_t bytes = 0;
    std::int64_t pending = 0;
  };
  user_limits limits_;
  mutable std::mutex mu_;
  std::unordered_map<std::int32_t, usage> users_;
  std::unordered_map<std::string, std::vector<answer_fn>> under_way_;  // key -> resends waiting
};

}  // namespace aqs::daemon
