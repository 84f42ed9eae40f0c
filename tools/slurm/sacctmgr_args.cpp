// sacctmgr_args: the verb, entity, where/set parts and options of a sacctmgr command line.
#include "slurm/sacctmgr_args.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "core/text_util.hpp"

namespace aqs::slurm {

namespace {

// Slurm matches its keywords by prefix with a minimum length; these are the
// ones sacctmgr accepts here.
bool is(std::string_view typed, std::string_view full, std::size_t min) {
  const std::string t = core::ascii_lower(typed), f = core::ascii_lower(full);
  return t.size() >= std::min(min, f.size()) && t.size() <= f.size() && f.compare(0, t.size(), t) == 0;
}

std::vector<std::string> list_of(std::string_view v) {
  std::vector<std::string> out;
  for (std::string_view p : core::split(v, ',')) {
    if (!p.empty()) out.emplace_back(p);
  }
  return out;
}

[[noreturn]] void refuse(const std::string& why) { throw std::invalid_argument(why); }

}  // namespace

sacctmgr_command parse_sacctmgr(const std::vector<std::string>& args) {
  sacctmgr_command c;
  std::vector<std::string> words;
  for (const std::string& a : args) {
    if (a == "-i" || a == "--immediate") {
      c.immediate = true;
    } else if (a == "-n" || a == "--noheader") {
      c.header = false;
    } else if (a == "-p" || a == "--parsable") {
      c.style = print_style::parsable;
    } else if (a == "-P" || a == "--parsable2") {
      c.style = print_style::parsable2;
    } else if (a == "-s" || a == "--associations") {
      c.with_assoc = true;
    } else if (a.size() > 1 && a[0] == '-') {
      refuse("Unknown option: " + a);
    } else {
      words.push_back(a);
    }
  }
  if (words.empty()) refuse("no command given (add, modify, delete or show)");
  const std::string& verb = words[0];
  if (is(verb, "add", 3) || is(verb, "create", 2)) {
    c.verb = sacctmgr_verb::add;
  } else if (is(verb, "modify", 1) || is(verb, "update", 1)) {
    c.verb = sacctmgr_verb::modify;
  } else if (is(verb, "delete", 3) || is(verb, "remove", 3)) {
    c.verb = sacctmgr_verb::remove;
  } else if (is(verb, "show", 3) || is(verb, "list", 3)) {
    c.verb = sacctmgr_verb::show;
  } else {
    refuse("unknown command '" + verb + "' (add, modify, delete or show)");
  }
  if (words.size() < 2) refuse("" + verb + " needs account, user or qos");
  const std::string& what = words[1];
  if (is(what, "accounts", 3)) {
    c.entity = sacctmgr_entity::account;
  } else if (is(what, "users", 1)) {
    c.entity = sacctmgr_entity::user;
  } else if (is(what, "qos", 1)) {
    c.entity = sacctmgr_entity::qos;
  } else if (is(what, "associations", 3) && c.verb == sacctmgr_verb::show) {
    c.entity = sacctmgr_entity::user;
    c.with_assoc = true;
  } else {
    refuse("AQS knows accounts, users and qos, not '" + what + "'");
  }
  bool in_set = false;
  for (std::size_t i = 2; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (is(w, "where", 5)) {
      in_set = false;
      continue;
    }
    if (is(w, "set", 3)) {
      if (c.verb != sacctmgr_verb::modify) refuse("'set' belongs to modify");
      in_set = true;
      continue;
    }
    if (is(w, "withassoc", 5)) {
      c.with_assoc = true;
      continue;
    }
    const auto eq = w.find('=');
    if (eq == std::string::npos) {
      if (in_set) refuse("'" + w + "' needs a value (key=value)");
      for (std::string& n : list_of(w)) c.names.push_back(std::move(n));
      continue;
    }
    const std::string key = w.substr(0, eq), value = w.substr(eq + 1);
    if (!in_set && is(key, "format", 6)) {
      if (c.verb != sacctmgr_verb::show) refuse("format= belongs to show");
      for (const print_field& f : sacctmgr_format(value)) c.format.push_back(f);
    } else if (!in_set && (is(key, "names", 1) || (c.entity == sacctmgr_entity::user && is(key, "users", 1)))) {
      for (std::string& n : list_of(value)) c.names.push_back(std::move(n));
    } else if (!in_set && c.entity == sacctmgr_entity::user && is(key, "accounts", 3)) {
      for (std::string& n : list_of(value)) c.accounts.push_back(std::move(n));
    } else if (in_set || c.verb == sacctmgr_verb::add) {
      c.settings.emplace_back(key, value);
    } else {
      refuse("AQS cannot select by '" + key + "'");
    }
  }
  if (c.verb != sacctmgr_verb::show && c.names.empty()) {
    refuse("" + verb + " needs an account, user or qos name");
  }
  if (c.verb == sacctmgr_verb::modify && c.settings.empty()) {
    refuse("modify needs 'set' and at least one key=value");
  }
  if (c.verb == sacctmgr_verb::add && c.entity == sacctmgr_entity::user && c.accounts.empty()) {
    refuse("add user needs Account=NAME");
  }
  return c;
}

namespace {

// A limit key in Slurm's QOS spellings, mapped to core::set_limit's.
std::string qos_key(const std::string& key) {
  const std::string k = core::ascii_lower(key);
  if (k == "maxjobsperuser" || k == "maxjobspu") return "MaxJobs";
  if (k == "maxsubmitjobsperuser" || k == "maxsubmitjobspu" || k == "maxsubmitpu") return "MaxSubmitJobs";
  return key;
}

}  // namespace

std::optional<std::string> apply_settings(core::account& a, const sacctmgr_command& c) {
  // The settings that are the account's text, as typed.
  static constexpr std::pair<std::string_view, std::string core::account::*> k_text[] = {
      {"parent", &core::account::parent},
      {"description", &core::account::description},
      {"organization", &core::account::organization}};
  core::account next = a;
  for (const auto& [key, value] : c.settings) {
    const std::string k = core::ascii_lower(key);
    const auto text = std::find_if(std::begin(k_text), std::end(k_text), [&](const auto& t) { return t.first == k; });
    if (text != std::end(k_text)) {
      next.*(text->second) = value;
    } else if (k == "fairshare" || k == "shares") {
      if (auto e = core::parse_shares(value, next.shares)) return e;
    } else if (auto e = core::set_limit(next.lim, key, value)) {
      if (!e->empty()) return e;
    } else {
      return "Unknown option: " + key + "=" + value + " (for an account)";
    }
  }
  a = next;
  return std::nullopt;
}

std::optional<std::string> apply_settings(core::user_association& u, const sacctmgr_command& c,
                                          std::string* default_account) {
  core::user_association next = u;
  std::string def;
  for (const auto& [key, value] : c.settings) {
    const std::string k = core::ascii_lower(key);
    if (k == "fairshare" || k == "shares") {
      if (auto e = core::parse_shares(value, next.shares)) return e;
    } else if (k == "defaultaccount") {
      def = value;
    } else if (auto e = core::set_limit(next.lim, key, value)) {
      if (!e->empty()) return e;
    } else {
      return "Unknown option: " + key + "=" + value + " (for a user)";
    }
  }
  u = next;
  if (default_account && !def.empty()) *default_account = def;
  return std::nullopt;
}

std::optional<std::string> apply_settings(core::qos& q, const sacctmgr_command& c) {
  core::qos next = q;
  for (const auto& [key, value] : c.settings) {
    const std::string k = core::ascii_lower(key);
    if (k == "priority") {
      if (auto e = core::parse_qos_priority(value, next.priority)) return e;
    } else if (k == "description") {
      next.description = value;
    } else if (auto e = core::set_limit(next.lim, qos_key(key), value)) {
      if (!e->empty()) return e;
    } else {
      return "Unknown option: " + key + "=" + value + " (for a QOS)";
    }
  }
  q = next;
  return std::nullopt;
}

}  // namespace aqs::slurm
