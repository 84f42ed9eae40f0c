// aqs-sacctmgr: Slurm's sacctmgr over aqsd's accounts (issue 32): add,
// modify, delete and show of account, user and qos, with where/set, -i -n
// -p -P -s and format=. The settings are applied here to the record as aqsd
// keeps it (slurm/sacctmgr_args.hpp) and the whole record is sent; aqsd
// checks the tree, stores and audits the change (root only).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "protocol/accounts_wire.hpp"
#include "slurm/sacctmgr_args.hpp"
#include "slurm/slurm_client.hpp"

using namespace aqs;

namespace {

core::account_tree fetch_tree(client::connection& c) {
  const nlohmann::json r = c.call(protocol::accounts{c.next_id(), "show", {}, {}, {}, {}, false, {}, {}});
  return protocol::tree_from_json(r.at("tree"));
}

const char* entity_word(slurm::sacctmgr_entity e) {
  switch (e) {
    case slurm::sacctmgr_entity::account: return "account";
    case slurm::sacctmgr_entity::user: return "user";
    case slurm::sacctmgr_entity::qos: return "qos";
  }
  return "user";
}

void send_record(client::connection& c, const char* action, slurm::sacctmgr_entity e, const nlohmann::json& record,
                 bool make_default = false) {
  c.call(protocol::accounts{c.next_id(), action, std::string(entity_word(e)), record.dump(), {}, {}, make_default, {}, {}});
}

void send_delete(client::connection& c, slurm::sacctmgr_entity e, const std::string& name,
                 std::optional<std::string> account = std::nullopt) {
  c.call(protocol::accounts{c.next_id(), "delete", std::string(entity_word(e)), {}, name, std::move(account), false, {}, {}});
}

[[noreturn]] void fail(const std::string& why) { throw std::runtime_error(why); }

// The user's associations in `accounts` (all of them when empty).
std::vector<core::user_association> associations_of(const core::account_tree& t, const std::string& user,
                                                    const std::vector<std::string>& accounts) {
  std::vector<core::user_association> out;
  for (const auto& u : t.associations) {
    if (u.user != user) continue;
    if (!accounts.empty() && std::find(accounts.begin(), accounts.end(), u.account) == accounts.end()) continue;
    out.push_back(u);
  }
  return out;
}

int run(const std::string& name, const slurm::sacctmgr_command& cmd) {
  (void)name;
  client::connection c(client::socket_path(std::nullopt));
  const core::account_tree tree = fetch_tree(c);
  using slurm::sacctmgr_entity;
  using slurm::sacctmgr_verb;
  if (cmd.verb == sacctmgr_verb::show) {
    slurm::sacctmgr_query q;
    q.names = cmd.names;
    q.with_assoc = cmd.with_assoc;
    const auto fields = cmd.format.empty() ? slurm::sacctmgr_default_format(cmd.entity, cmd.with_assoc) : cmd.format;
    const std::string text = slurm::sacctmgr_show(tree, cmd.entity, fields, q, cmd.style, cmd.header);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  const auto find_account = [&](const std::string& n) -> const core::account* {
    for (const auto& a : tree.accounts) {
      if (a.name == n) return &a;
    }
    return nullptr;
  };
  const auto find_qos = [&](const std::string& n) -> const core::qos* {
    for (const auto& q : tree.qos_list) {
      if (q.name == n) return &q;
    }
    return nullptr;
  };
  switch (cmd.entity) {
    case sacctmgr_entity::account:
      for (const std::string& n : cmd.names) {
        if (cmd.verb == sacctmgr_verb::remove) {
          send_delete(c, cmd.entity, n);
          std::printf(" Deleting account(s)...\n  %s\n", n.c_str());
          continue;
        }
        const core::account* have = find_account(n);
        if (cmd.verb == sacctmgr_verb::add && have) fail("Account " + n + " already exists (nothing added)");
        if (cmd.verb == sacctmgr_verb::modify && !have) fail("Account " + n + " does not exist (nothing modified)");
        core::account a = have ? *have : core::account{n, std::string(core::k_root_account), 1, {}, "", ""};
        if (auto why = slurm::apply_settings(a, cmd)) fail(*why);
        send_record(c, cmd.verb == sacctmgr_verb::add ? "add" : "modify", cmd.entity, protocol::to_json(a));
        std::printf(cmd.verb == sacctmgr_verb::add ? " Adding Account(s)\n  %s\n" : " Modified account...\n  %s\n",
                    n.c_str());
      }
      return 0;
    case sacctmgr_entity::qos:
      for (const std::string& n : cmd.names) {
        if (cmd.verb == sacctmgr_verb::remove) {
          send_delete(c, cmd.entity, n);
          std::printf(" Deleting QOS(s)...\n  %s\n", n.c_str());
          continue;
        }
        const core::qos* have = find_qos(n);
        if (cmd.verb == sacctmgr_verb::add && have) fail("QOS " + n + " already exists (nothing added)");
        if (cmd.verb == sacctmgr_verb::modify && !have) fail("QOS " + n + " does not exist (nothing modified)");
        core::qos q = have ? *have : core::qos{n, 0, {}, ""};
        if (auto why = slurm::apply_settings(q, cmd)) fail(*why);
        send_record(c, cmd.verb == sacctmgr_verb::add ? "add" : "modify", cmd.entity, protocol::to_json(q));
        std::printf(cmd.verb == sacctmgr_verb::add ? " Adding QOS(s)\n  %s\n" : " Modified qos...\n  %s\n", n.c_str());
      }
      return 0;
    case sacctmgr_entity::user:
      for (const std::string& n : cmd.names) {
        if (cmd.verb == sacctmgr_verb::add) {
          for (const std::string& acct : cmd.accounts) {
            if (!associations_of(tree, n, {acct}).empty()) fail("User " + n + " is already in account " + acct + " (nothing added)");
            core::user_association u{n, acct, 1, {}};
            std::string def;
            if (auto why = slurm::apply_settings(u, cmd, &def)) fail(*why);
            send_record(c, "add", cmd.entity, protocol::to_json(u), def == acct);
            std::printf(" Adding User(s)\n  %s\n Associations =\n  U = %-9s A = %-10s C = aqs\n", n.c_str(), n.c_str(),
                        acct.c_str());
          }
          continue;
        }
        const auto mine = associations_of(tree, n, cmd.accounts);
        if (mine.empty()) fail("User " + n + " has no association" + (cmd.accounts.empty() ? "" : " in those accounts") + " (nothing " + (cmd.verb == sacctmgr_verb::remove ? "deleted" : "modified") + ")");
        for (core::user_association u : mine) {
          if (cmd.verb == sacctmgr_verb::remove) {
            send_delete(c, cmd.entity, n, u.account);
            std::printf(" Deleting user associations...\n  C = aqs        A = %-10s U = %s\n", u.account.c_str(), n.c_str());
            continue;
          }
          std::string def;
          if (auto why = slurm::apply_settings(u, cmd, &def)) fail(*why);
          send_record(c, "modify", cmd.entity, protocol::to_json(u), def == u.account);
          std::printf(" Modified user associations...\n  C = aqs        A = %-10s U = %s\n", u.account.c_str(), n.c_str());
        }
      }
      return 0;
  }
  return 0;
}

const char* k_usage =
    "Usage: sacctmgr [-i] [-n] [-p|-P] [-s] COMMAND ENTITY [NAMES] [where ...] [set KEY=VALUE ...]\n"
    "  add|modify|delete|show  account|user|qos\n"
    "  e.g. sacctmgr -i add account physics Fairshare=2 GrpTRES=cpu=64\n"
    "       sacctmgr -i add user alice Account=physics DefaultAccount=physics\n"
    "       sacctmgr -n -s list user alice format=account%20\n";

}  // namespace

int main(int argc, char** argv) {
  const std::string name = slurm::command_name(argv[0], "sacctmgr");
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help" || args[0] == "help")) {
    std::fputs(k_usage, stdout);
    return 0;
  }
  if (!args.empty() && (args[0] == "-V" || args[0] == "--version")) {
    std::printf("%s\n", slurm::k_version_line);
    return 0;
  }
  return slurm::run_slurm(name, [&]() -> int { return run(name, slurm::parse_sacctmgr(args)); });
}
