// fairshare: each association's fair-share factor from its shares in the
// account tree and its decayed past usage (Slurm's classic multifactor
// formula), and the rows aqs-sshare prints. Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/accounts.hpp"

namespace aqs::core {

// One line of the tree as sshare shows it: an account, or a user in one.
struct share_row {
  bool is_user = false;
  std::size_t index = 0;  // into tree().accounts, or tree().associations for a user
  std::string account;
  std::string user;      // empty for an account row
  std::size_t depth = 0;  // root 0
  std::uint32_t raw_shares = 0;
  double norm_shares = 0;      // its fraction of the machine: shares / siblings' shares, times its parent's
  double raw_usage = 0;        // decayed processor-seconds (an account: all below it)
  double norm_usage = 0;       // raw_usage / the whole tree's
  double effective_usage = 0;  // norm_usage with a part of its parent's (classic formula)
  double fairshare = 1;        // 2^(-effective_usage / norm_shares); 0 with no shares; 1 for root
};

struct fair_share_result {
  // The tree depth first: each account, its users (by name), then its
  // sub-accounts (by name). Root first.
  std::vector<share_row> rows;
  // The factor of each association (tree().associations order), in [0, 1].
  std::vector<double> assoc_factor;
};

// `usage` holds each association's decayed processor-seconds, in
// tree().associations order (missing ones count as 0; negative as 0). With
// no usage at all every factor is 1. Users and sub-accounts of one account
// are siblings that split its shares. A child of root has
// effective_usage = norm_usage; deeper, effective_usage = norm_usage +
// (parent's effective_usage - norm_usage) * shares / siblings' shares.
fair_share_result fair_share(const account_index& idx, const std::vector<double>& usage);

}  // namespace aqs::core
