// accounting: the one object aqsd will own for issue 32: the account tree,
// each live job's association, QOS and map history, the decayed usage, the
// limit tally, and the multifactor priority of the queue. Pure (the caller
// passes `now` and writes usage records with account_store): aqsd calls it
// at submission, start, resize, suspension, resumption and end, and before
// a decision (or on a period) to reorder the queue.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/accounts.hpp"
#include "core/fairshare.hpp"
#include "core/job.hpp"
#include "core/limits.hpp"
#include "core/priority.hpp"
#include "core/usage.hpp"

namespace aqs::core {

class scheduler;

// What accounting needs of a job at its submission.
struct accounting_job {
  job_id id = 0;
  std::string user;
  std::string account;  // as asked (-A); empty: the user's default
  std::string qos;      // empty: none
  std::size_t cpus = 1;  // what it starts with (min_pe)
  double walltime_s = 0;  // 0: none
  double submit_time = 0;
  int base_priority = 0;  // its own priority (fsub --priority)
  std::uint32_t partition_priority = 0;
};

// The outcome of submit(): the account charged, or the one-line refusal.
struct accounting_admission {
  std::string account;
  std::string error;  // non-empty: refused, nothing recorded
  limit_reason reason = limit_reason::none;
  // For a job without a time limit: the one it runs under (max_wall_of).
  std::optional<std::uint32_t> time_limit_s;
};

// What a finished job is charged (for account_store::record_usage).
struct accounting_charge {
  std::string user, account, qos;
  double start = 0, end = 0;
  double cpu_seconds = 0;
};

class accounting {
public:
  // Throws std::invalid_argument with validate()'s line for a bad tree.
  accounting(account_tree tree, priority_weights w);
  // The tally points into the index: hold it in place (aqsd: a unique_ptr).
  accounting(const accounting&) = delete;
  accounting& operator=(const accounting&) = delete;

  // A changed tree (sacctmgr): jobs keep their association by names; a job
  // whose association is gone keeps running and is no longer limited.
  // Throws std::invalid_argument (nothing changes) for a bad tree.
  void reload(account_tree tree);
  const account_index& index() const noexcept { return idx_; }
  const priority_weights& weights() const noexcept { return w_; }
  // The largest partition PriorityJobFactor (the partition factor's divisor).
  void set_max_partition_priority(std::uint32_t m) noexcept { max_partition_priority_ = m; }

  // Chooses the account (core::choose_account), checks the QOS exists and
  // the submission limits; on success the job is tracked as pending.
  accounting_admission submit(const accounting_job& j);
  // Tracks a job as it was stored (after a restart, or an array's task
  // split off its record): no check, its account as given (the user's
  // default when empty). A job whose association is unknown (a user in no
  // account) is tracked for its usage only: no limit, no priority of ours,
  // charged with the account it was given (usually none).
  void adopt(const accounting_job& j);
  // Forgets a job that was refused later or cancelled while pending.
  void drop(job_id id);
  // Whether the job is tracked, and what it is to the limits holding `cpus`
  // (nullopt: untracked, or its association is gone).
  bool tracks(job_id id) const { return jobs_.count(id) != 0; }
  std::optional<limit_job> limit_job_of(job_id id, std::size_t cpus) const;
  // The account a tracked job is charged to.
  std::optional<std::string> account_of(job_id id) const;

  // The job starts on `procs` processors at `now`; resizes, suspension,
  // resumption and the end follow. Unknown jobs are ignored (a job submitted
  // before accounting existed).
  void start(job_id id, std::size_t procs, double now);
  void resize(job_id id, std::size_t procs, double now);
  void suspend(job_id id, double now);
  void resume(job_id id, std::size_t procs, double now);
  // Ends it: the charge (nullopt for an unknown job or one that never ran).
  std::optional<accounting_charge> finish(job_id id, double now);

  // Whether a pending job may start now with `procs` (Slurm's reason otherwise).
  limit_reason may_start(job_id id, std::size_t procs) const;
  // How many processors a running job may still gain under its CPU limits.
  std::size_t growth_room(job_id id) const;

  // Adds usage already recorded (account_store::usage_since at start-up):
  // cpu_seconds of a job that ended at `end`, spread evenly from `start`.
  void restore_usage(const std::string& user, const std::string& account, double cpu_seconds, double start,
                     double end);
  // Charges running jobs up to `now` and returns fair share over the tree.
  fair_share_result shares(double now);
  // Gives every queued job of `s` its multifactor priority at `now`
  // (all weights 0: the base, so nothing moves). Returns how many changed.
  std::size_t reprioritise(scheduler& s, double now);
  // One job's factors and priority (sprio), from the last shares(); nullopt if unknown.
  std::optional<job_priority> priority_of(job_id id, std::size_t cluster_procs, double now) const;

private:
  struct live {
    accounting_job job;
    std::size_t association = account_index::npos;
    std::size_t qos = account_index::npos;
    bool running = false;
    std::size_t procs = 0;
    std::vector<held_segment> history;
    double charged_to = 0;  // ledger charged up to here
    double first_start = -1;
  };
  static std::string key(const std::string& user, const std::string& account);
  limit_job limit_of(const live& l, std::size_t cpus) const;
  void charge_to(live& l, double now);
  void rebuild_tally();
  void relink(live& l) const;

  account_index idx_;
  priority_weights w_;
  usage_ledger ledger_;
  std::unique_ptr<limit_tally> tally_;  // over idx_, rebuilt with it
  std::unordered_map<job_id, live> jobs_;
  std::vector<double> last_factor_;
  std::uint32_t max_partition_priority_ = 0;  // fair-share factor per association, from the last shares()
};

}  // namespace aqs::core
