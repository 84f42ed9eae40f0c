// fairshare: the tree walk computing shares, usage and factors.
#include "core/fairshare.hpp"

#include <algorithm>
#include <cmath>

namespace aqs::core {

fair_share_result fair_share(const account_index& idx, const std::vector<double>& usage) {
  const account_tree& t = idx.tree();
  const std::size_t na = t.accounts.size(), nu = t.associations.size();
  fair_share_result out;
  out.assoc_factor.assign(nu, 1.0);
  std::vector<double> assoc_usage(nu, 0.0);
  for (std::size_t i = 0; i < nu && i < usage.size(); ++i) {
    assoc_usage[i] = std::isfinite(usage[i]) && usage[i] > 0 ? usage[i] : 0;
  }
  // Accounts' usage: everything below them (post-order over the tree).
  std::vector<double> acct_usage(na, 0.0);
  std::vector<std::size_t> order{idx.root()};
  for (std::size_t k = 0; k < order.size(); ++k) {
    for (std::size_t c : idx.child_accounts(order[k])) order.push_back(c);
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    for (std::size_t u : idx.child_associations(*it)) acct_usage[*it] += assoc_usage[u];
    for (std::size_t c : idx.child_accounts(*it)) acct_usage[*it] += acct_usage[c];
  }
  const double total = acct_usage[idx.root()];

  share_row root;
  root.index = idx.root();
  root.account = t.accounts[idx.root()].name;
  root.raw_shares = t.accounts[idx.root()].shares;
  root.norm_shares = 1;
  root.raw_usage = total;
  root.norm_usage = total > 0 ? 1 : 0;
  root.effective_usage = root.norm_usage;
  root.fairshare = 1;

  // Depth first: an account's users, then each sub-account and what is below it.
  auto visit = [&](auto&& self, const share_row& parent) -> void {
    const std::size_t a = parent.index;
    std::vector<std::size_t> users = idx.child_associations(a), subs = idx.child_accounts(a);
    std::sort(users.begin(), users.end(),
              [&](std::size_t x, std::size_t y) { return t.associations[x].user < t.associations[y].user; });
    std::sort(subs.begin(), subs.end(),
              [&](std::size_t x, std::size_t y) { return t.accounts[x].name < t.accounts[y].name; });
    double siblings = 0;
    for (std::size_t u : users) siblings += t.associations[u].shares;
    for (std::size_t c : subs) siblings += t.accounts[c].shares;
    const bool under_root = a == idx.root();
    auto fill = [&](share_row& r, std::uint32_t shares, double raw) {
      r.depth = parent.depth + 1;
      r.raw_shares = shares;
      const double part = siblings > 0 ? shares / siblings : 0;
      r.norm_shares = parent.norm_shares * part;
      r.raw_usage = raw;
      r.norm_usage = total > 0 ? raw / total : 0;
      r.effective_usage =
          under_root ? r.norm_usage : r.norm_usage + (parent.effective_usage - r.norm_usage) * part;
      r.fairshare = r.norm_shares > 0 ? std::exp2(-r.effective_usage / r.norm_shares) : 0;
    };
    for (std::size_t u : users) {
      share_row r;
      r.is_user = true;
      r.index = u;
      r.account = t.associations[u].account;
      r.user = t.associations[u].user;
      fill(r, t.associations[u].shares, assoc_usage[u]);
      out.assoc_factor[u] = r.fairshare;
      out.rows.push_back(r);
    }
    for (std::size_t c : subs) {
      share_row r;
      r.index = c;
      r.account = t.accounts[c].name;
      fill(r, t.accounts[c].shares, acct_usage[c]);
      out.rows.push_back(r);
      self(self, r);  // a copy: rows grows below
    }
  };
  out.rows.push_back(root);
  visit(visit, share_row(root));
  return out;
}

}  // namespace aqs::core
