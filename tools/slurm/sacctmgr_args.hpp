// sacctmgr_args: aqs-sacctmgr's command line as Slurm's sacctmgr reads it
// (add|modify|delete|show account|user|qos ..., where/set, -i -n -p -P -s,
// format=), and the key=value settings applied to core's records with
// one-line refusals. Pure: the command itself (not built yet) sends the
// result to aqsd, which calls store::account_store.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/accounts.hpp"
#include "slurm/accounting_format.hpp"

namespace aqs::slurm {

enum class sacctmgr_verb { add, modify, remove, show };

struct sacctmgr_command {
  sacctmgr_verb verb = sacctmgr_verb::show;
  sacctmgr_entity entity = sacctmgr_entity::user;
  std::vector<std::string> names;  // NAME[,NAME], or Name=/User= in where
  std::vector<std::string> accounts;  // users: Account=a,b (add: where to add; modify/delete: which associations)
  // key=value pairs of the set part (add: everything after the names but
  // Account=/Names=/format=), in the order typed; keys as typed.
  std::vector<std::pair<std::string, std::string>> settings;
  std::vector<print_field> format;  // show: format=...; empty: the default
  bool immediate = false;           // -i: no confirmation
  bool with_assoc = false;          // -s / withassoc
  bool header = true;               // -n clears it
  print_style style = print_style::table;  // -p, -P
};

// Parses argv after the program name. Throws std::invalid_argument with one
// line, without the program name ("Unknown option: -x", "add needs an account, user or qos
// name", "Unknown field 'x'", "modify needs 'set' and at least one value")
// for anything sacctmgr would refuse.
sacctmgr_command parse_sacctmgr(const std::vector<std::string>& args);

// Applies the settings to a record, all or nothing, returning the one-line
// reason of the first refused one. Accounts take Parent, Description,
// Organization, Fairshare and the limits (core::set_limit); users
// Fairshare, DefaultAccount (returned through `default_account`) and the
// limits; QOS Priority, Description and the limits, with Slurm's
// MaxJobsPerUser, MaxSubmitJobsPerUser and MaxTRESPerUser names.
std::optional<std::string> apply_settings(core::account& a, const sacctmgr_command& c);
std::optional<std::string> apply_settings(core::user_association& u, const sacctmgr_command& c,
                                          std::string* default_account = nullptr);
std::optional<std::string> apply_settings(core::qos& q, const sacctmgr_command& c);

}  // namespace aqs::slurm
