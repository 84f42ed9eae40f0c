// limits: the tally of running and submitted jobs and the checks against it.
#include "core/limits.hpp"

#include <algorithm>
#include <stdexcept>

namespace aqs::core {

std::string_view to_string(limit_reason r) noexcept {
  switch (r) {
    case limit_reason::none: return "None";
    case limit_reason::qos_max_wall: return "QOSMaxWallDurationPerJobLimit";
    case limit_reason::qos_max_jobs_per_user: return "QOSMaxJobsPerUserLimit";
    case limit_reason::qos_grp_cpu: return "QOSGrpCpuLimit";
    case limit_reason::qos_max_cpu_per_user: return "QOSMaxCpuPerUserLimit";
    case limit_reason::assoc_max_wall: return "AssocMaxWallDurationPerJobLimit";
    case limit_reason::assoc_max_jobs: return "AssocMaxJobsLimit";
    case limit_reason::assoc_grp_cpu: return "AssocGrpCpuLimit";
    case limit_reason::qos_max_submit: return "QOSMaxSubmitJobPerUserLimit";
    case limit_reason::assoc_max_submit: return "AssocMaxSubmitJobLimit";
  }
  return "None";
}

limit_tally::limit_tally(const account_index& idx) : idx_(idx) {
  const std::size_t nu = idx.tree().associations.size();
  assoc_jobs_.assign(nu, 0);
  assoc_submitted_.assign(nu, 0);
  assoc_cpus_.assign(nu, 0);
  acct_cpus_.assign(idx.tree().accounts.size(), 0);
  qos_cpus_.assign(idx.tree().qos_list.size(), 0);
}

namespace {

void bump(std::uint64_t& v, std::uint64_t by, int sign) {
  if (sign > 0) {
    v += by;
  } else {
    v = v >= by ? v - by : 0;  // a caller's double removal must not wrap
  }
}

}  // namespace

void limit_tally::submitted(const limit_job& j, int sign) {
  if (j.association >= assoc_jobs_.size()) throw std::invalid_argument("limit_tally: unknown association");
  bump(assoc_submitted_[j.association], 1, sign);
  if (j.qos != account_index::npos) bump(qos_user_[key(j.qos, idx_.user_number(j.association))].submitted, 1, sign);
}

void limit_tally::running(const limit_job& j, int sign) {
  if (j.association >= assoc_jobs_.size()) throw std::invalid_argument("limit_tally: unknown association");
  bump(assoc_jobs_[j.association], 1, sign);
  bump(assoc_cpus_[j.association], j.cpus, sign);
  const std::size_t user = idx_.user_number(j.association);
  for (std::size_t a : idx_.path_of(idx_.account_of_association(j.association))) {
    bump(acct_cpus_[a], j.cpus, sign);
    bump(acct_user_[key(a, user)].cpus, j.cpus, sign);
  }
  if (j.qos != account_index::npos) {
    bump(qos_cpus_.at(j.qos), j.cpus, sign);
    per_user& u = qos_user_[key(j.qos, user)];
    bump(u.jobs, 1, sign);
    bump(u.cpus, j.cpus, sign);
  }
}

std::uint64_t limit_tally::count(const std::unordered_map<std::uint64_t, per_user>& m, std::size_t i,
                                 std::size_t user, std::uint64_t per_user::*what) const {
  auto it = m.find(key(i, user));
  return it == m.end() ? 0 : it->second.*what;
}

std::uint64_t limit_tally::account_user_cpus(std::size_t acct, std::size_t user) const {
  return count(acct_user_, acct, user, &per_user::cpus);
}
std::uint64_t limit_tally::qos_user_jobs(std::size_t q, std::size_t user) const {
  return count(qos_user_, q, user, &per_user::jobs);
}
std::uint64_t limit_tally::qos_user_submitted(std::size_t q, std::size_t user) const {
  return count(qos_user_, q, user, &per_user::submitted);
}
std::uint64_t limit_tally::qos_user_cpus(std::size_t q, std::size_t user) const {
  return count(qos_user_, q, user, &per_user::cpus);
}

namespace {

// `have` is only asked for when the limit is set: most limits are not, and
// the per-user counts are hash lookups (bench_priority checks 100,000 jobs).
template <class Have>
bool over(const std::optional<std::uint32_t>& limit, Have have, std::uint64_t more) {
  return limit && have() + more > *limit;
}

bool wall_over(const std::optional<std::uint32_t>& limit, double walltime_s) {
  // A job without a time limit is given the smallest MaxWall at submission
  // (max_wall_of), as Slurm does; here it is not over.
  return limit && walltime_s > 0 && walltime_s > *limit;
}

}  // namespace

limit_reason check_start(const limit_tally& t, const limit_job& j) {
  const account_index& idx = t.index();
  const account_tree& tree = idx.tree();
  const std::size_t user = idx.user_number(j.association);
  if (j.qos != account_index::npos) {
    const limits& q = tree.qos_list.at(j.qos).lim;
    if (wall_over(q.max_wall_s, j.walltime_s)) return limit_reason::qos_max_wall;
    if (over(q.max_jobs, [&] { return t.qos_user_jobs(j.qos, user); }, 1)) return limit_reason::qos_max_jobs_per_user;
    if (over(q.grp_cpus, [&] { return t.qos_cpus(j.qos); }, j.cpus)) return limit_reason::qos_grp_cpu;
    if (over(q.max_cpus_per_user, [&] { return t.qos_user_cpus(j.qos, user); }, j.cpus)) {
      return limit_reason::qos_max_cpu_per_user;
    }
  }
  const limits& u = idx.effective_user_limits(j.association);
  if (wall_over(u.max_wall_s, j.walltime_s)) return limit_reason::assoc_max_wall;
  if (over(u.max_jobs, [&] { return t.assoc_running_jobs(j.association); }, 1)) return limit_reason::assoc_max_jobs;
  auto mine = [&] { return t.assoc_cpus(j.association); };
  if (over(u.grp_cpus, mine, j.cpus) || over(u.max_cpus_per_user, mine, j.cpus)) return limit_reason::assoc_grp_cpu;
  for (std::size_t a : idx.path_of(idx.account_of_association(j.association))) {
    const limits& al = tree.accounts[a].lim;
    if (over(al.grp_cpus, [&] { return t.account_cpus(a); }, j.cpus)) return limit_reason::assoc_grp_cpu;
    if (over(al.max_cpus_per_user, [&] { return t.account_user_cpus(a, user); }, j.cpus)) {
      return limit_reason::assoc_grp_cpu;
    }
  }
  return limit_reason::none;
}

limit_reason check_submit(const limit_tally& t, const limit_job& j, std::string* line) {
  const account_index& idx = t.index();
  const account_tree& tree = idx.tree();
  const user_association& ua = tree.associations.at(j.association);
  if (j.qos != account_index::npos) {
    const qos& q = tree.qos_list.at(j.qos);
    const std::uint64_t have = t.qos_user_submitted(j.qos, idx.user_number(j.association));
    if (over(q.lim.max_submit_jobs, [&] { return have; }, 1)) {
      if (line) {
        *line = "user " + ua.user + " already has " + std::to_string(have) + " jobs submitted in QOS " + q.name +
                ", its MaxSubmitJobs (QOSMaxSubmitJobPerUserLimit)";
      }
      return limit_reason::qos_max_submit;
    }
  }
  const limits& u = idx.effective_user_limits(j.association);
  const std::uint64_t have = t.assoc_submitted(j.association);
  if (over(u.max_submit_jobs, [&] { return have; }, 1)) {
    if (line) {
      *line = "user " + ua.user + " in account " + ua.account + " already has " + std::to_string(have) +
              " jobs submitted, its MaxSubmitJobs (AssocMaxSubmitJobLimit)";
    }
    return limit_reason::assoc_max_submit;
  }
  return limit_reason::none;
}

std::size_t cpu_headroom(const limit_tally& t, const limit_job& j) {
  const account_index& idx = t.index();
  const account_tree& tree = idx.tree();
  const std::size_t user = idx.user_number(j.association);
  std::size_t room = std::numeric_limits<std::size_t>::max();
  auto cap = [&room](const std::optional<std::uint32_t>& limit, std::uint64_t have) {
    if (!limit) return;
    room = std::min<std::size_t>(room, have >= *limit ? 0 : static_cast<std::size_t>(*limit - have));
  };
  if (j.qos != account_index::npos) {
    const limits& q = tree.qos_list.at(j.qos).lim;
    cap(q.grp_cpus, t.qos_cpus(j.qos));
    cap(q.max_cpus_per_user, t.qos_user_cpus(j.qos, user));
  }
  const limits& u = idx.effective_user_limits(j.association);
  cap(u.grp_cpus, t.assoc_cpus(j.association));
  cap(u.max_cpus_per_user, t.assoc_cpus(j.association));
  for (std::size_t a : idx.path_of(idx.account_of_association(j.association))) {
    cap(tree.accounts[a].lim.grp_cpus, t.account_cpus(a));
    cap(tree.accounts[a].lim.max_cpus_per_user, t.account_user_cpus(a, user));
  }
  return room;
}

}  // namespace aqs::core

namespace aqs::core {

std::optional<std::uint32_t> max_wall_of(const account_index& idx, const limit_job& j) {
  std::optional<std::uint32_t> out = idx.effective_user_limits(j.association).max_wall_s;
  if (j.qos != account_index::npos) {
    const auto& q = idx.tree().qos_list.at(j.qos).lim.max_wall_s;
    if (q && (!out || *q < *out)) out = q;
  }
  return out;
}

}  // namespace aqs::core
