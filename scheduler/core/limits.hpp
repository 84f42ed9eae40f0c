// limits: whether a job may start (or be submitted) under its association's
// and QOS's limits, with Slurm's reason names, and how far an adaptive job
// may grow. Pure: the caller keeps a limit_tally of what runs and waits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/accounts.hpp"

namespace aqs::core {

// Why a job waits (or is refused), named as Slurm's job_reason_string()
// names them (to_string). The closed list of what AQS enforces.
enum class limit_reason : unsigned char {
  none,
  qos_max_wall,          // QOSMaxWallDurationPerJobLimit
  qos_max_jobs_per_user, // QOSMaxJobsPerUserLimit
  qos_grp_cpu,           // QOSGrpCpuLimit
  qos_max_cpu_per_user,  // QOSMaxCpuPerUserLimit
  assoc_max_wall,        // AssocMaxWallDurationPerJobLimit
  assoc_max_jobs,        // AssocMaxJobsLimit
  assoc_grp_cpu,         // AssocGrpCpuLimit (also an account's MaxTRESPerUser: Slurm has no per-user association reason)
  qos_max_submit,        // QOSMaxSubmitJobPerUserLimit (submission)
  assoc_max_submit,      // AssocMaxSubmitJobLimit (submission)
};
inline constexpr limit_reason k_all_limit_reasons[] = {
    limit_reason::none,           limit_reason::qos_max_wall,    limit_reason::qos_max_jobs_per_user,
    limit_reason::qos_grp_cpu,    limit_reason::qos_max_cpu_per_user, limit_reason::assoc_max_wall,
    limit_reason::assoc_max_jobs, limit_reason::assoc_grp_cpu,   limit_reason::qos_max_submit,
    limit_reason::assoc_max_submit,
};
// Slurm's name ("AssocGrpCpuLimit"); "None" for none.
std::string_view to_string(limit_reason r) noexcept;

// A job as the limits see it.
struct limit_job {
  std::string user;  // for messages: the association's user is the one counted
  std::size_t association = account_index::npos;  // its (user, account) association
  std::size_t qos = account_index::npos;          // npos: no QOS
  std::size_t cpus = 0;                           // what it holds, or would start with
  double walltime_s = 0;                          // its time limit, 0: none
};

// What runs and what waits, per association, account subtree, QOS and user.
// Add a job when it is submitted (add_submitted) and when it starts
// (add_running, with what it holds), take it away when it ends; a resize is
// remove_running then add_running with the new count.
class limit_tally {
public:
  explicit limit_tally(const account_index& idx);
  void add_submitted(const limit_job& j) { submitted(j, +1); }
  void remove_submitted(const limit_job& j) { submitted(j, -1); }
  void add_running(const limit_job& j) { running(j, +1); }
  void remove_running(const limit_job& j) { running(j, -1); }

  // Read by the checks (and by sshare-style views). A user is given by its
  // number (account_index::user_number of one of its associations).
  std::uint64_t assoc_running_jobs(std::size_t a) const { return assoc_jobs_.at(a); }
  std::uint64_t assoc_submitted(std::size_t a) const { return assoc_submitted_.at(a); }
  std::uint64_t assoc_cpus(std::size_t a) const { return assoc_cpus_.at(a); }
  std::uint64_t account_cpus(std::size_t acct) const { return acct_cpus_.at(acct); }
  std::uint64_t account_user_cpus(std::size_t acct, std::size_t user) const;
  std::uint64_t qos_cpus(std::size_t q) const { return qos_cpus_.at(q); }
  std::uint64_t qos_user_jobs(std::size_t q, std::size_t user) const;
  std::uint64_t qos_user_submitted(std::size_t q, std::size_t user) const;
  std::uint64_t qos_user_cpus(std::size_t q, std::size_t user) const;
  const account_index& index() const noexcept { return idx_; }

private:
  struct per_user {
    std::uint64_t jobs = 0, submitted = 0, cpus = 0;
  };
  void submitted(const limit_job& j, int sign);
  void running(const limit_job& j, int sign);
  std::uint64_t key(std::size_t i, std::size_t user) const { return std::uint64_t{i} * idx_.users() + user; }
  // One count of (i, user) in `m`; 0 when that pair has none.
  std::uint64_t count(const std::unordered_map<std::uint64_t, per_user>& m, std::size_t i, std::size_t user,
                      std::uint64_t per_user::*what) const;
  const account_index& idx_;
  std::vector<std::uint64_t> assoc_jobs_, assoc_submitted_, assoc_cpus_, acct_cpus_, qos_cpus_;
  std::unordered_map<std::uint64_t, per_user> acct_user_, qos_user_;
};

limit_reason check_start(const limit_tally& t, const limit_job& j);

// Whether `j` (not yet counted as submitted) may be submitted: the QOS's
// MaxSubmitJobs per user, then the association's (inherited) MaxSubmitJobs.
// `line` gets the one-line refusal ("user alice in account physics already
// has 10 jobs submitted, its MaxSubmitJobs (AssocMaxSubmitJobLimit)").
limit_reason check_submit(const limit_tally& t, const limit_job& j, std::string* line = nullptr);

// The time limit a job without one runs under: the smallest MaxWall of its
// QOS and its association (inherited); nullopt when neither sets one. aqsd
// gives it to such a job at submission, as Slurm does.
std::optional<std::uint32_t> max_wall_of(const account_index& idx, const limit_job& j);

// How many processors more than it holds (j.cpus, already counted as
// running) the job may be given under every CPU limit above it: the
// smallest room left; std::numeric_limits<std::size_t>::max() when no CPU
// limit applies. An adaptive job's growth stops there.
std::size_t cpu_headroom(const limit_tally& t, const limit_job& j);

}  // namespace aqs::core
