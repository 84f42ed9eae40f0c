// accounts: limit parsing, name checks, tree validation and the index over a valid tree.
#include "core/accounts.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "core/text_util.hpp"
#include "core/time_limit.hpp"
#include "core/usage_error.hpp"

namespace aqs::core {

namespace {

// A whole number in 0..most, or nullopt.
std::optional<std::uint32_t> whole(std::string_view text, std::uint32_t most) {
  if (text.empty() || text.size() > 10) return std::nullopt;
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || p != text.data() + text.size() || v > most) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

// "cpu=N" (the only TRES AQS limits so far); -1 clears.
std::optional<std::string> set_cpu_tres(std::optional<std::uint32_t>& slot, std::string_view key,
                                        std::string_view value) {
  const std::string lower = ascii_lower(value);
  const std::string_view v = lower;
  const std::string bad = std::string(key) + " takes cpu=N with N from 0 to " + std::to_string(k_max_limit_cpus) +
                          " (or cpu=-1 to clear), not " + quoted(value);
  if (v.substr(0, 4) != "cpu=") return bad;
  const std::string_view n = v.substr(4);
  if (n == "-1") {
    slot.reset();
    return std::string{};
  }
  auto x = whole(n, k_max_limit_cpus);
  if (!x) return bad;
  slot = *x;
  return std::string{};
}

std::optional<std::string> set_count(std::optional<std::uint32_t>& slot, std::string_view key,
                                     std::string_view value) {
  if (value == "-1") {
    slot.reset();
    return std::string{};
  }
  auto x = whole(value, k_max_limit_count);
  if (!x) {
    return std::string(key) + " must be a whole number from 0 to " + std::to_string(k_max_limit_count) +
           " (or -1 to clear), not " + quoted(value);
  }
  slot = *x;
  return std::string{};
}

std::string limits_problem(const limits& l, const std::string& where) {
  auto over = [](const std::optional<std::uint32_t>& v, std::uint32_t most) { return v && *v > most; };
  if (over(l.max_jobs, k_max_limit_count)) return where + ": MaxJobs is past " + std::to_string(k_max_limit_count);
  if (over(l.max_submit_jobs, k_max_limit_count)) {
    return where + ": MaxSubmitJobs is past " + std::to_string(k_max_limit_count);
  }
  if (over(l.max_wall_s, k_max_limit_wall_s)) return where + ": MaxWall is past 366 days";
  if (over(l.grp_cpus, k_max_limit_cpus)) return where + ": GrpTRES cpu is past " + std::to_string(k_max_limit_cpus);
  if (over(l.max_cpus_per_user, k_max_limit_cpus)) {
    return where + ": MaxTRESPerUser cpu is past " + std::to_string(k_max_limit_cpus);
  }
  return {};
}

std::string assoc_key(std::string_view user, std::string_view account) {
  std::string k(user);
  k += '\n';
  k += account;
  return k;
}

}  // namespace

std::optional<std::string> set_limit(limits& l, std::string_view key, std::string_view value) {
  const std::string k = ascii_lower(key);
  if (k == "maxjobs") return set_count(l.max_jobs, "MaxJobs", value);
  if (k == "maxsubmitjobs" || k == "maxsubmit") return set_count(l.max_submit_jobs, "MaxSubmitJobs", value);
  if (k == "grptres") return set_cpu_tres(l.grp_cpus, "GrpTRES", value);
  if (k == "maxtresperuser" || k == "maxtrespu") return set_cpu_tres(l.max_cpus_per_user, "MaxTRESPerUser", value);
  if (k == "maxwall" || k == "maxwalldurationperjob") {
    if (value == "-1") {
      l.max_wall_s.reset();
      return std::string{};
    }
    std::int64_t s = 0;
    try {
      s = parse_time_limit(value);
    } catch (const usage_error&) {
      return "MaxWall takes minutes or [days-]hours:minutes:seconds (or -1 to clear), not " + quoted(value);
    }
    if (s == 0) {  // UNLIMITED, as Slurm reads it
      l.max_wall_s.reset();
      return std::string{};
    }
    if (s > static_cast<std::int64_t>(k_max_limit_wall_s)) return "MaxWall is past 366 days: " + quoted(value);
    l.max_wall_s = static_cast<std::uint32_t>(s);
    return std::string{};
  }
  return std::nullopt;
}

std::optional<std::string> parse_shares(std::string_view text, std::uint32_t& out) {
  auto x = whole(text, k_max_shares);
  if (!x) return "Fairshare must be a whole number from 0 to " + std::to_string(k_max_shares) + ", not " + quoted(text);
  out = *x;
  return std::nullopt;
}

std::optional<std::string> parse_qos_priority(std::string_view text, std::uint32_t& out) {
  auto x = whole(text, k_max_qos_priority);
  if (!x) {
    return "Priority must be a whole number from 0 to " + std::to_string(k_max_qos_priority) + ", not " + quoted(text);
  }
  out = *x;
  return std::nullopt;
}

std::optional<std::string> check_name(std::string_view what, std::string_view name) {
  if (name.empty()) return std::string(what) + " name is empty";
  if (name.size() > 64) return std::string(what) + " name is longer than 64 characters";
  if (name.front() == '-') return std::string(what) + " name " + quoted(name) + " starts with '-'";
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return std::string(what) + " name " + quoted(name) + " may hold only letters, digits, '.', '_' and '-'";
  }
  return std::nullopt;
}

