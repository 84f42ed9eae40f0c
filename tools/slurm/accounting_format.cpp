// accounting_format: print_fields, sacctmgr's field table and listings, sshare's rows, sprio's letters.
#include "slurm/accounting_format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <stdexcept>

#include "core/text_util.hpp"

namespace aqs::slurm {

namespace {

std::string pad(std::string_view s, std::size_t width, bool left) {
  std::string out;
  if (s.size() >= width) return std::string(s);
  if (left) {
    out = std::string(s);
    out.append(width - s.size(), ' ');
  } else {
    out.append(width - s.size(), ' ');
    out += s;
  }
  return out;
}

// "%f" of Slurm's print_fields_double, with its exponent form when wider than the field.
std::string real_cell(const std::string& v, int len) {
  const double x = std::strtod(v.c_str(), nullptr);
  const int width = std::abs(len);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%*f", width, x);
  if (static_cast<int>(std::string_view(buf).size()) <= width) {
    std::snprintf(buf, sizeof buf, len < 0 ? "%-*f" : "%*f", width, x);
    return buf;
  }
  std::snprintf(buf, sizeof buf, len < 0 ? "%-*.*e" : "%*.*e", width, width, x);
  return buf;
}

std::string table_cell(const print_field& f, const print_value& v) {
  const int width = std::abs(f.len);
  const bool left = f.len < 0;
  if (!v) return pad(" ", static_cast<std::size_t>(width), left);
  switch (f.kind) {
    case value_kind::number: return pad(*v, static_cast<std::size_t>(width), left);
    case value_kind::real: return real_cell(*v, f.len);
    case value_kind::text: break;
  }
  std::string s = *v;
  if (static_cast<int>(s.size()) > width) {
    s.resize(static_cast<std::size_t>(width));
    if (width > 0) s.back() = '+';
  }
  return pad(s, static_cast<std::size_t>(width), left);
}

std::string parsable_value(const print_field& f, const print_value& v) {
  if (!v) return "";
  if (f.kind == value_kind::real) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%f", std::strtod(v->c_str(), nullptr));
    return buf;
  }
  return *v;
}

}  // namespace

std::string render_print_fields(const std::vector<print_field>& fields,
                                const std::vector<std::vector<print_value>>& rows, print_style style, bool header) {
  std::string out;
  const std::size_t n = fields.size();
  auto sep = [&](std::size_t i) -> std::string {
    if (style == print_style::parsable2 && i + 1 == n) return "";
    return "|";
  };
  if (header) {
    for (std::size_t i = 0; i < n; ++i) {
      const print_field& f = fields[i];
      if (style == print_style::table) {
        std::string name = f.name.substr(0, static_cast<std::size_t>(std::abs(f.len)));
        out += pad(name, static_cast<std::size_t>(std::abs(f.len)), f.len < 0) + " ";
      } else {
        out += f.name + sep(i);
      }
    }
    out += "\n";
    if (style == print_style::table) {
      for (const print_field& f : fields) out += std::string(static_cast<std::size_t>(std::abs(f.len)), '-') + " ";
      out += "\n";
    }
  }
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < n; ++i) {
      const print_value& v = i < row.size() ? row[i] : print_value{};
      if (style == print_style::table) {
        out += table_cell(fields[i], v) + " ";
      } else {
        out += parsable_value(fields[i], v) + sep(i);
      }
    }
    out += "\n";
  }
  return out;
}

// ---- sacctmgr ----

