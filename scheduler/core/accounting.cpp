// accounting: live jobs' associations and map histories, charged into the ledger and the limit tally.
#include "core/accounting.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "core/scheduler.hpp"

namespace aqs::core {

accounting::accounting(account_tree tree, priority_weights w)
    : idx_(std::move(tree)), w_(w), ledger_(w.half_life_s), tally_(std::make_unique<limit_tally>(idx_)) {
  last_factor_.assign(idx_.tree().associations.size(), 1.0);
}

std::string accounting::key(const std::string& user, const std::string& account) {
  return account + '\n' + user;
}

void accounting::relink(live& l) const {
  l.association = idx_.association_of(l.job.user, l.job.account);
  l.qos = l.job.qos.empty() ? account_index::npos : idx_.qos_of(l.job.qos);
}

limit_job accounting::limit_of(const live& l, std::size_t cpus) const {
  return limit_job{l.job.user, l.association, l.qos, cpus, l.job.walltime_s};
}

void accounting::rebuild_tally() {
  tally_ = std::make_unique<limit_tally>(idx_);
  for (auto& [id, l] : jobs_) {
    if (l.association == account_index::npos) continue;
    tally_->add_submitted(limit_of(l, l.procs));
    if (l.running) tally_->add_running(limit_of(l, l.procs));
  }
}

void accounting::reload(account_tree tree) {
  account_index next(std::move(tree));  // throws before anything changes
  idx_ = std::move(next);
  for (auto& [id, l] : jobs_) relink(l);
  rebuild_tally();
  last_factor_.assign(idx_.tree().associations.size(), 1.0);
}

accounting_admission accounting::submit(const accounting_job& j) {
  accounting_admission a;
  const account_choice c = choose_account(idx_, j.user, j.account);
  if (!c.error.empty()) {
    a.error = c.error;
    return a;
  }
  live l;
  l.job = j;
  l.job.account = c.account;
  relink(l);
  if (!j.qos.empty() && l.qos == account_index::npos) {
    a.error = "unknown QOS " + j.qos;
    return a;
  }
  std::string line;
  a.reason = check_submit(*tally_, limit_of(l, j.cpus), &line);
  if (a.reason != limit_reason::none) {
    a.error = line;
    return a;
  }
  a.account = c.account;
  if (j.walltime_s <= 0) {
    a.time_limit_s = max_wall_of(idx_, limit_of(l, j.cpus));
    if (a.time_limit_s) l.job.walltime_s = *a.time_limit_s;
  }
  tally_->add_submitted(limit_of(l, 0));
  jobs_[j.id] = std::move(l);
  return a;
}

void accounting::adopt(const accounting_job& j) {
  live l;
  l.job = j;
  if (l.job.account.empty()) {
    const account_choice c = choose_account(idx_, j.user, "");
    if (c.error.empty()) l.job.account = c.account;
  }
  relink(l);
  drop(j.id);
  // A user in no account (accounts not enforced) still runs: the job is
  // tracked for its usage only (the record, sacct, the usage reports), with
  // no limit and its own priority, as Slurm records jobs without associations.
  if (l.association != account_index::npos) tally_->add_submitted(limit_of(l, 0));
  jobs_[j.id] = std::move(l);
}

std::optional<limit_job> accounting::limit_job_of(job_id id, std::size_t cpus) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.association == account_index::npos) return std::nullopt;
  return limit_of(it->second, cpus);
}

std::optional<std::string> accounting::account_of(job_id id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.job.account.empty()) return std::nullopt;  // in no account
  return it->second.job.account;
}

void accounting::drop(job_id id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  live& l = it->second;
  if (l.association != account_index::npos) {
    if (l.running) tally_->remove_running(limit_of(l, l.procs));
    tally_->remove_submitted(limit_of(l, l.procs));
  }
  jobs_.erase(it);
}

void accounting::charge_to(live& l, double now) {
  if (now <= l.charged_to) return;
  if (l.running && l.procs > 0) {
    ledger_.charge(key(l.job.user, l.job.account), static_cast<double>(l.procs), l.charged_to, now);
  }
  l.charged_to = now;
}

