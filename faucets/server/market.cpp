// market: contracts, the owners table, charges and the debt-limit rule.
#include "server/market.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "cluster_link/word_table.hpp"

namespace aqs::faucets {

using nlohmann::json;

namespace {

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Reads an optional number >= 0 (or any number when `any`); error text or nullopt.
std::optional<std::string> read_number(const json& j, const char* key, double& out, bool required) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return std::string("the contract needs \"") + key + "\"";
    return std::nullopt;
  }
  if (!it->is_number() || !std::isfinite(it->get<double>())) {
    return std::string("the contract's ") + key + " must be a number, not " + it->dump().substr(0, 40);
  }
  out = it->get<double>();
  return std::nullopt;
}

}  // namespace

std::variant<job_contract, std::string> parse_contract(const json& j, double now) {
  if (!j.is_object()) return std::string("the contract must be an object {\"deadline\", \"max_price\", \"value\", ...}");
  for (const auto& [k, v] : j.items()) {
    if (k != "deadline" && k != "max_price" && k != "value" && k != "decay_s" && k != "best_effort") {
      return "the contract has no field \"" + k.substr(0, 40) +
             "\" (known: deadline, max_price, value, decay_s, best_effort)";
    }
  }
  job_contract c;
  if (auto e = read_number(j, "deadline", c.deadline, true)) return *e;
  if (auto e = read_number(j, "max_price", c.max_price, true)) return *e;
  if (auto e = read_number(j, "value", c.value, true)) return *e;
  if (auto e = read_number(j, "decay_s", c.decay_s, false)) return *e;
  if (c.max_price < 0) return "the contract's max_price must be >= 0, not " + num(c.max_price);
  if (c.value < 0) return "the contract's value must be >= 0, not " + num(c.value);
  if (c.decay_s < 0) return "the contract's decay_s must be >= 0, not " + num(c.decay_s);
  if (c.max_price > 1e9 || c.value > 1e12 || c.decay_s > 1e9) return "the contract's numbers are too large";
  if (!(c.deadline > now)) {
    return "the contract's deadline is in the past (" + num(std::ceil(now - c.deadline)) + " s ago)";
  }
  if (c.deadline > now + 3.2e7 * 10) return "the contract's deadline is more than ten years away";
  if (const auto b = j.find("best_effort"); b != j.end() && !b->is_null()) {
    if (!b->is_boolean()) return "the contract's best_effort must be true or false";
    c.best_effort = b->get<bool>();
  }
  return c;
}

json to_json(const job_contract& c) {
  return json{{"deadline", c.deadline},
              {"max_price", c.max_price},
              {"value", c.value},
              {"decay_s", c.decay_s},
              {"best_effort", c.best_effort}};
}

contract_terms terms_at(const job_contract& c, double now) {
  contract_terms t;
  t.deadline_in_s = c.deadline - now;
  t.max_price = c.max_price;
  t.value = c.value;
  t.decay_s = c.decay_s;
  t.best_effort = c.best_effort;
  return t;
}

std::int64_t charge_micro(double proc_seconds, double price) {
  if (!std::isfinite(proc_seconds) || !std::isfinite(price) || proc_seconds < 0 || price < 0) {
    throw std::invalid_argument("a charge needs processor-seconds and a price >= 0");
  }
  const double micro = std::round(proc_seconds * price * static_cast<double>(k_micro));
  if (micro > 9.0e15) throw std::invalid_argument("a charge past 9e9 credits");
  return static_cast<std::int64_t>(micro);
}

owners_table owners_table::parse(const std::string& text, const std::string& origin) {
  owners_table t;
  int line = 0;
  for (const auto& row : parse_word_table(text, origin, 3, "cluster NAME OWNER | home USER CLUSTER | limit OWNER CREDITS")) {
    ++line;
    const std::string where = origin + ": entry " + std::to_string(line) + " (" + row[0] + " " + row[1] + ")";
    if (row[0] == "cluster") {
      if (!t.owners_.emplace(row[1], row[2]).second) throw std::runtime_error(where + ": the cluster has two owners");
    } else if (row[0] == "home") {
      if (!t.homes_.emplace(row[1], row[2]).second) throw std::runtime_error(where + ": the user has two homes");
    } else if (row[0] == "limit") {
      char* end = nullptr;
      const double credits = std::strtod(row[2].c_str(), &end);
      if (end == row[2].c_str() || *end != '\0' || !std::isfinite(credits) || credits < 0 || credits > 9e9) {
        throw std::runtime_error(where + ": the limit must be a number of credits >= 0, not '" + row[2] + "'");
      }
      if (!t.limits_.emplace(row[1], charge_micro(credits, 1.0)).second) {
        throw std::runtime_error(where + ": the owner has two limits");
      }
    } else {
      throw std::runtime_error(where + ": expected cluster, home or limit first, not '" + row[0] + "'");
    }
  }
  for (const auto& [user, cluster] : t.homes_) {
    if (!t.owners_.contains(cluster)) {
      throw std::runtime_error(origin + ": home " + user + " " + cluster + ": no 'cluster " + cluster +
                               " OWNER' line names its owner");
    }
  }
  return t;
}