std::optional<std::string> validate(const account_tree& t) {
  std::unordered_map<std::string, std::size_t> by_name;
  for (std::size_t i = 0; i < t.accounts.size(); ++i) {
    const account& a = t.accounts[i];
    if (auto e = check_name("account", a.name)) return e;
    if (!by_name.emplace(a.name, i).second) return "account " + a.name + " is defined twice";
    if (a.shares > k_max_shares) return "account " + a.name + ": Fairshare is past " + std::to_string(k_max_shares);
    if (auto e = limits_problem(a.lim, "account " + a.name); !e.empty()) return e;
  }
  auto root = by_name.find(std::string(k_root_account));
  if (root == by_name.end()) return std::string("there is no root account");
  if (!t.accounts[root->second].parent.empty()) return std::string("the root account cannot have a parent");
  for (const account& a : t.accounts) {
    if (a.name == k_root_account) continue;
    if (a.parent.empty()) return "account " + a.name + " has no parent (only root may have none)";
    if (!by_name.count(a.parent)) return "account " + a.name + " has an unknown parent " + a.parent;
  }
  // Every account must reach root: walking up more steps than there are
  // accounts means a cycle.
  for (const account& a : t.accounts) {
    const account* cur = &a;
    std::size_t steps = 0;
    while (cur->name != k_root_account) {
      if (++steps > t.accounts.size()) return "account " + a.name + " is in a cycle of parents";
      cur = &t.accounts[by_name.at(cur->parent)];
    }
  }
  std::unordered_map<std::string, bool> assocs;
  for (const user_association& u : t.associations) {
    if (auto e = check_name("user", u.user)) return e;
    if (!by_name.count(u.account)) return "user " + u.user + " is in an unknown account " + u.account;
    if (!assocs.emplace(assoc_key(u.user, u.account), true).second) {
      return "user " + u.user + " is in account " + u.account + " twice";
    }
    if (u.shares > k_max_shares) {
      return "user " + u.user + " in " + u.account + ": Fairshare is past " + std::to_string(k_max_shares);
    }
    if (auto e = limits_problem(u.lim, "user " + u.user + " in " + u.account); !e.empty()) return e;
  }
  for (const auto& [user, acct] : t.default_account) {
    if (!assocs.count(assoc_key(user, acct))) {
      return "user " + user + "'s default account " + acct + " is not one of the user's accounts";
    }
  }
  std::unordered_map<std::string, bool> qos_names;
  for (const qos& q : t.qos_list) {
    if (auto e = check_name("QOS", q.name)) return e;
    if (!qos_names.emplace(q.name, true).second) return "QOS " + q.name + " is defined twice";
    if (q.priority > k_max_qos_priority) {
      return "QOS " + q.name + ": Priority is past " + std::to_string(k_max_qos_priority);
    }
    if (auto e = limits_problem(q.lim, "QOS " + q.name); !e.empty()) return e;
  }
  return std::nullopt;
}

