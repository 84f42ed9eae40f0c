// accounting_format: what aqs-sacctmgr, aqs-sshare and aqs-sprio print, in
// Slurm 22.05's layouts: sacctmgr's and sshare's print_fields tables (-p,
// -P, -n, format=Name%W) and sprio's -o letters. Pure: the caller passes
// the account tree, the fair-share rows and the jobs' priorities; no daemon
// call is made here (the commands themselves are not built yet).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/accounts.hpp"
#include "core/fairshare.hpp"
#include "core/priority.hpp"

namespace aqs::slurm {

// ---- Slurm's print_fields (src/common/print_fields.c) ----

// -p: every value followed by '|'; -P: '|' between values only.
enum class print_style { table, parsable, parsable2 };

// How a column prints its values: text is cut to the width with a '+' at
// its end; numbers are never cut; reals are "%f" (6 decimals); unset
// values are blank.
enum class value_kind : unsigned char { text, number, real };

struct print_field {
  std::string name;  // the header
  int len = 10;      // width; negative: left-justified
  value_kind kind = value_kind::text;
  std::string key;   // what the field shows (the caller's own name for it)
};

// One value; nullopt: unset (Slurm's NO_VAL / NULL), printed blank.
using print_value = std::optional<std::string>;

// The text: the header line (and in table style the dashes line) unless
// `header` is false, then one line per row. Every row has one value per field.
std::string render_print_fields(const std::vector<print_field>& fields,
                                const std::vector<std::vector<print_value>>& rows, print_style style, bool header);

// ---- sacctmgr ----

// A format entry as sacctmgr reads it: a field name, unique by Slurm's rule
// (case-insensitive prefix of at least the field's minimum length, the
// table taken in Slurm's order), and an optional "%W" width (negative:
// left-justified). Throws std::invalid_argument("Unknown field 'X'") as
// sacctmgr exits with that message.
print_field sacctmgr_field(std::string_view spec);
// "Account%20,User" (format= of sacctmgr list/show).
std::vector<print_field> sacctmgr_format(std::string_view list);

enum class sacctmgr_entity { user, account, qos };
// The default format of `sacctmgr show user|account|qos`, with -s
// (withassoc) for users and accounts: Slurm's lists.
std::vector<print_field> sacctmgr_default_format(sacctmgr_entity e, bool with_assoc);

struct sacctmgr_query {
  std::vector<std::string> names;  // only these users/accounts/QOS; empty: all
  bool with_assoc = false;         // -s / withassoc: one row per association
  std::string cluster = "aqs";     // the Cluster column
};
// The rows of `sacctmgr show user` (one per user; with_assoc: one per
// association of the user, in account order), `show account` (one per
// account; with_assoc: its own association row then one per user in it, as
// Slurm lists them) and `show qos`. Users and accounts sorted by name.
std::string sacctmgr_show(const core::account_tree& t, sacctmgr_entity e, const std::vector<print_field>& fields,
                          const sacctmgr_query& q, print_style style, bool header);

// ---- sshare ----

// sshare's fields: Account (-20, indented one space per level), User (10),
// RawShares (10), NormShares (11), RawUsage (11), EffectvUsage (13),
// FairShare (10); -l adds NormUsage (11) after NormShares. Unknown names
// throw std::invalid_argument("Invalid field requested: \"X\"").
std::vector<print_field> sshare_format(std::string_view list);
std::vector<print_field> sshare_default_format(bool long_list);
// The rows of core::fair_share in its order; `users` (sshare -u) keeps only
// the user rows of those users and the accounts above them; all_users (-a)
// is the default here (AQS shows every user).
std::string sshare_show(const core::fair_share_result& fs, const std::vector<print_field>& fields,
                        const std::vector<std::string>& users, print_style style, bool header);

// ---- sprio ----

struct sprio_job {
  core::job_priority priority;
  std::string user;
  std::string account;
  std::string partition;
  std::string qos;
};
// -o letters (%[.][width]letter, '.' right-justifies as squeue): i jobid,
// r partition, u user, o account, n QOS name, Y priority, y normalised
// priority, A/a age, F/f fair share, J/j job size, P/p partition, Q/q QOS,
// S site (the job's base priority), B/b association, N nice, T/t TRES
// (AQS: 0 / blank). Throws std::invalid_argument("Invalid job format
// specification: X") for an unknown letter.
struct sprio_field {
  char letter = 'i';
  int width = 0;
  bool right = false;
  std::string prefix;  // literal text before it
};
std::vector<sprio_field> sprio_format(std::string_view format);
// The default: "%.15i %9r %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q
// %20T" (long: "%.15i %9r %.8u %.8o %.10Y %.10S %.10A %.10B %.10F %.10J
// %.10P %.10n %.10Q %.11N %.20T"), without the factors whose weight is 0
// (AQS has no site, association, nice or TRES weights: those are always
// left out), as sprio does.
std::string sprio_default_format(const core::priority_weights& w, bool long_list);
std::string sprio_show(const std::vector<sprio_job>& jobs, const core::priority_weights& w,
                       const std::vector<sprio_field>& fields, bool header);
// sprio -w: the weights line.
std::string sprio_weights(const core::priority_weights& w);

}  // namespace aqs::slurm

namespace aqs::slurm {

// ---- sreport and fusage ----

// "a,b,,c" -> {"a", "b", "c"}: the -u/-j/users= lists of the accounting commands.
std::vector<std::string> comma_list(std::string_view text);

// A report's start= or end= as Slurm's sreport reads it, in local time:
// YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS], MM/DD[/YY], now, today, yesterday,
// or Unix seconds. Throws std::invalid_argument("invalid time 'X' (...)").
std::int64_t parse_report_time(std::string_view text, std::int64_t now);
// "2026-11-27T00:00:00" in local time.
std::string report_time(std::int64_t t);

// One user's usage in one account over the period (the `usage` action).
struct usage_row {
  std::string user, account;
  std::int64_t jobs = 0;
  double cpu_seconds = 0;
};
// sreport cluster AccountUtilizationByUser: per account (its total, Login
// blank) then its users, "Used" in the unit (-t: minutes (Slurm's
// default), hours, seconds, or percent of the account total); the banner
// with the period unless `header` is false; `style` as sacctmgr's.
std::string sreport_account_utilization(const std::vector<usage_row>& rows, std::int64_t from, std::int64_t to,
                                        std::string_view unit, print_style style, bool header,
                                        const std::string& cluster = "aqs");

}  // namespace aqs::slurm
