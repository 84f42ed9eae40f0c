// accounts_wire: the JSON shapes of the account tree and its records in the
// `accounts` message and its replies (docs/protocol.md, "accounts"):
//   limits  {max_jobs, max_submit_jobs, max_wall_s, grp_cpus, max_cpus_per_user} (each optional)
//   account {name, parent, shares, limits, description, organization}
//   user    {user, account, shares, limits}
//   qos     {name, priority, limits, description}
//   tree    {accounts: [account], users: [user], qos: [qos], defaults: {user: account}}
// Reading throws std::invalid_argument with one line naming the field.
#pragma once

#include <nlohmann/json.hpp>

#include "core/accounts.hpp"

namespace aqs::protocol {

nlohmann::json to_json(const core::limits& l);
nlohmann::json to_json(const core::account& a);
nlohmann::json to_json(const core::user_association& u);
nlohmann::json to_json(const core::qos& q);
nlohmann::json to_json(const core::account_tree& t);

core::account account_from_json(const nlohmann::json& j);
core::user_association user_from_json(const nlohmann::json& j);
core::qos qos_from_json(const nlohmann::json& j);
core::account_tree tree_from_json(const nlohmann::json& j);

}  // namespace aqs::protocol