owners_table owners_table::load(const std::filesystem::path& file) {
  return parse(read_text_file(file, "owners table"), file.string());
}

std::optional<std::string> owners_table::owner_of(const std::string& cluster) const {
  if (const auto it = owners_.find(cluster); it != owners_.end()) return it->second;
  return std::nullopt;
}

std::optional<std::string> owners_table::home_of(const std::string& user) const {
  if (const auto it = homes_.find(user); it != homes_.end()) return it->second;
  if (const auto it = homes_.find("*"); it != homes_.end()) return it->second;
  return std::nullopt;
}

std::optional<std::string> owners_table::payer_of(const std::string& user) const {
  const auto home = home_of(user);
  return home ? owner_of(*home) : std::nullopt;
}

std::optional<std::int64_t> owners_table::limit_of(const std::string& owner) const {
  if (const auto it = limits_.find(owner); it != limits_.end()) return it->second;
  return std::nullopt;
}

json to_json(const ledger_entry& e) {
  return json{{"id", e.id},
              {"job_id", e.job_id},
              {"time", e.time},
              {"user", e.user},
              {"payer", e.payer},
              {"payee", e.payee},
              {"home_cluster", e.home_cluster},
              {"cluster", e.cluster},
              {"proc_seconds", e.proc_seconds},
              {"price", e.price},
              {"amount", static_cast<double>(e.amount_micro) / k_micro},
              {"amount_micro", e.amount_micro}};
}

std::optional<ledger_entry> entry_for(const owners_table& owners, std::int64_t job_id, const std::string& user,
                                      const std::string& cluster, double proc_seconds, double price, std::string* why) {
  const auto home = owners.home_of(user);
  if (!home) {
    *why = "user '" + user + "' has no home cluster in the owners table";
    return std::nullopt;
  }
  const auto payer = owners.owner_of(*home);
  const auto payee = owners.owner_of(cluster);
  if (!payer || !payee) {
    *why = "cluster '" + (payer ? cluster : *home) + "' has no owner in the owners table";
    return std::nullopt;
  }
  if (*payer == *payee) {
    *why = "it ran on a cluster of its home's owner '" + *payer + "'";
    return std::nullopt;
  }
  ledger_entry e;
  e.job_id = job_id;
  e.user = user;
  e.payer = *payer;
  e.payee = *payee;
  e.home_cluster = *home;
  e.cluster = cluster;
  e.proc_seconds = proc_seconds;
  e.price = price;
  e.amount_micro = charge_micro(proc_seconds, price);
  return e;
}

std::optional<std::string> debt_refusal(const owners_table& owners, const std::string& user, const std::string& cluster,
                                        std::int64_t balance_micro) {
  const auto payer = owners.payer_of(user);
  if (!payer) return std::nullopt;
  const auto limit = owners.limit_of(*payer);
  if (!limit || balance_micro >= -*limit) return std::nullopt;
  const auto owner = owners.owner_of(cluster);
  if (owner && *owner == *payer) return std::nullopt;
  return "cluster " + cluster + " refuses work from owner '" + *payer + "': " + credits_text(-balance_micro) +
         " credits in debt, beyond its limit of " + credits_text(*limit);
}

std::string credits_text(std::int64_t micro) {
  const bool neg = micro < 0;
  const std::uint64_t m = neg ? static_cast<std::uint64_t>(-(micro + 1)) + 1 : static_cast<std::uint64_t>(micro);
  std::string frac = std::to_string(m % k_micro);
  frac = std::string(6 - frac.size(), '0') + frac;
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return (neg ? "-" : "") + std::to_string(m / k_micro) + (frac.empty() ? "" : "." + frac);
}

}  // namespace aqs::faucets
