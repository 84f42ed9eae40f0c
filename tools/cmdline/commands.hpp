// commands: argument parsing of fkill, fjobs and fnodes, signal names, and finding aqsd's socket.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cmdline/faucets_options.hpp"
#include "protocol/messages.hpp"

namespace aqs::cmdline {

// Where the commands find aqsd (the contract in the design brief): --socket
// PATH, else $AQS_SOCKET (pass getenv's result; empty counts as unset), else
// `system_default`.
std::string resolve_socket_path(const std::optional<std::string>& from_option, const char* env_value,
                                std::string_view system_default);

// "TERM", "SIGTERM", "term" or "15" -> 15. Known names: HUP INT QUIT ABRT
// KILL USR1 USR2 ALRM TERM CONT STOP TSTP; numbers 1..64. Throws usage_error
// naming the text otherwise.
int parse_signal(std::string_view text);

// Options common to these commands: --json, --socket PATH, -h/--help.
// Accepted forms as for fsub ("--opt=v", "--opt v", "-xV", "-x V"), and here
// options may come before or after the positional arguments.
struct common_options {
  bool json = false;
  bool help = false;
  std::optional<std::string> socket;
};

// fkill [-s|--signal SIG] [-u|--user USER] [--json] [ID...]
// IDs or --user (or both) are required unless --help.
// fkill -M CLUSTER|all|auto ID... / fkill --faucets URL ID...: through a
// Faucets server, the server's job ids only (no --signal, --user, ARRAY_TASK).
struct fkill_command_line {
  common_options common;
  faucets_options faucets;
  std::vector<std::int64_t> job_ids;  // an array's id: all its tasks
  std::vector<std::pair<std::int64_t, std::int64_t>> array_tasks;  // "123_4": task 4 of array 123
  std::optional<int> signal;
  std::optional<std::string> user;
};
fkill_command_line parse_fkill_command_line(std::span<const std::string> args);
protocol::cancel build_cancel(const fkill_command_line& cmd);

// fjobs [-a|--all] [-u|--user USER] [-j|--jobs ID[,ID...]] [-t|--states S[,S...]] [--limit N] [--json]
// fjobs --history ID [--json]
// fjobs --efficiency ID [--json]: like seff, what a finished job used of
// what it held (issue 32).
// States are the job state names in any case (running, PENDING, node_fail).
// --history goes with no filter (usage_error otherwise).
// fjobs -M all|NAME [--faucets URL] [--all] [--history ID] [--json]: through a
// Faucets server (no -u, -j, -t, --limit, -r there).
struct fjobs_command_line {
  common_options common;
  faucets_options faucets;
  bool all = false;
  std::optional<std::string> user;
  std::vector<std::int64_t> job_ids;
  std::vector<core::job_state> states;
  std::optional<std::int64_t> history;  // one job's transitions instead of a list
  std::optional<std::pair<std::int64_t, std::int64_t>> history_task;  // --history ARRAY_TASK: that task's
  std::optional<std::int64_t> limit;    // --limit N: the newest N (0: no limit)
  bool expand_arrays = false;           // -r, --array: each pending array task on its own line
  std::optional<std::int64_t> efficiency;  // --efficiency ID: that job's CPU and memory efficiency
  std::optional<std::int64_t> fetch;       // -M --fetch ID: that job's staged outputs into the current directory
};
fjobs_command_line parse_fjobs_command_line(std::span<const std::string> args);
// How many of the newest matching jobs fjobs shows: --limit N (0: all);
// without it, the newest k_default_finished_window for the table of --all,
// and all of them otherwise (the queue, --json).
inline constexpr std::int64_t k_default_finished_window = 1000;
std::optional<std::int64_t> listing_limit(const fjobs_command_line& cmd);
protocol::list_jobs build_list_jobs(const fjobs_command_line& cmd);

// fctl ACTION [options] ID...   (scontrol's job verbs)
//   hold | release | suspend | resume | requeue ID...
//   update ID... [--min N] [--max N] [-t|--time LIMIT]
// ACTION comes first; at least one ID; update needs one of its options and
// the other actions take none of them.
struct fctl_command_line {
  common_options common;
  std::string action;
  std::vector<std::int64_t> job_ids;
  std::optional<std::int64_t> min_pe, max_pe;
  std::optional<std::int64_t> time_limit_s;  // 0: none
};
fctl_command_line parse_fctl_command_line(std::span<const std::string> args);
protocol::control build_control(const fctl_command_line& cmd);
// The control request of a job verb on a command line with job ids, sizes
// and a time limit: fctl's (build_control) and scontrol's.
template <class Line>
protocol::control control_request(const std::string& action, const Line& cmd) {
  return {.action = action, .job_ids = cmd.job_ids, .min_pe = cmd.min_pe, .max_pe = cmd.max_pe,
          .time_limit_s = cmd.time_limit_s};
}
std::string fctl_usage();

// fnodes [--latency] [--json]
struct fnodes_command_line {
  common_options common;
  bool latency = false;  // the round-trip matrix between nodes instead of the table
};
fnodes_command_line parse_fnodes_command_line(std::span<const std::string> args);

// --help texts.
std::string fkill_usage();
std::string fjobs_usage();
std::string fnodes_usage();

}  // namespace aqs::cmdline