namespace {

struct field_def {
  const char* full;
  std::size_t min;  // Slurm's MAX(command_len, min)
  const char* header;  // nullptr: the full name
  int len;
  value_kind kind;
  const char* key = "none";     // value_of's key; "none": AQS has no value, printed blank
  const char* alias = nullptr;  // a second spelling (Acct, MaxTRESPU, ...)
  std::size_t alias_min = 0;
};

// sacctmgr's _get_print_field, in its order (first match wins), for the
// fields AQS has values for or prints blank as Slurm does.
const std::vector<field_def>& sacctmgr_fields() {
  static const std::vector<field_def> t = {
      {"Account", 3, nullptr, 10, value_kind::text, "account", "Acct", 4},
      {"AdminLevel", 2, "Admin", 9, value_kind::text, "admin"},
      {"Clusters", 2, "Cluster", 10, value_kind::text, "cluster"},
      {"DefaultAccount", 8, "Def Acct", 10, value_kind::text, "default_account"},
      {"DefaultQOS", 8, "Def QOS", 9, value_kind::text, "default_qos"},
      {"Description", 3, "Descr", 20, value_kind::text, "description"},
      {"Flags", 2, nullptr, 20, value_kind::text, "flags"},
      {"GraceTime", 3, nullptr, 10, value_kind::text, "grace_time"},
      {"GrpCPUs", 6, nullptr, 8, value_kind::number},
      {"GrpCPUMins", 7, nullptr, 11, value_kind::number},
      {"GrpTRES", 7, nullptr, 13, value_kind::text, "grp_tres"},
      {"GrpTRESMins", 7, nullptr, 13, value_kind::text},
      {"GrpTRESRunMins", 7, nullptr, 13, value_kind::text},
      {"GrpJobs", 4, nullptr, 7, value_kind::number},
      {"GrpMemory", 4, "GrpMem", 7, value_kind::number},
      {"GrpNodes", 4, nullptr, 8, value_kind::number},
      {"GrpSubmitJobs", 4, "GrpSubmit", 9, value_kind::number},
      {"GrpWall", 4, nullptr, 11, value_kind::text},
      {"MaxCPUMinsPerJob", 7, "MaxCPUMins", 11, value_kind::number},
      {"MaxCPUsPerJob", 7, "MaxCPUs", 8, value_kind::number},
      {"MaxTRES", 7, nullptr, 13, value_kind::text, "none", "MaxTRESPerJob", 11},
      {"MaxTRESPerNode", 11, nullptr, 14, value_kind::text},
      {"MaxTRESMinsPerJob", 8, "MaxTRESMins", 13, value_kind::text},
      {"MaxTRESPerAccount", 11, "MaxTRESPA", 13, value_kind::text, "none", "MaxTRESPA", 9},
      {"MaxTRESPerUser", 11, "MaxTRESPU", 13, value_kind::text, "max_tres_pu", "MaxTRESPU", 9},
      {"MaxJobs", 4, nullptr, 7, value_kind::number, "max_jobs"},
      {"MaxJobsPerAccount", 11, "MaxJobsPA", 9, value_kind::number, "none", "MaxJobsPA", 9},
      {"MaxJobsPerUser", 11, "MaxJobsPU", 9, value_kind::number, "max_jobs", "MaxJobsPU", 9},
      {"MaxNodesPerJob", 4, "MaxNodes", 8, value_kind::number},
      {"MaxSubmitJobs", 4, "MaxSubmit", 9, value_kind::number, "max_submit"},
      {"MaxSubmitJobsPerAccount", 17, "MaxSubmitPA", 11, value_kind::number, "none", "MaxSubmitPA", 11},
      {"MaxSubmitJobsPerUser", 10, "MaxSubmitPU", 11, value_kind::number, "max_submit", "MaxSubmitPU", 6},
      {"MaxWallDurationPerJob", 4, "MaxWall", 11, value_kind::text, "max_wall"},
      {"MinTRESPerJob", 7, "MinTRES", 13, value_kind::text},
      {"Name", 2, nullptr, 10, value_kind::text, "name"},
      {"Organization", 1, "Org", 20, value_kind::text, "organization"},
      {"ParentName", 7, nullptr, 10, value_kind::text, "parent"},
      {"Partition", 4, nullptr, 10, value_kind::text, "partition"},
      {"PreemptMode", 8, nullptr, 11, value_kind::text, "preempt_mode"},
      {"Preempt", 7, nullptr, 10, value_kind::text},
      {"PreemptExemptTime", 8, nullptr, 19, value_kind::text},
      {"Priority", 3, nullptr, 10, value_kind::number, "priority"},
      {"QOSLevel", 3, "QOS", 20, value_kind::text, "qos"},
      {"Share", 1, nullptr, 9, value_kind::number, "share", "FairShare", 2},
      {"UsageFactor", 6, nullptr, 11, value_kind::real, "usage_factor"},
      {"UsageThreshold", 6, "UsageThres", 10, value_kind::real},
      {"User", 1, nullptr, 10, value_kind::text, "user"},
  };
  return t;
}

// Slurm's xstrncasecmp(full, typed, MAX(len(typed), min)) == 0: a prefix of
// at least `min` characters, or the whole name (the comparison runs past a
// shorter text into its NUL).
bool names(const char* full, std::size_t min, std::string_view typed) {
  const std::string f = core::ascii_lower(full), t = core::ascii_lower(typed);
  if (t.empty() || t.size() > f.size()) return false;
  return f.compare(0, t.size(), t) == 0 && (t.size() >= min || t.size() == f.size());
}

std::string minutes_text(std::uint32_t secs) {
  // Slurm's mins2time_str: "D-HH:MM:00" or "HH:MM:00".
  const std::uint32_t mins = secs / 60;
  char buf[32];
  if (mins >= 1440) {
    std::snprintf(buf, sizeof buf, "%u-%02u:%02u:00", mins / 1440, (mins % 1440) / 60, mins % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%02u:%02u:00", mins / 60, mins % 60);
  }
  return buf;
}

print_value num(const std::optional<std::uint32_t>& v) {
  if (!v) return std::nullopt;
  return std::to_string(*v);
}

print_value cpu_tres(const std::optional<std::uint32_t>& v) {
  if (!v) return std::nullopt;
  return "cpu=" + std::to_string(*v);
}

print_value text_or_unset(const std::string& s) {
  if (s.empty()) return std::nullopt;
  return s;
}

// The value of `key` for one row: an account, a user association, a user
// without associations shown, or a QOS.
struct row_ctx {
  const core::account* acct = nullptr;
  const core::user_association* assoc = nullptr;
  const core::qos* q = nullptr;
  std::string user;
  std::string default_account;
  std::string cluster;
  bool assoc_row = false;  // a row standing for an association (-s)
};

print_value value_of(const std::string& key, const row_ctx& r) {
  const core::limits* lim = r.assoc ? &r.assoc->lim : (r.acct ? &r.acct->lim : (r.q ? &r.q->lim : nullptr));
  if (key == "account") {
    if (r.assoc) return r.assoc->account;
    if (r.acct) return r.acct->name;
    return std::nullopt;
  }
  if (key == "user") return text_or_unset(r.user);
  if (key == "admin") return r.user.empty() ? print_value{} : print_value{"None"};
  if (key == "cluster") return r.assoc_row ? print_value{r.cluster} : print_value{};
  if (key == "default_account") return text_or_unset(r.default_account);
  if (key == "description") {
    if (r.q) return text_or_unset(r.q->description);
    return r.acct ? text_or_unset(r.acct->description) : print_value{};
  }
  if (key == "organization") return r.acct ? text_or_unset(r.acct->organization) : print_value{};
  if (key == "parent") return r.acct && r.assoc_row && !r.assoc ? text_or_unset(r.acct->parent) : print_value{};
  if (key == "name") return r.q ? print_value{r.q->name} : print_value{};
  if (key == "priority") return r.q ? print_value{std::to_string(r.q->priority)} : print_value{};
  if (key == "share") {
    if (!r.assoc_row) return std::nullopt;
    if (r.assoc) return std::to_string(r.assoc->shares);
    return r.acct ? print_value{std::to_string(r.acct->shares)} : print_value{};
  }
  if (key == "grace_time") return r.q ? print_value{"00:00:00"} : print_value{};
  if (key == "preempt_mode") return r.q ? print_value{"cluster"} : print_value{};
  if (key == "usage_factor") return r.q ? print_value{"1.000000"} : print_value{};
  if (!lim || (!r.q && !r.assoc_row)) return std::nullopt;
  if (key == "max_jobs") return num(lim->max_jobs);
  if (key == "max_submit") return num(lim->max_submit_jobs);
  if (key == "max_wall") return lim->max_wall_s ? print_value{minutes_text(*lim->max_wall_s)} : print_value{};
  if (key == "grp_tres") return cpu_tres(lim->grp_cpus);
  if (key == "max_tres_pu") return cpu_tres(lim->max_cpus_per_user);
  return std::nullopt;  // partition, qos, flags, default_qos and Slurm's limits AQS does not have
}

// Pointers to the records of `v`, by name.
template <class T>
std::vector<const T*> sorted_by_name(const std::vector<T>& v) {
  std::vector<const T*> out;
  for (const T& x : v) out.push_back(&x);
  std::sort(out.begin(), out.end(), [](const T* a, const T* b) { return a->name < b->name; });
  return out;
}

bool wanted(const std::vector<std::string>& names_, const std::string& name) {
  return names_.empty() || std::find(names_.begin(), names_.end(), name) != names_.end();
}

}  // namespace

print_field sacctmgr_field(std::string_view spec) {
  std::string_view name = spec;
  std::optional<int> width;
  if (const auto pct = spec.find('%'); pct != std::string_view::npos) {
    name = spec.substr(0, pct);
    width = std::atoi(std::string(spec.substr(pct + 1)).c_str());
  }
  for (const field_def& d : sacctmgr_fields()) {
    if (names(d.full, d.min, name) || (d.alias && names(d.alias, d.alias_min, name))) {
      print_field f{d.header ? d.header : d.full, d.len, d.kind, d.key};
      if (width && *width != 0) f.len = *width;
      return f;
    }
  }
  throw std::invalid_argument("Unknown field '" + std::string(name) + "'");
}

std::vector<print_field> sacctmgr_format(std::string_view list) {
  std::vector<print_field> out;
  for (std::string_view part : core::split(list, ',')) {
    if (part.empty()) continue;
    out.push_back(sacctmgr_field(part));
  }
  return out;
}

std::vector<print_field> sacctmgr_default_format(sacctmgr_entity e, bool with_assoc) {
  switch (e) {
    case sacctmgr_entity::user:
      return sacctmgr_format(with_assoc ? "U,DefaultA,Ad,Cl,Acc,Part,Share,Priority,MaxJ,MaxN,MaxCPUs,MaxS,MaxW,"
                                          "MaxCPUMins,QOS,DefaultQOS"
                                        : "U,DefaultA,Ad");
    case sacctmgr_entity::account:
      return sacctmgr_format(with_assoc ? "Acc,Des,O,Cl,ParentN,U,Share,Priority,GrpJ,GrpN,GrpCPUs,GrpMEM,GrpS,"
                                          "GrpWall,GrpCPUMins,MaxJ,MaxN,MaxCPUs,MaxS,MaxW,MaxCPUMins,QOS,DefaultQOS"
                                        : "Acc,Des,O");
    case sacctmgr_entity::qos:
      return sacctmgr_format(
          "Name,Prio,GraceT,Preempt,PreemptE,PreemptM,Flags%40,UsageThres,UsageFactor,GrpTRES,GrpTRESMins,"
          "GrpTRESRunMins,GrpJ,GrpS,GrpW,MaxTRES,MaxTRESPerN,MaxTRESMins,MaxW,MaxTRESPerUser,MaxJobsPerUser,"
          "MaxSubmitJobsPerUser,MaxTRESPerAcct,MaxJobsPerAcct,MaxSubmitJobsPerAcct,MinTRES");
  }
  return {};
}

std::string sacctmgr_show(const core::account_tree& t, sacctmgr_entity e, const std::vector<print_field>& fields,
                          const sacctmgr_query& q, print_style style, bool header) {
  std::vector<row_ctx> rows;
  auto default_of = [&](const std::string& user) {
    auto it = t.default_account.find(user);
    return it == t.default_account.end() ? std::string{} : it->second;
  };
  if (e == sacctmgr_entity::user) {
    std::map<std::string, std::vector<const core::user_association*>> by_user;
    for (const core::user_association& u : t.associations) by_user[u.user].push_back(&u);
    for (auto& [user, assocs] : by_user) {
      if (!wanted(q.names, user)) continue;
      if (!q.with_assoc) {
        row_ctx r;
        r.user = user;
        r.default_account = default_of(user);
        rows.push_back(r);
        continue;
      }
      std::sort(assocs.begin(), assocs.end(), [](auto* a, auto* b) { return a->account < b->account; });
      for (const core::user_association* a : assocs) {
        row_ctx r;
        r.user = user;
        r.default_account = default_of(user);
        r.assoc = a;
        r.cluster = q.cluster;
        r.assoc_row = true;
        rows.push_back(r);
      }
    }
  } else if (e == sacctmgr_entity::account) {
    for (const core::account* a : sorted_by_name(t.accounts)) {
      if (!wanted(q.names, a->name)) continue;
      row_ctx r;
      r.acct = a;
      r.cluster = q.cluster;
      r.assoc_row = q.with_assoc;
      rows.push_back(r);
      if (!q.with_assoc) continue;
      std::vector<const core::user_association*> users;
      for (const core::user_association& u : t.associations) {
        if (u.account == a->name) users.push_back(&u);
      }
      std::sort(users.begin(), users.end(), [](auto* x, auto* y) { return x->user < y->user; });
      for (const core::user_association* u : users) {
        row_ctx ur = r;
        ur.assoc = u;
        ur.user = u->user;
        rows.push_back(ur);
      }
    }
  } else {
    for (const core::qos* x : sorted_by_name(t.qos_list)) {
      if (!wanted(q.names, x->name)) continue;
      row_ctx r;
      r.q = x;
      rows.push_back(r);
    }
  }
  std::vector<std::vector<print_value>> values;
  for (const row_ctx& r : rows) {
    std::vector<print_value> v;
    for (const print_field& f : fields) v.push_back(value_of(f.key, r));
    values.push_back(std::move(v));
  }
  return render_print_fields(fields, values, style, header);
}

// ---- sshare ----

namespace {

const std::vector<print_field>& sshare_fields() {
  static const std::vector<print_field> t = {
      {"Account", -20, value_kind::text, "account"},     {"User", 10, value_kind::text, "user"},
      {"RawShares", 10, value_kind::number, "raw_shares"}, {"NormShares", 11, value_kind::real, "norm_shares"},
      {"RawUsage", 11, value_kind::number, "raw_usage"},   {"NormUsage", 11, value_kind::real, "norm_usage"},
      {"EffectvUsage", 13, value_kind::real, "effective_usage"}, {"FairShare", 10, value_kind::real, "fairshare"},
  };
  return t;
}

std::string real_text(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%f", x);
  return buf;
}

}  // namespace

std::vector<print_field> sshare_format(std::string_view list) {
  std::vector<print_field> out;
  for (std::string_view part : core::split(list, ',')) {
    if (part.empty()) continue;
    std::string_view name = part;
    std::optional<int> width;
    if (const auto pct = part.find('%'); pct != std::string_view::npos) {
      name = part.substr(0, pct);
      width = std::atoi(std::string(part.substr(pct + 1)).c_str());
    }
    bool found = false;
    for (const print_field& f : sshare_fields()) {
      if (core::ascii_lower(f.name) == core::ascii_lower(name)) {
        print_field g = f;
        if (width && *width != 0) g.len = *width;
        out.push_back(g);
        found = true;
        break;
      }
    }
    if (!found) throw std::invalid_argument("Invalid field requested: \"" + std::string(name) + "\"");
  }
  return out;
}

std::vector<print_field> sshare_default_format(bool long_list) {
  return sshare_format(long_list ? "Account,User,RawShares,NormShares,RawUsage,NormUsage,EffectvUsage,FairShare"
                                 : "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare");
}

std::string sshare_show(const core::fair_share_result& fs, const std::vector<print_field>& fields,
                        const std::vector<std::string>& users, print_style style, bool header) {
  std::vector<std::vector<print_value>> values;
  // With -u: the chosen users' rows, and the account rows above them.
  std::vector<bool> keep(fs.rows.size(), users.empty());
  if (!users.empty()) {
    for (std::size_t i = 0; i < fs.rows.size(); ++i) {
      if (!fs.rows[i].is_user || !wanted(users, fs.rows[i].user)) continue;
      keep[i] = true;
      std::size_t depth = fs.rows[i].depth;
      for (std::size_t j = i; j-- > 0 && depth > 0;) {
        if (!fs.rows[j].is_user && fs.rows[j].depth < depth) {
          keep[j] = true;
          depth = fs.rows[j].depth;
        }
      }
    }
  }
  for (std::size_t i = 0; i < fs.rows.size(); ++i) {
    if (!keep[i]) continue;
    const core::share_row& r = fs.rows[i];
    const bool root = r.depth == 0;
    std::vector<print_value> v;
    for (const print_field& f : fields) {
      if (f.key == "account") {
        // Indented one space per level (a user row at its account's level plus one).
        v.push_back(std::string(r.depth, ' ') + r.account);
      } else if (f.key == "user") {
        v.push_back(r.is_user ? print_value{r.user} : print_value{});
      } else if (f.key == "raw_shares") {
        v.push_back(root ? print_value{} : print_value{std::to_string(r.raw_shares)});
      } else if (f.key == "norm_shares") {
        v.push_back(real_text(r.norm_shares));
      } else if (f.key == "raw_usage") {
        v.push_back(std::to_string(static_cast<std::uint64_t>(std::llround(r.raw_usage))));
      } else if (f.key == "norm_usage") {
        v.push_back(real_text(r.norm_usage));
      } else if (f.key == "effective_usage") {
        v.push_back(real_text(r.effective_usage));
      } else if (f.key == "fairshare") {
        // Classic fair share prints the factor on user rows; accounts have none.
        v.push_back(r.is_user ? print_value{real_text(r.fairshare)} : print_value{});
      } else {
        v.push_back(std::nullopt);
      }
    }
    values.push_back(std::move(v));
  }
  return render_print_fields(fields, values, style, header);
}

// ---- sprio ----

namespace {

const char* sprio_header(char c) {
  switch (c) {
    case 'i': return "JOBID";
    case 'r': return "PARTITION";
    case 'u': return "USER";
    case 'o': return "ACCOUNT";
    case 'n': return "QOSNAME";
    case 'Y': case 'y': return "PRIORITY";
    case 'A': case 'a': return "AGE";
    case 'F': case 'f': return "FAIRSHARE";
    case 'J': case 'j': return "JOBSIZE";
    case 'P': case 'p': return "PARTITION";
    case 'Q': case 'q': return "QOS";
    case 'S': return "SITE";
    case 'B': case 'b': return "ASSOC";
    case 'N': return "NICE";
    case 'T': case 't': return "TRES";
    default: return nullptr;
  }
}

// sprio's _print_str: right-justified "%Ns" cut to the width, or left "%.Ns" padded.
std::string sprio_cell(const std::string& s, int width, bool right) {
  if (width == 0) return s;
  std::string v = s.substr(0, static_cast<std::size_t>(width));
  return pad(v, static_cast<std::size_t>(width), !right);
}

std::string weighted(double factor, std::uint32_t weight) {
  return std::to_string(static_cast<std::uint64_t>(factor * static_cast<double>(weight)));
}

std::string normal(double x, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

}  // namespace

std::vector<sprio_field> sprio_format(std::string_view format) {
  std::vector<sprio_field> out;
  std::string literal;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      literal += format[i];
      continue;
    }
    sprio_field f;
    f.prefix = literal;
    literal.clear();
    ++i;
    if (i < format.size() && format[i] == '.') {
      f.right = true;
      ++i;
    }
    while (i < format.size() && format[i] >= '0' && format[i] <= '9') f.width = f.width * 10 + (format[i++] - '0');
    if (i >= format.size() || !sprio_header(format[i])) {
      throw std::invalid_argument("Invalid job format specification: " +
                                  std::string(i < format.size() ? format.substr(i, 1) : std::string_view("%")));
    }
    f.letter = format[i];
    out.push_back(f);
  }
  if (!literal.empty()) {
    sprio_field tail;  // trailing text: printed after the last field
    tail.letter = 0;
    tail.prefix = literal;
    out.push_back(tail);
  }
  return out;
}

