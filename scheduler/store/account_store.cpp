// account_store: named statements over the accounting tables, whole-tree checks before each write, audit rows.
#include "store/account_store.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include <pqxx/pqxx>

#include "core/json_string.hpp"
#include "store/migrations.hpp"

namespace aqs::store {

namespace {

// The limit columns, in the order every statement below binds them.
const std::vector<std::string> k_limit_col_list = {"max_jobs", "max_submit_jobs", "max_wall_s", "grp_cpus",
                                                   "max_cpus_per_user"};

// A table written by acct_insert_<entity>, acct_update_<entity> and acct_delete_<entity>: the key columns
// ($1.., in WHERE), then the other columns, then the limit columns, bound in that order (see write_row).
struct written_table {
  const char* entity;
  const char* table;
  std::vector<std::string> keys, values;
};

void prepare_writes(pqxx::connection& c, const written_table& w) {
  std::vector<std::string> values = w.values;
  values.insert(values.end(), k_limit_col_list.begin(), k_limit_col_list.end());
  std::string cols, params, sets, where;
  std::size_t n = 0;
  for (const std::string& k : w.keys) {
    ++n;
    cols += (n > 1 ? ", " : "") + k;
    params += (n > 1 ? ", $" : "$") + std::to_string(n);
    where += (n > 1 ? " AND " : "") + k + " = $" + std::to_string(n);
  }
  for (const std::string& v : values) {
    ++n;
    cols += ", " + v;
    params += ", $" + std::to_string(n);
    sets += (sets.empty() ? "" : ", ") + v + " = $" + std::to_string(n);
  }
  const std::string table = w.table, entity = w.entity;
  c.prepare("acct_insert_" + entity, "INSERT INTO " + table + " (" + cols + ") VALUES (" + params + ")");
  c.prepare("acct_update_" + entity, "UPDATE " + table + " SET " + sets + " WHERE " + where);
  c.prepare("acct_delete_" + entity, "DELETE FROM " + table + " WHERE " + where);
}

std::optional<int> opt_int(const std::optional<std::uint32_t>& v) {
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}

std::optional<std::uint32_t> read_limit(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return static_cast<std::uint32_t>(f.as<int>());
}

core::limits read_limits(const pqxx::row& r) {
  core::limits l;
  l.max_jobs = read_limit(r["max_jobs"]);
  l.max_submit_jobs = read_limit(r["max_submit_jobs"]);
  l.max_wall_s = read_limit(r["max_wall_s"]);
  l.grp_cpus = read_limit(r["grp_cpus"]);
  l.max_cpus_per_user = read_limit(r["max_cpus_per_user"]);
  return l;
}

std::int64_t to_us(time_point t) { return t.time_since_epoch().count(); }
time_point from_us(std::int64_t us) { return time_point{std::chrono::microseconds{us}}; }

void json_limit(std::string& out, const char* key, const std::optional<std::uint32_t>& v) {
  out += ",\"";
  out += key;
  out += "\":";
  out += v ? std::to_string(*v) : "null";
}

void json_limits(std::string& out, const core::limits& l) {
  json_limit(out, "MaxJobs", l.max_jobs);
  json_limit(out, "MaxSubmitJobs", l.max_submit_jobs);
  json_limit(out, "MaxWall", l.max_wall_s);
  json_limit(out, "GrpTRES_cpu", l.grp_cpus);
  json_limit(out, "MaxTRESPerUser_cpu", l.max_cpus_per_user);
}

std::string json_of(const core::account& a) {
  std::string out = "{\"parent\":";
  core::append_json_string(out, a.parent);
  out += ",\"shares\":" + std::to_string(a.shares);
  json_limits(out, a.lim);
  out += ",\"description\":";
  core::append_json_string(out, a.description);
  out += ",\"organization\":";
  core::append_json_string(out, a.organization);
  return out + "}";
}

std::string json_of(const core::user_association& u, bool is_default) {
  std::string out = "{\"user\":";
  core::append_json_string(out, u.user);
  out += ",\"account\":";
  core::append_json_string(out, u.account);
  out += ",\"shares\":" + std::to_string(u.shares);
  json_limits(out, u.lim);
  out += std::string(",\"default\":") + (is_default ? "true" : "false");
  return out + "}";
}

std::string json_of(const core::qos& q) {
  std::string out = "{\"priority\":" + std::to_string(q.priority);
  json_limits(out, q.lim);
  out += ",\"description\":";
  core::append_json_string(out, q.description);
  return out + "}";
}

void prepare_all(pqxx::connection& c) {
  std::string lim;
  for (const std::string& col : k_limit_col_list) lim += (lim.empty() ? "" : ", ") + col;
  c.prepare("acct_lock", "LOCK TABLE accounts IN SHARE ROW EXCLUSIVE MODE");
  c.prepare("acct_accounts", "SELECT name, parent, shares, description, organization, " + lim +
                                 " FROM accounts ORDER BY name");
  c.prepare("acct_users", "SELECT user_name, account, shares, " + lim + " FROM account_users ORDER BY user_name, account");
  c.prepare("acct_defaults", "SELECT user_name, account FROM account_default");
  c.prepare("acct_qos", "SELECT name, priority, description, " + lim + " FROM qos ORDER BY name");
  prepare_writes(c, {"account", "accounts", {"name"}, {"parent", "shares", "description", "organization"}});
  prepare_writes(c, {"user", "account_users", {"user_name", "account"}, {"shares"}});
  prepare_writes(c, {"qos", "qos", {"name"}, {"priority", "description"}});
  c.prepare("acct_set_default",
            "INSERT INTO account_default (user_name, account) VALUES ($1, $2)"
            " ON CONFLICT (user_name) DO UPDATE SET account = EXCLUDED.account");
  c.prepare("acct_audit_insert",
            "INSERT INTO accounting_audit (actor, action, entity, name, detail) VALUES ($1, $2, $3, $4, $5::jsonb)");
  c.prepare("acct_audit_list",
            "SELECT id, (extract(epoch FROM at) * 1000000)::bigint AS at_us, actor, action, entity, name,"
            " detail::text AS detail FROM accounting_audit ORDER BY id DESC LIMIT $1");
  c.prepare("acct_usage_insert",
            "INSERT INTO usage_records (job_id, user_name, account, qos, start_time, end_time, cpu_seconds,"
            " mem_mb_seconds, gpu_seconds) VALUES ($1, $2, $3, $4, to_timestamp($5::double precision / 1e6),"
            " to_timestamp($6::double precision / 1e6), $7, $8, $9) ON CONFLICT (job_id) DO NOTHING");
  c.prepare("acct_usage_since",
            "SELECT job_id, user_name, account, qos, (extract(epoch FROM start_time) * 1000000)::bigint AS start_us,"
            " (extract(epoch FROM end_time) * 1000000)::bigint AS end_us, cpu_seconds, mem_mb_seconds, gpu_seconds"
            " FROM usage_records WHERE end_time >= to_timestamp($1::double precision / 1e6) ORDER BY end_time, job_id");
  c.prepare("acct_usage_between",
            "SELECT user_name, account, count(*) AS jobs, sum(cpu_seconds) AS cpu, sum(mem_mb_seconds) AS mem,"
            " sum(gpu_seconds) AS gpu FROM usage_records WHERE end_time >= to_timestamp($1::double precision / 1e6)"
            " AND end_time < to_timestamp($2::double precision / 1e6) GROUP BY user_name, account"
            " ORDER BY account, user_name");
}

core::account_tree read_tree(pqxx::work& tx) {
  core::account_tree t;
  for (const pqxx::row& r : tx.exec_prepared("acct_accounts")) {
    core::account a;
    a.name = r["name"].as<std::string>();
    a.parent = r["parent"].is_null() ? std::string{} : r["parent"].as<std::string>();
    a.shares = static_cast<std::uint32_t>(r["shares"].as<int>());
    a.description = r["description"].as<std::string>();
    a.organization = r["organization"].as<std::string>();
    a.lim = read_limits(r);
    t.accounts.push_back(std::move(a));
  }
  for (const pqxx::row& r : tx.exec_prepared("acct_users")) {
    core::user_association u;
    u.user = r["user_name"].as<std::string>();
    u.account = r["account"].as<std::string>();
    u.shares = static_cast<std::uint32_t>(r["shares"].as<int>());
    u.lim = read_limits(r);
    t.associations.push_back(std::move(u));
  }
  for (const pqxx::row& r : tx.exec_prepared("acct_defaults")) {
    t.default_account[r["user_name"].as<std::string>()] = r["account"].as<std::string>();
  }
  for (const pqxx::row& r : tx.exec_prepared("acct_qos")) {
    core::qos q;
    q.name = r["name"].as<std::string>();
    q.priority = static_cast<std::uint32_t>(r["priority"].as<int>());
    q.description = r["description"].as<std::string>();
    q.lim = read_limits(r);
    t.qos_list.push_back(std::move(q));
  }
  return t;
}

void check(const core::account_tree& t) {
  if (auto e = core::validate(t)) throw account_refused(*e);
}

void write_audit(pqxx::work& tx, const std::string& actor, const char* action, const char* entity, const std::string& name,
           const std::string& detail) {
  if (actor.empty()) throw std::invalid_argument("account_store: a change needs the actor who made it");
  tx.exec_prepared("acct_audit_insert", actor, action, entity, name, detail);
}

core::user_association* find_user(core::account_tree& t, const std::string& user, const std::string& account) {
  for (core::user_association& u : t.associations) {
    if (u.user == user && u.account == account) return &u;
  }
  return nullptr;
}

std::optional<std::string> parent_param(const core::account& a) {
  if (a.parent.empty()) return std::nullopt;
  return a.parent;
}

// One row, bound in the order its insert and update statements share.
void write_row(pqxx::work& tx, const std::string& stmt, const core::account& a) {
  tx.exec_prepared(stmt, a.name, parent_param(a), static_cast<int>(a.shares), a.description, a.organization,
                   opt_int(a.lim.max_jobs), opt_int(a.lim.max_submit_jobs), opt_int(a.lim.max_wall_s),
                   opt_int(a.lim.grp_cpus), opt_int(a.lim.max_cpus_per_user));
}
void write_row(pqxx::work& tx, const std::string& stmt, const core::user_association& u) {
  tx.exec_prepared(stmt, u.user, u.account, static_cast<int>(u.shares), opt_int(u.lim.max_jobs),
                   opt_int(u.lim.max_submit_jobs), opt_int(u.lim.max_wall_s), opt_int(u.lim.grp_cpus),
                   opt_int(u.lim.max_cpus_per_user));
}
void write_row(pqxx::work& tx, const std::string& stmt, const core::qos& q) {
  tx.exec_prepared(stmt, q.name, static_cast<int>(q.priority), q.description, opt_int(q.lim.max_jobs),
                   opt_int(q.lim.max_submit_jobs), opt_int(q.lim.max_wall_s), opt_int(q.lim.grp_cpus),
                   opt_int(q.lim.max_cpus_per_user));
}

// add/modify of an account or a QOS (both named records): refused when the
// name is taken (add) or missing (modify), the changed tree checked, then the
// row ("acct_insert_<entity>" / "acct_update_<entity>") and its audit entry.
std::vector<core::account>& list_of(core::account_tree& t, const core::account&) { return t.accounts; }
std::vector<core::qos>& list_of(core::account_tree& t, const core::qos&) { return t.qos_list; }
std::string label_of(const core::account&) { return "account"; }  // in messages
std::string label_of(const core::qos&) { return "QOS"; }
std::string entity_of(const core::account&) { return "account"; }  // in statement names and the audit
std::string entity_of(const core::qos&) { return "qos"; }

template <class T>
void put_named(pqxx::work& tx, core::account_tree& t, const T& x, bool add, const std::string& actor) {
  std::vector<T>& list = list_of(t, x);
  const std::string label = label_of(x), entity = entity_of(x);
  auto cur = std::find_if(list.begin(), list.end(), [&](const T& y) { return y.name == x.name; });
  if (add) {
    if (cur != list.end()) throw account_refused(label + " " + x.name + " already exists");
    list.push_back(x);
  } else {
    if (cur == list.end()) throw not_found("no " + label + " " + x.name);
    *cur = x;
  }
  check(t);
  write_row(tx, (add ? "acct_insert_" : "acct_update_") + entity, x);
  write_audit(tx, actor, add ? "add" : "modify", entity.c_str(), x.name, json_of(x));
}

// delete of an account or a QOS: not_found when it is missing, then `refuse`
// (which may throw account_refused), then the row and its audit entry.
template <class T, class Refuse>
void drop_named(pqxx::work& tx, core::account_tree& t, const std::string& name, const std::string& actor,
                Refuse refuse) {
  const T kind{};
  std::vector<T>& list = list_of(t, kind);
  auto cur = std::find_if(list.begin(), list.end(), [&](const T& y) { return y.name == name; });
  if (cur == list.end()) throw not_found("no " + label_of(kind) + " " + name);
  refuse();
  const std::string detail = json_of(*cur);
  tx.exec_prepared("acct_delete_" + entity_of(kind), name);
  write_audit(tx, actor, "delete", entity_of(kind).c_str(), name, detail);
}

}  // namespace

account_store::account_store(std::string conninfo) : db_(std::move(conninfo), prepare_all) {}

account_store::~account_store() = default;

template <class Change>
void account_store::change_tree(Change&& change) {
  in_transaction([&](pqxx::work& tx) {
    tx.exec_prepared("acct_lock");
    core::account_tree t = read_tree(tx);
    change(tx, t);
  });
}

template <class Named>
void account_store::put(const Named& x, bool add, const std::string& actor) {
  change_tree([&](pqxx::work& tx, core::account_tree& t) { put_named(tx, t, x, add, actor); });
}

core::account_tree account_store::load() {
  return in_transaction([](pqxx::work& tx) { return read_tree(tx); });
}

void account_store::add_account(const core::account& a, const std::string& actor) { put(a, true, actor); }

void account_store::modify_account(const core::account& a, const std::string& actor) { put(a, false, actor); }

void account_store::delete_account(const std::string& name, const std::string& actor) {
  change_tree([&](pqxx::work& tx, core::account_tree& t) {
    drop_named<core::account>(tx, t, name, actor, [&] {
      if (name == core::k_root_account) throw account_refused("the root account cannot be deleted");
      for (const core::account& a : t.accounts) {
        if (a.parent == name) throw account_refused("account " + name + " still has sub-account " + a.name);
      }
      for (const core::user_association& u : t.associations) {
        if (u.account == name) throw account_refused("account " + name + " still has user " + u.user);
      }
    });
  });
}

void account_store::add_user(const core::user_association& u, bool make_default, const std::string& actor) {
  change_tree([&](pqxx::work& tx, core::account_tree& t) {
    if (find_user(t, u.user, u.account)) {
      throw account_refused("user " + u.user + " is already in account " + u.account);
    }
    const bool first = std::none_of(t.associations.begin(), t.associations.end(),
                                    [&](const core::user_association& x) { return x.user == u.user; });
    t.associations.push_back(u);
    const bool is_default = make_default || first;
    if (is_default) t.default_account[u.user] = u.account;
    check(t);
    write_row(tx, "acct_insert_user", u);
    if (is_default) tx.exec_prepared("acct_set_default", u.user, u.account);
    write_audit(tx, actor, "add", "user", u.user + "@" + u.account, json_of(u, is_default));
  });
}

void account_store::modify_user(const core::user_association& u, const std::string& actor) {
  change_tree([&](pqxx::work& tx, core::account_tree& t) {
    core::user_association* cur = find_user(t, u.user, u.account);
    if (!cur) throw not_found("user " + u.user + " is not in account " + u.account);
    *cur = u;
    check(t);
    write_row(tx, "acct_update_user", u);
    auto d = t.default_account.find(u.user);
    write_audit(tx, actor, "modify", "user", u.user + "@" + u.account,
          json_of(u, d != t.default_account.end() && d->second == u.account));
  });
}

void account_store::set_default_account(const std::string& user, const std::string& account,
                                        const std::string& actor) {
  change_tree([&](pqxx::work& tx, core::account_tree& t) {
    core::user_association* cur = find_user(t, user, account);
    if (!cur) {
      throw account_refused("user " + user + " is not in account " + account + ", so it cannot be the default");
    }
    t.default_account[user] = account;
    check(t);
    tx.exec_prepared("acct_set_default", user, account);
    write_audit(tx, actor, "modify", "user", user + "@" + account, json_of(*cur, true));
  });
}

void account_store::delete_user(const std::string& user, const std::string& account, const std::string& actor) {
  change_tree([&](pqxx::work& tx, core::account_tree& t) {
    core::user_association* cur = find_user(t, user, account);
    if (!cur) throw not_found("user " + user + " is not in account " + account);
    auto d = t.default_account.find(user);
    const bool is_default = d != t.default_account.end() && d->second == account;
    const std::size_t accounts = static_cast<std::size_t>(
        std::count_if(t.associations.begin(), t.associations.end(),
                      [&](const core::user_association& x) { return x.user == user; }));
    if (is_default && accounts > 1) {
      throw account_refused("account " + account + " is user " + user +
                            "'s default account; make another one the default first");
    }
    const std::string detail = json_of(*cur, is_default);
    tx.exec_prepared("acct_delete_user", user, account);  // the default row goes with it (cascade)
    write_audit(tx, actor, "delete", "user", user + "@" + account, detail);
  });
}

void account_store::add_qos(const core::qos& q, const std::string& actor) { put(q, true, actor); }

void account_store::modify_qos(const core::qos& q, const std::string& actor) { put(q, false, actor); }

void account_store::delete_qos(const std::string& name, const std::string& actor) {
  change_tree([&](pqxx::work& tx, core::account_tree& t) { drop_named<core::qos>(tx, t, name, actor, [] {}); });
}

bool account_store::record_usage(const usage_record& r) {
  auto bad = [](double v) { return !std::isfinite(v) || v < 0; };
  if (bad(r.cpu_seconds) || bad(r.mem_mb_seconds) || bad(r.gpu_seconds)) {
    throw std::invalid_argument("usage of job " + std::to_string(r.job_id) + " must be finite and not negative");
  }
  if (r.end < r.start) throw std::invalid_argument("usage of job " + std::to_string(r.job_id) + " ends before it starts");
  return in_transaction([&](pqxx::work& tx) {
    const pqxx::result res =
        tx.exec_prepared("acct_usage_insert", r.job_id, r.user, r.account, r.qos, to_us(r.start), to_us(r.end),
                         r.cpu_seconds, r.mem_mb_seconds, r.gpu_seconds);
    return res.affected_rows() == 1;
  });
}

std::vector<usage_record> account_store::usage_since(time_point from) {
  return in_transaction([&](pqxx::work& tx) {
    std::vector<usage_record> out;
    for (const pqxx::row& row : tx.exec_prepared("acct_usage_since", to_us(from))) {
      usage_record r;
      r.job_id = row["job_id"].as<std::int64_t>();
      r.user = row["user_name"].as<std::string>();
      r.account = row["account"].as<std::string>();
      r.qos = row["qos"].as<std::string>();
      r.start = from_us(row["start_us"].as<std::int64_t>());
      r.end = from_us(row["end_us"].as<std::int64_t>());
      r.cpu_seconds = row["cpu_seconds"].as<double>();
      r.mem_mb_seconds = row["mem_mb_seconds"].as<double>();
      r.gpu_seconds = row["gpu_seconds"].as<double>();
      out.push_back(std::move(r));
    }
    return out;
  });
}

std::vector<usage_total> account_store::usage_between(time_point from, time_point to) {
  return in_transaction([&](pqxx::work& tx) {
    std::vector<usage_total> out;
    for (const pqxx::row& row : tx.exec_prepared("acct_usage_between", to_us(from), to_us(to))) {
      usage_total u;
      u.user = row["user_name"].as<std::string>();
      u.account = row["account"].as<std::string>();
      u.jobs = row["jobs"].as<std::int64_t>();
      u.cpu_seconds = row["cpu"].as<double>();
      u.mem_mb_seconds = row["mem"].as<double>();
      u.gpu_seconds = row["gpu"].as<double>();
      out.push_back(std::move(u));
    }
    return out;
  });
}

std::vector<audit_entry> account_store::audit(std::size_t limit) {
  return in_transaction([&](pqxx::work& tx) {
    std::vector<audit_entry> out;
    for (const pqxx::row& row : tx.exec_prepared("acct_audit_list", static_cast<std::int64_t>(limit))) {
      audit_entry e;
      e.id = row["id"].as<std::int64_t>();
      e.at = from_us(row["at_us"].as<std::int64_t>());
      e.actor = row["actor"].as<std::string>();
      e.action = row["action"].as<std::string>();
      e.entity = row["entity"].as<std::string>();
      e.name = row["name"].as<std::string>();
      e.detail = row["detail"].as<std::string>();
      out.push_back(std::move(e));
    }
    return out;
  });
}

}  // namespace aqs::store