void accounting::start(job_id id, std::size_t procs, double now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  live& l = it->second;
  l.running = true;
  l.procs = procs;
  l.charged_to = now;
  if (l.first_start < 0) l.first_start = now;
  l.history.push_back({now, procs, false});
  if (l.association != account_index::npos) tally_->add_running(limit_of(l, procs));
}

void accounting::resize(job_id id, std::size_t procs, double now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !it->second.running) return;
  live& l = it->second;
  charge_to(l, now);
  if (l.association != account_index::npos) {
    tally_->remove_running(limit_of(l, l.procs));
    tally_->add_running(limit_of(l, procs));
  }
  l.procs = procs;
  l.history.push_back({now, procs, false});
}

void accounting::suspend(job_id id, double now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !it->second.running) return;
  live& l = it->second;
  charge_to(l, now);
  if (l.association != account_index::npos) tally_->remove_running(limit_of(l, l.procs));
  l.running = false;
  l.history.push_back({now, 0, true});
  l.procs = 0;
}

void accounting::resume(job_id id, std::size_t procs, double now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.running) return;
  live& l = it->second;
  l.running = true;
  l.procs = procs;
  l.charged_to = now;
  l.history.push_back({now, procs, false});
  if (l.association != account_index::npos) tally_->add_running(limit_of(l, procs));
}

std::optional<accounting_charge> accounting::finish(job_id id, double now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  live& l = it->second;
  charge_to(l, now);
  std::optional<accounting_charge> out;
  if (l.first_start >= 0) {
    out = accounting_charge{l.job.user, l.job.account, l.job.qos, l.first_start, now,
                            processor_seconds(l.history, now)};
  }
  drop(id);
  return out;
}

limit_reason accounting::may_start(job_id id, std::size_t procs) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.association == account_index::npos) return limit_reason::none;
  return check_start(*tally_, limit_of(it->second, procs));
}

std::size_t accounting::growth_room(job_id id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.association == account_index::npos) {
    return std::numeric_limits<std::size_t>::max();
  }
  return cpu_headroom(*tally_, limit_of(it->second, it->second.procs));
}

void accounting::restore_usage(const std::string& user, const std::string& account, double cpu_seconds,
                               double start, double end) {
  if (cpu_seconds <= 0) return;
  const double span = std::max(end - start, 1e-9);
  ledger_.charge(key(user, account), cpu_seconds / span, end - span, end);
}

fair_share_result accounting::shares(double now) {
  for (auto& [id, l] : jobs_) charge_to(l, now);
  const account_tree& t = idx_.tree();
  std::vector<double> usage(t.associations.size(), 0.0);
  for (std::size_t a = 0; a < usage.size(); ++a) {
    usage[a] = ledger_.at(key(t.associations[a].user, t.associations[a].account), now);
  }
  fair_share_result fs = fair_share(idx_, usage);
  last_factor_ = fs.assoc_factor;
  return fs;
}

std::optional<job_priority> accounting::priority_of(job_id id, std::size_t cluster_procs, double now) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.association == account_index::npos) return std::nullopt;
  const live& l = it->second;
  std::uint32_t max_qos = 0;
  for (const qos& q : idx_.tree().qos_list) max_qos = std::max(max_qos, q.priority);
  priority_input in;
  in.id = id;
  in.submit_time = l.job.submit_time;
  in.size = l.job.cpus;
  in.base = l.job.base_priority;
  in.fairshare = l.association < last_factor_.size() ? last_factor_[l.association] : 1.0;
  in.partition_priority = l.job.partition_priority;
  in.qos_priority = l.qos == account_index::npos ? 0 : idx_.tree().qos_list[l.qos].priority;
  const priority_context ctx{cluster_procs, max_partition_priority_, max_qos};
  job_priority p;
  p.id = id;
  p.factors = factors_of(in, ctx, w_, now);
  p.value = priority_value(p.factors, w_, l.job.base_priority);
  return p;
}

std::size_t accounting::reprioritise(scheduler& s, double now) {
  if (w_.all_zero()) return 0;  // every priority is its base already
  shares(now);
  const std::size_t procs = s.machine().size();
  std::vector<job_priority> out;
  out.reserve(s.queue().size());
  for (const queue_key& k : s.queue()) {
    if (auto p = priority_of(k.id, procs, now)) out.push_back(*p);
  }
  return apply_priorities(s, out);
}

}  // namespace aqs::core