std::string sprio_default_format(const core::priority_weights& w, bool long_list) {
  const std::string base = long_list
                               ? "%.15i %9r %.8u %.8o %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10n %.10Q %.11N %.20T"
                               : "%.15i %9r %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %20T";
  auto drop = [&](char letter) {
    switch (letter) {
      case 'A': return w.age == 0;
      case 'F': return w.fairshare == 0;
      case 'J': return w.job_size == 0;
      case 'P': return w.partition == 0;
      case 'Q': return w.qos == 0;
      case 'S': case 'B': case 'N': case 'T': return true;  // AQS has no such weights
      default: return false;
    }
  };
  std::string out;
  for (std::string_view tok : core::split(base, ' ')) {
    if (drop(tok.back())) continue;
    if (!out.empty()) out += ' ';
    out += tok;
  }
  return out;
}

namespace {

// One line of sprio: each field's prefix, then, for a field with a letter,
// cell(letter) in its width.
template <class Cell>
void sprio_line(std::string& out, const std::vector<sprio_field>& fields, Cell&& cell) {
  for (const sprio_field& f : fields) {
    out += f.prefix;
    if (f.letter) out += sprio_cell(cell(f.letter), f.width, f.right);
  }
  out += "\n";
}

}  // namespace

std::string sprio_show(const std::vector<sprio_job>& jobs, const core::priority_weights& w,
                       const std::vector<sprio_field>& fields, bool header) {
  std::string out;
  auto line = [&](auto&& cell) { sprio_line(out, fields, cell); };
  if (header) line([](char c) { return std::string(sprio_header(c)); });
  for (const sprio_job& j : jobs) {
    const core::priority_factors& p = j.priority.factors;
    line([&](char c) -> std::string {
      switch (c) {
        case 'i': return std::to_string(j.priority.id);
        case 'r': return j.partition;
        case 'u': return j.user;
        case 'o': return j.account;
        case 'n': return j.qos;
        case 'Y': return std::to_string(j.priority.value);
        case 'y': return normal(static_cast<double>(j.priority.value) / 4294967295.0, 8);
        case 'A': return weighted(p.age, w.age);
        case 'a': return normal(p.age, 7);
        case 'F': return weighted(p.fairshare, w.fairshare);
        case 'f': return normal(p.fairshare, 7);
        case 'J': return weighted(p.job_size, w.job_size);
        case 'j': return normal(p.job_size, 7);
        case 'P': return weighted(p.partition, w.partition);
        case 'p': return normal(p.partition, 7);
        case 'Q': return weighted(p.qos, w.qos);
        case 'q': return normal(p.qos, 7);
        case 'S': case 'B': case 'N': return "0";
        case 'b': return normal(0, 7);
        default: return "";
      }
    });
  }
  return out;
}

