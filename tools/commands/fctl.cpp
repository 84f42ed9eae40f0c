// fctl: hold, release, suspend, resume, requeue and update jobs (scontrol's
// job verbs); only your own unless root. `fctl reserve` manages advance
// reservations (root; listing for everyone).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "client/client_connection.hpp"
#include "cmdline/commands.hpp"
#include "cmdline/run_command.hpp"
#include "slurm/reservations.hpp"
#include "slurm/slurm_commands.hpp"

using namespace aqs;

namespace {

constexpr const char* k_reserve_usage =
    "usage: fctl reserve list [--json]\n"
    "       fctl reserve create NAME (--nodes LIST | --cores N) (--duration TIME | --end TIME)\n"
    "                    [--start TIME] (--users A,B | --accounts X,Y) [--flags MAINT,IGNORE_JOBS]\n"
    "       fctl reserve update NAME [--start TIME] [--duration TIME | --end TIME] [--users ..] [--accounts ..]\n"
    "       fctl reserve delete NAME\n"
    "TIME as sbatch --begin (now+60, 16:00, 2026-12-01T08:00); --duration in minutes or [D-]HH:MM:SS.\n"
    "Jobs run in one with --reservation NAME; it sets its processors aside from its start.\n";

int reserve(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::fputs(k_reserve_usage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string verb = args[0];
  std::string socket;
  bool json = false;
  std::vector<std::string> words;
  std::string name;
  static const std::vector<std::pair<std::string, std::string>> keys = {
      {"--start", "StartTime"}, {"--end", "EndTime"},     {"--duration", "Duration"}, {"--nodes", "Nodes"},
      {"--cores", "CoreCnt"},   {"--users", "Users"},     {"--accounts", "Accounts"}, {"--flags", "Flags"}};
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--json") {
      json = true;
      continue;
    }
    if (a == "--socket" && i + 1 < args.size()) {
      socket = args[++i];
      continue;
    }
    bool known = false;
    for (const auto& [opt, key] : keys) {
      if (a == opt || a.starts_with(opt + "=")) {
        std::string value;
        if (a == opt) {
          if (i + 1 >= args.size()) throw cmdline::usage_error(opt + " needs a value");
          value = args[++i];
        } else {
          value = a.substr(opt.size() + 1);
        }
        words.push_back(key + "=" + value);
        known = true;
      }
    }
    if (known) continue;
    if (a.starts_with("-")) throw cmdline::usage_error("reserve: unknown option " + a + " (fctl reserve --help)");
    if (!name.empty()) throw cmdline::usage_error("reserve: one name only ('" + name + "' and '" + a + "')");
    name = a;
  }
  client::connection c(client::socket_path(socket.empty() ? std::nullopt : std::optional<std::string>(socket)));
  try {
    if (verb == "list" || verb == "show") {
      const nlohmann::json r =
          c.call(protocol::reservations{c.next_id(), "show", name.empty() ? std::nullopt : std::optional(name), {}});
      const std::string text = json ? r.at("reservations").dump() + "\n" : slurm::sinfo_reservations(r, true);
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    }
    if (name.empty()) throw cmdline::usage_error("reserve " + verb + " needs a reservation name");
    if (verb == "delete") {
      c.call(protocol::reservations{c.next_id(), "delete", name, {}});
      std::printf("Reservation %s deleted\n", name.c_str());
      return 0;
    }
    if (verb != "create" && verb != "update") {
      throw cmdline::usage_error("reserve: unknown action '" + verb + "' (list, create, update, delete)");
    }
    words.push_back("ReservationName=" + name);
    const nlohmann::json rec = slurm::reservation_record(words, std::time(nullptr), verb == "create");
    const nlohmann::json r = c.call(protocol::reservations{c.next_id(), verb, name, rec.dump()});
    if (json) {
      std::printf("%s\n", r.at("reservation").dump().c_str());
    } else {
      const auto& x = r.at("reservation");
      std::printf("Reservation %s %s: %s, %ld processors\n", name.c_str(), verb == "create" ? "created" : "updated",
                  x.at("nodes").get<std::string>().c_str(), x.at("core_count").get<long>());
    }
    return 0;
  } catch (const slurm::command_error& e) {
    throw cmdline::usage_error(std::string("reserve: ") + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "reserve") {
    return client::run_command("fctl", [&] { return reserve(std::vector<std::string>(argv + 2, argv + argc)); });
  }
  return client::run_command("fctl", argc, argv, cmdline::parse_fctl_command_line, cmdline::fctl_usage,
                             [](const cmdline::fctl_command_line& cmd) {
    client::connection c(client::socket_path(cmd.common.socket));
    return client::ask_for_jobs(c, cmdline::build_control(cmd), "fctl", cmd.common.json);
  });
}