account_index::account_index(account_tree t) : t_(std::move(t)) {
  if (auto e = validate(t_)) throw std::invalid_argument(*e);
  const std::size_t n = t_.accounts.size();
  parent_.assign(n, npos);
  child_accounts_.resize(n);
  child_assocs_.resize(n);
  for (std::size_t i = 0; i < n; ++i) accounts_.emplace(t_.accounts[i].name, i);
  for (std::size_t i = 0; i < n; ++i) {
    const account& a = t_.accounts[i];
    if (a.parent.empty()) {
      root_ = i;
      continue;
    }
    parent_[i] = accounts_.at(a.parent);
    child_accounts_[parent_[i]].push_back(i);
  }
  for (std::size_t i = 0; i < t_.associations.size(); ++i) {
    const user_association& u = t_.associations[i];
    assocs_.emplace(assoc_key(u.user, u.account), i);
    child_assocs_[accounts_.at(u.account)].push_back(i);
  }
  for (std::size_t i = 0; i < t_.qos_list.size(); ++i) qos_.emplace(t_.qos_list[i].name, i);
  paths_.resize(n);
  for (std::size_t i = 0; i < n; ++i) paths_[i] = path(i);
  std::unordered_map<std::string, std::size_t> user_numbers;
  for (std::size_t i = 0; i < t_.associations.size(); ++i) {
    const user_association& u = t_.associations[i];
    assoc_account_.push_back(accounts_.at(u.account));
    assoc_user_.push_back(user_numbers.emplace(u.user, user_numbers.size()).first->second);
    limits l = u.lim;
    for (std::size_t a : paths_[assoc_account_.back()]) {
      const limits& al = t_.accounts[a].lim;
      if (!l.max_jobs) l.max_jobs = al.max_jobs;
      if (!l.max_submit_jobs) l.max_submit_jobs = al.max_submit_jobs;
      if (!l.max_wall_s) l.max_wall_s = al.max_wall_s;
    }
    effective_.push_back(l);
  }
  nusers_ = user_numbers.size();
}

std::size_t account_index::account_of(std::string_view name) const {
  auto it = accounts_.find(std::string(name));
  return it == accounts_.end() ? npos : it->second;
}

std::size_t account_index::qos_of(std::string_view name) const {
  auto it = qos_.find(std::string(name));
  return it == qos_.end() ? npos : it->second;
}

std::size_t account_index::association_of(std::string_view user, std::string_view account) const {
  auto it = assocs_.find(assoc_key(user, account));
  return it == assocs_.end() ? npos : it->second;
}

std::vector<std::string> account_index::accounts_of(std::string_view user) const {
  std::vector<std::string> out;
  for (const user_association& u : t_.associations) {
    if (u.user == user) out.push_back(u.account);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::size_t> account_index::path(std::size_t account) const {
  std::vector<std::size_t> out;
  for (std::size_t a = account; a != npos; a = parent_[a]) out.push_back(a);
  return out;
}

account_choice choose_account(const account_index& idx, std::string_view user, std::string_view asked) {
  account_choice c;
  const std::vector<std::string> mine = idx.accounts_of(user);
  auto list = [&] {
    std::string s;
    for (const std::string& a : mine) s += (s.empty() ? "" : ", ") + a;
    return s;
  };
  if (mine.empty()) {
    c.error = "user " + std::string(user) + " has no account (an administrator adds one with aqs-sacctmgr add user)";
    return c;
  }
  if (asked.empty()) {
    auto it = idx.tree().default_account.find(std::string(user));
    if (it != idx.tree().default_account.end()) {
      c.account = it->second;
    } else if (mine.size() == 1) {
      c.account = mine.front();
    } else {
      c.error = "user " + std::string(user) + " has no default account; name one with -A (" + std::string(user) +
                "'s accounts: " + list() + ")";
    }
    return c;
  }
  if (idx.association_of(user, asked) == account_index::npos) {
    const bool exists = idx.account_of(asked) != account_index::npos;
    c.error = (exists ? "user " + std::string(user) + " is not in account " : "unknown account ") +
              std::string(asked) + " (" + std::string(user) + "'s accounts: " + list() + ")";
    return c;
  }
  c.account = std::string(asked);
  return c;
}

}  // namespace aqs::core