std::string sprio_weights(const core::priority_weights& w) {
  const std::vector<sprio_field> fields = sprio_format(sprio_default_format(w, false));
  std::string out;
  auto line = [&](auto&& cell) { sprio_line(out, fields, cell); };
  line([](char c) { return std::string(sprio_header(c)); });
  line([&](char c) -> std::string {
    switch (c) {
      case 'i': return "Weights";
      case 'A': return std::to_string(w.age);
      case 'F': return std::to_string(w.fairshare);
      case 'J': return std::to_string(w.job_size);
      case 'P': return std::to_string(w.partition);
      case 'Q': return std::to_string(w.qos);
      default: return "";
    }
  });
  return out;
}

}  // namespace aqs::slurm

namespace aqs::slurm {

std::vector<std::string> comma_list(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view p : core::split(text, ',')) {
    if (!p.empty()) out.emplace_back(p);
  }
  return out;
}

std::int64_t parse_report_time(std::string_view text, std::int64_t now) {
  const std::string t(text);
  const auto bad = [&]() -> std::int64_t {
    throw std::invalid_argument("invalid time '" + t +
                                "' (YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY], now, today, yesterday or Unix seconds)");
  };
  if (t.empty()) return bad();
  const std::time_t n = static_cast<std::time_t>(now);
  std::tm day{};
  ::localtime_r(&n, &day);
  day.tm_hour = day.tm_min = day.tm_sec = 0;
  day.tm_isdst = -1;
  if (t == "now") return now;
  if (t == "today") return static_cast<std::int64_t>(std::mktime(&day));
  if (t == "yesterday") {
    day.tm_mday -= 1;
    return static_cast<std::int64_t>(std::mktime(&day));
  }
  if (std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (t.size() > 12) return bad();
    return std::stoll(t);
  }
  std::tm tm{};
  tm.tm_isdst = -1;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char tail = 0;
  if (std::sscanf(t.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &s, &tail) == 6 ||
      std::sscanf(t.c_str(), "%4d-%2d-%2dT%2d:%2d%c", &y, &mo, &d, &h, &mi, &tail) == 5 ||
      std::sscanf(t.c_str(), "%4d-%2d-%2d%c", &y, &mo, &d, &tail) == 3) {
    // parsed
  } else if (std::sscanf(t.c_str(), "%2d/%2d/%2d%c", &mo, &d, &y, &tail) == 3) {
    y += 2000;
  } else if (std::sscanf(t.c_str(), "%2d/%2d%c", &mo, &d, &tail) == 2) {
    y = day.tm_year + 1900;
  } else {
    return bad();
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 || y < 1970 || y > 2999) return bad();
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return static_cast<std::int64_t>(std::mktime(&tm));
}

