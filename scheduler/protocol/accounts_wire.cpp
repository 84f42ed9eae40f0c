// accounts_wire (accounts_wire.hpp): the account tree as JSON.
#include "protocol/accounts_wire.hpp"

#include <stdexcept>

namespace aqs::protocol {

using nlohmann::json;

namespace {

const json& member(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) throw std::invalid_argument(std::string("accounts: '") + key + "' is missing");
  return j.at(key);
}

std::string text_of(const json& j, const char* key, bool required = true) {
  if (!j.is_object() || !j.contains(key)) {
    if (required) throw std::invalid_argument(std::string("accounts: '") + key + "' is missing");
    return {};
  }
  if (!j.at(key).is_string()) throw std::invalid_argument(std::string("accounts: '") + key + "' must be a string");
  return j.at(key).get<std::string>();
}

std::uint32_t count_of(const json& j, const char* key, std::uint32_t fallback) {
  if (!j.is_object() || !j.contains(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
    throw std::invalid_argument(std::string("accounts: '") + key + "' must be a whole number");
  }
  const auto n = v.get<std::uint64_t>();
  if (n > 0xffffffffu) throw std::invalid_argument(std::string("accounts: '") + key + "' is too large");
  return static_cast<std::uint32_t>(n);
}

std::optional<std::uint32_t> optional_count(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return count_of(j, key, 0);
}

core::limits limits_from_json(const json& j) {
  core::limits l;
  if (!j.is_object() || !j.contains("limits")) return l;
  const json& x = j.at("limits");
  if (!x.is_object()) throw std::invalid_argument("accounts: 'limits' must be an object");
  l.max_jobs = optional_count(x, "max_jobs");
  l.max_submit_jobs = optional_count(x, "max_submit_jobs");
  l.max_wall_s = optional_count(x, "max_wall_s");
  l.grp_cpus = optional_count(x, "grp_cpus");
  l.max_cpus_per_user = optional_count(x, "max_cpus_per_user");
  return l;
}

json array_of(const json& j, const char* key) {
  if (!j.contains(key)) return json::array();
  const json& v = j.at(key);
  if (!v.is_array()) throw std::invalid_argument(std::string("accounts: '") + key + "' must be a list");
  return v;
}

}  // namespace

json to_json(const core::limits& l) {
  json j = json::object();
  if (l.max_jobs) j["max_jobs"] = *l.max_jobs;
  if (l.max_submit_jobs) j["max_submit_jobs"] = *l.max_submit_jobs;
  if (l.max_wall_s) j["max_wall_s"] = *l.max_wall_s;
  if (l.grp_cpus) j["grp_cpus"] = *l.grp_cpus;
  if (l.max_cpus_per_user) j["max_cpus_per_user"] = *l.max_cpus_per_user;
  return j;
}

json to_json(const core::account& a) {
  return json{{"name", a.name},       {"parent", a.parent},           {"shares", a.shares},
              {"limits", to_json(a.lim)}, {"description", a.description}, {"organization", a.organization}};
}

json to_json(const core::user_association& u) {
  return json{{"user", u.user}, {"account", u.account}, {"shares", u.shares}, {"limits", to_json(u.lim)}};
}

json to_json(const core::qos& q) {
  return json{{"name", q.name}, {"priority", q.priority}, {"limits", to_json(q.lim)}, {"description", q.description}};
}

json to_json(const core::account_tree& t) {
  json accounts = json::array(), users = json::array(), qos = json::array(), defaults = json::object();
  for (const auto& a : t.accounts) accounts.push_back(to_json(a));
  for (const auto& u : t.associations) users.push_back(to_json(u));
  for (const auto& q : t.qos_list) qos.push_back(to_json(q));
  for (const auto& [user, account] : t.default_account) defaults[user] = account;
  return json{{"accounts", accounts}, {"users", users}, {"qos", qos}, {"defaults", defaults}};
}

core::account account_from_json(const json& j) {
  core::account a;
  a.name = text_of(j, "name");
  a.parent = text_of(j, "parent", false);
  a.shares = count_of(j, "shares", 1);
  a.lim = limits_from_json(j);
  a.description = text_of(j, "description", false);
  a.organization = text_of(j, "organization", false);
  return a;
}

core::user_association user_from_json(const json& j) {
  core::user_association u;
  u.user = text_of(j, "user");
  u.account = text_of(j, "account");
  u.shares = count_of(j, "shares", 1);
  u.lim = limits_from_json(j);
  return u;
}

core::qos qos_from_json(const json& j) {
  core::qos q;
  q.name = text_of(j, "name");
  q.priority = count_of(j, "priority", 0);
  q.lim = limits_from_json(j);
  q.description = text_of(j, "description", false);
  return q;
}

core::account_tree tree_from_json(const json& j) {
  if (!j.is_object()) throw std::invalid_argument("accounts: the tree must be an object");
  core::account_tree t;
  for (const json& a : array_of(j, "accounts")) t.accounts.push_back(account_from_json(a));
  for (const json& u : array_of(j, "users")) t.associations.push_back(user_from_json(u));
  for (const json& q : array_of(j, "qos")) t.qos_list.push_back(qos_from_json(q));
  if (j.contains("defaults")) {
    const json& d = member(j, "defaults");
    if (!d.is_object()) throw std::invalid_argument("accounts: 'defaults' must be an object");
    for (const auto& [user, account] : d.items()) {
      if (!account.is_string()) throw std::invalid_argument("accounts: a default account must be a string");
      t.default_account[user] = account.get<std::string>();
    }
  }
  return t;
}

}  // namespace aqs::protocol
