// accounts: the account tree (accounts, users' associations, QOS) with its
// limits, how limits are typed (sacctmgr's key=value), and the tree's checks.
// Pure: the store keeps the rows, the daemon builds an account_index from
// them, fair share (fairshare.hpp) and limits (limits.hpp) read the index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace aqs::core {

// The account every tree hangs from, as in Slurm.
inline constexpr std::string_view k_root_account = "root";

// Bounds past which a limit is refused as absurd (a typo, not a policy):
// counts of jobs, processors, shares and priorities, and MaxWall (a year).
inline constexpr std::uint32_t k_max_limit_count = 10'000'000;
inline constexpr std::uint32_t k_max_limit_cpus = 1u << 24;
inline constexpr std::uint32_t k_max_shares = 1'000'000;
inline constexpr std::uint32_t k_max_qos_priority = 1'000'000;
inline constexpr std::uint32_t k_max_limit_wall_s = 366u * 24 * 3600;

// Slurm's limits that AQS enforces; unset: no limit at this level. On an
// association: MaxJobs/MaxSubmitJobs/MaxWall hold for each user association
// (an account's are inherited by the users below it that set none);
// GrpTRES=cpu=N bounds the processors held by every job below it;
// MaxTRESPerUser=cpu=N the processors one user holds below it. On a QOS:
// MaxJobs and MaxSubmitJobs count per user (Slurm's MaxJobsPerUser and
// MaxSubmitJobsPerUser), GrpTRES all jobs of the QOS, MaxTRESPerUser one
// user's jobs of the QOS.
struct limits {
  std::optional<std::uint32_t> max_jobs;
  std::optional<std::uint32_t> max_submit_jobs;
  std::optional<std::uint32_t> max_wall_s;
  std::optional<std::uint32_t> grp_cpus;
  std::optional<std::uint32_t> max_cpus_per_user;
  friend bool operator==(const limits&, const limits&) = default;
};

struct account {
  std::string name;
  std::string parent;  // empty only for root
  std::uint32_t shares = 1;
  limits lim;
  std::string description;
  std::string organization;
};

// A user in an account (Slurm's user association): shares and limits of its own.
struct user_association {
  std::string user;
  std::string account;
  std::uint32_t shares = 1;
  limits lim;
};

struct qos {
  std::string name;
  std::uint32_t priority = 0;
  limits lim;
  std::string description;
};

struct account_tree {
  std::vector<account> accounts;
  std::vector<user_association> associations;
  std::vector<qos> qos_list;
  // user -> default account (the account a job without -A is charged to).
  std::unordered_map<std::string, std::string> default_account;
};

// Sets one sacctmgr key on `l` from its text, keys case-insensitive:
// MaxJobs, MaxSubmitJobs (MaxSubmit), MaxWall (Slurm's time forms, or
// minutes), GrpTRES=cpu=N, MaxTRESPerUser=cpu=N (MaxTRESPU). "-1" clears a
// limit, as in Slurm. Returns nullopt when `key` is not a limit, else
// the empty string on success or the one-line reason it was refused
// ("MaxJobs must be a whole number from 0 to 10000000 (or -1 to clear), not '-5'").
// Nothing is changed when refused.
std::optional<std::string> set_limit(limits& l, std::string_view key, std::string_view value);
// The shares / QOS priority from text, within bounds; the one-line reason or the number.
std::optional<std::string> parse_shares(std::string_view text, std::uint32_t& out);
std::optional<std::string> parse_qos_priority(std::string_view text, std::uint32_t& out);

// Names: accounts, users and QOS are 1..64 of [A-Za-z0-9._-], not starting
// with '-' (Slurm lower-cases account names; AQS keeps them as typed and
// refuses what would need quoting). The one-line reason, or nullopt.
std::optional<std::string> check_name(std::string_view what, std::string_view name);

// Checks the whole tree, returning the first problem as one line, or
// nullopt: a missing or parented root, duplicate accounts, QOS or
// associations, an unknown parent, a cycle (no account may be its own
// ancestor), an association of an unknown account, a default account the
// user is not in, a bad name, limits or shares past their bounds.
std::optional<std::string> validate(const account_tree& t);

// The tree made fast to walk: indices instead of names. Built only from a
// tree validate() accepts.
class account_index {
public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  // Throws std::invalid_argument with validate()'s line.
  explicit account_index(account_tree t);

  const account_tree& tree() const noexcept { return t_; }
  std::size_t account_of(std::string_view name) const;  // npos if unknown
  std::size_t qos_of(std::string_view name) const;      // npos if unknown
  // The association of user in account, npos if the user is not in it.
  std::size_t association_of(std::string_view user, std::string_view account) const;
  // The accounts a user is in, by name order (for "not in account X; yours: a, b").
  std::vector<std::string> accounts_of(std::string_view user) const;
  // Parent index of account i (npos for root) and its children.
  std::size_t parent(std::size_t account) const { return parent_[account]; }
  const std::vector<std::size_t>& child_accounts(std::size_t account) const { return child_accounts_[account]; }
  const std::vector<std::size_t>& child_associations(std::size_t account) const { return child_assocs_[account]; }
  std::size_t root() const noexcept { return root_; }
  // Account i and its ancestors up to root, i first.
  std::vector<std::size_t> path(std::size_t account) const;
  // The limit a user association runs under for MaxJobs, MaxSubmitJobs and
  // MaxWall: its own, else the nearest ancestor account's that sets it.
  // Computed once, with the index.
  const limits& effective_user_limits(std::size_t association) const { return effective_.at(association); }
  // The account of association a, and the path of account i (i first, root last), computed once.
  std::size_t account_of_association(std::size_t a) const { return assoc_account_.at(a); }
  const std::vector<std::size_t>& path_of(std::size_t account) const { return paths_.at(account); }
  // A number per distinct user (0..users()-1) and that of association a's user.
  std::size_t user_number(std::size_t a) const { return assoc_user_.at(a); }
  std::size_t users() const noexcept { return nusers_; }

private:
  account_tree t_;
  std::unordered_map<std::string, std::size_t> accounts_, qos_, assocs_;  // assoc key: user + '\n' + account
  std::vector<std::size_t> parent_;
  std::vector<std::vector<std::size_t>> child_accounts_, child_assocs_;
  std::size_t root_ = npos;
  std::vector<limits> effective_;
  std::vector<std::size_t> assoc_account_, assoc_user_;
  std::vector<std::vector<std::size_t>> paths_;
  std::size_t nusers_ = 0;
};

// The account a job is charged to: `asked` when the user is in it, else
// (asked empty) the user's default account. Returns the account's name, or
// the one-line refusal naming the user's accounts ("user alice is not in
// account physics (alice's accounts: chem, bio)"; "user bob has no account").
struct account_choice {
  std::string account;
  std::string error;  // non-empty: refused
};
account_choice choose_account(const account_index& idx, std::string_view user, std::string_view asked);

}  // namespace aqs::core