std::string report_time(std::int64_t t) {
  const std::time_t x = static_cast<std::time_t>(t);
  std::tm tm{};
  ::localtime_r(&x, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

std::string sreport_account_utilization(const std::vector<usage_row>& rows, std::int64_t from, std::int64_t to,
                                        std::string_view unit, print_style style, bool header,
                                        const std::string& cluster) {
  std::map<std::string, std::vector<const usage_row*>> by_account;
  std::map<std::string, double> totals;
  for (const usage_row& r : rows) {
    by_account[r.account].push_back(&r);
    totals[r.account] += r.cpu_seconds;
  }
  double all = 0;
  for (const auto& [a, v] : totals) all += v;
  const auto used = [&](double secs) -> std::string {
    char buf[64];
    if (unit == "percent") {
      std::snprintf(buf, sizeof buf, "%.2f%%", all > 0 ? 100.0 * secs / all : 0.0);
    } else {
      const double div = unit == "hours" ? 3600.0 : unit == "seconds" ? 1.0 : 60.0;
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(secs / div + 0.5));
    }
    return buf;
  };
  const std::vector<print_field> fields = {{"Cluster", 9, value_kind::text, "cluster"},
                                           {"Account", 15, value_kind::text, "account"},
                                           {"Login", 9, value_kind::text, "login"},
                                           {"Proper Name", 15, value_kind::text, "name"},
                                           {"Used", 8, value_kind::text, "used"}};
  std::vector<std::vector<print_value>> out;
  for (auto& [account, users] : by_account) {
    std::sort(users.begin(), users.end(), [](const usage_row* a, const usage_row* b) { return a->user < b->user; });
    out.push_back({cluster, account, std::string(), std::string(), used(totals[account])});
    for (const usage_row* u : users) out.push_back({cluster, account, u->user, u->user, used(u->cpu_seconds)});
  }
  std::string text;
  if (header) {
    const std::string rule(80, '-');
    const char* what = unit == "hours" ? "CPU Hours" : unit == "seconds" ? "CPU Seconds" : unit == "percent" ? "Percentage of Total" : "CPU Minutes";
    text += rule + "\nCluster/Account/User Utilization " + report_time(from) + " - " + report_time(to - 1) + " (" +
            std::to_string(to - from) + " secs)\nUsage reported in " + what + "\n" + rule + "\n";
  }
  text += render_print_fields(fields, out, style, header);
  return text;
}

}  // namespace aqs::slurm
