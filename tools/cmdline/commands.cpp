// commands: small option scanner for fkill, fjobs and fnodes.
#include "cmdline/commands.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <csignal>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "cmdline/option_scan.hpp"
#include "cmdline/time_limit.hpp"
#include "cmdline/text_util.hpp"
#include "cmdline/usage_error.hpp"

namespace aqs::cmdline {

namespace {

struct opt_spec {
  char short_name;  // 0: none
  std::string_view long_name;
  bool takes_value;
};

constexpr std::array<opt_spec, 3> k_common = {{
    {0, "json", false},
    {0, "socket", true},
    {'h', "help", false},
}};

using scanned = scanned_words;  // options by long name

// Options anywhere; "--" makes the rest positional.
scanned scan(std::span<const std::string> args, std::span<const opt_spec> specific, std::string_view cmd) {
  auto find = [&](auto pred) -> const opt_spec* {
    for (const auto& o : specific) {
      if (pred(o)) return &o;
    }
    for (const auto& o : k_common) {
      if (pred(o)) return &o;
    }
    return nullptr;
  };
  // The option word args[i], "--name[=value]" or "-xVALUE", and its value
  // (the next word when not given inline).
  auto option = [&](scanned& out, std::size_t& i, bool is_long) {
    const std::string& w = args[i];
    const std::string_view wv(w);
    std::string_view name;
    std::optional<std::string_view> inline_value;
    const opt_spec* o = nullptr;
    if (is_long) {
      const auto eq = wv.find('=');
      name = wv.substr(0, eq);
      if (eq != std::string_view::npos) inline_value = wv.substr(eq + 1);
      o = find([&](const opt_spec& s) { return s.long_name == name.substr(2); });
    } else {
      name = wv.substr(0, 2);
      if (w.size() > 2) inline_value = wv.substr(2);
      o = find([&](const opt_spec& s) { return s.short_name != 0 && s.short_name == w[1]; });
    }
    if (o == nullptr) {
      throw usage_error("unknown option '" + shown(name) + "' (see " + std::string(cmd) + " --help)");
    }
    std::string value;
    if (o->takes_value) {
      if (inline_value) {
        value = std::string(*inline_value);
      } else {
        if (i + 1 >= args.size()) throw usage_error("option '" + std::string(name) + "' needs a value");
        value = args[++i];
      }
      if (value.empty()) throw usage_error("empty value for " + std::string(name));
    } else if (inline_value) {
      throw usage_error("option '" + std::string(name) + "' takes no value");
    }
    out.options.emplace_back(std::string(o->long_name), std::move(value));
  };
  return scan_words(
      args, [&](scanned& out, std::size_t& i) { option(out, i, true); },
      [&](scanned& out, std::size_t& i) { option(out, i, false); });
}

bool apply_common(common_options& c, const std::string& name, const std::string& value) {
  if (name == "json") {
    c.json = true;
  } else if (name == "help") {
    c.help = true;
  } else if (name == "socket") {
    c.socket = value;
  } else {
    return false;
  }
  return true;
}

// Decimal digits only, at most `max_digits` of them; nullopt otherwise.
std::optional<std::int64_t> digits(std::string_view text, std::size_t max_digits) {
  if (text.empty() || text.size() > max_digits) return std::nullopt;
  std::int64_t v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::int64_t parse_job_id(std::string_view text) {
  const auto v = digits(text, 15);
  if (!v || *v < 1) throw usage_error("invalid job id '" + shown(text) + "'");
  return *v;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// -M, --faucets, --faucets-ca, --token-file: fjobs and fkill through a
// Faucets server (faucets_options.hpp).
constexpr opt_spec k_faucets_specs[] = {
    {'M', "clusters", true}, {0, "faucets", true}, {0, "faucets-ca", true}, {0, "token-file", true}};

bool apply_faucets(faucets_options& f, const std::string& name, const std::string& value) {
  static constexpr std::pair<std::string_view, std::optional<std::string> faucets_options::*> k_fields[] = {
      {"clusters", &faucets_options::cluster},
      {"faucets", &faucets_options::url},
      {"faucets-ca", &faucets_options::ca_file},
      {"token-file", &faucets_options::token_file}};
  for (const auto& [option, field] : k_fields) {
    if (name == option) {
      f.*field = value;
      return true;
    }
  }
  return false;
}

template <std::size_t N>
std::vector<opt_spec> with_faucets(const std::array<opt_spec, N>& specific) {
  std::vector<opt_spec> all(specific.begin(), specific.end());
  all.insert(all.end(), std::begin(k_faucets_specs), std::end(k_faucets_specs));
  return all;
}

std::string check_user(const std::string& u) {
  if (u.size() > protocol::k_max_name) throw usage_error("user name is too long");
  for (const char c : u) {
    if (static_cast<unsigned char>(c) < 0x20) throw usage_error("user name contains a control character");
  }
  return u;
}

}  // namespace

std::string resolve_socket_path(const std::optional<std::string>& from_option, const char* env_value,
                                std::string_view system_default) {
  if (from_option && !from_option->empty()) return *from_option;
  if (env_value != nullptr && *env_value != '\0') return env_value;
  return std::string(system_default);
}

int parse_signal(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, int>, 12> names = {{
      {"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT}, {"ABRT", SIGABRT},
      {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"ALRM", SIGALRM},
      {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},
  }};
  if (!text.empty() && text.size() <= 2 && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    const int v = text.size() == 1 ? text[0] - '0' : (text[0] - '0') * 10 + (text[1] - '0');
    if (v >= 1 && v <= protocol::k_max_signal) return v;
  }
  std::string u = upper(text);
  if (u.starts_with("SIG")) u.erase(0, 3);
  for (const auto& [name, number] : names) {
    if (name == u) return number;
  }
  throw usage_error("invalid signal '" + shown(text) + "' (use a name like TERM, KILL, INT, USR1 or a number 1-64)");
}

fkill_command_line parse_fkill_command_line(std::span<const std::string> args) {
  static constexpr std::array<opt_spec, 2> specific = {{{'s', "signal", true}, {'u', "user", true}}};
  const scanned s = scan(args, with_faucets(specific), "fkill");
  fkill_command_line out;
  for (const auto& [name, value] : s.options) {
    if (apply_common(out.common, name, value)) continue;
    if (apply_faucets(out.faucets, name, value)) continue;
    if (name == "signal") out.signal = parse_signal(value);
    if (name == "user") out.user = check_user(value);
  }
  if (out.common.help) return out;
  for (const auto& p : s.positionals) {
    if (const auto us = p.find('_'); us != std::string::npos) {
      const std::string_view task = std::string_view(p).substr(us + 1);
      std::int64_t index = 0;
      bool ok = !task.empty() && task.size() <= 7;
      for (const char ch : task) {
        if (ch < '0' || ch > '9') ok = false;
        if (ok) index = index * 10 + (ch - '0');
      }
      if (!ok) throw usage_error("invalid array task '" + p + "' (expected ARRAY_TASK, such as 123_4)");
      out.array_tasks.emplace_back(parse_job_id(std::string_view(p).substr(0, us)), index);
      continue;
    }
    const auto id = parse_job_id(p);
    if (std::find(out.job_ids.begin(), out.job_ids.end(), id) == out.job_ids.end()) out.job_ids.push_back(id);
  }
  if (out.job_ids.size() > protocol::k_max_ids) throw usage_error("too many job ids");
  check_faucets_options(out.faucets, cluster_choice::any, out.common.socket.has_value(), "fkill");
  if (out.faucets.used()) {
    if (out.signal || out.user || !out.array_tasks.empty()) {
      throw usage_error(std::string(out.signal ? "--signal" : out.user ? "--user" : "an array task (ARRAY_TASK)") +
                        " does not go through a Faucets server: give the server's job ids (fkill -M all ID...)");
    }
    if (out.job_ids.empty()) throw usage_error("no job id given (fkill -M all ID... or fkill --faucets URL ID...)");
    return out;
  }
  if (out.job_ids.empty() && out.array_tasks.empty() && !out.user) {
    throw usage_error("no job id given (fkill ID... or fkill --user USER)");
  }
  return out;
}

protocol::cancel build_cancel(const fkill_command_line& cmd) {
  protocol::cancel c;
  c.job_ids = cmd.job_ids;
  if (cmd.signal) c.signal = *cmd.signal;
  c.user = cmd.user;
  return c;
}

fctl_command_line parse_fctl_command_line(std::span<const std::string> args) {
  static constexpr std::array<opt_spec, 3> specific = {{{0, "min", true}, {0, "max", true}, {'t', "time", true}}};
  const scanned s = scan(args, specific, "fctl");
  fctl_command_line out;
  auto count = [](const std::string& name, const std::string& value) {
    const auto v = digits(value, 7);
    if (!v || *v < 1) throw usage_error("invalid --" + name + " '" + shown(value) + "' (expected a number of processors, 1 or more)");
    return *v;
  };
  for (const auto& [name, value] : s.options) {
    if (apply_common(out.common, name, value)) continue;
    if (name == "min") out.min_pe = count(name, value);
    if (name == "max") out.max_pe = count(name, value);
    if (name == "time") {
      // "UNLIMITED" (scontrol's word) or "0" clears it.
      std::string upper;
      for (const char c : value) upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
      out.time_limit_s = upper == "UNLIMITED" || upper == "INFINITE" || value == "0" ? 0 : parse_time_limit(value);
    }
  }
  if (out.common.help) return out;
  static constexpr std::array<std::string_view, 6> actions = {"hold", "release", "suspend", "resume", "requeue", "update"};
  if (s.positionals.empty()) throw usage_error("no action given (fctl hold|release|suspend|resume|requeue|update ID...)");
  out.action = s.positionals.front();
  if (std::find(actions.begin(), actions.end(), out.action) == actions.end()) {
    throw usage_error("unknown action '" + out.action + "' (expected hold, release, suspend, resume, requeue or update)");
  }
  for (std::size_t i = 1; i < s.positionals.size(); ++i) {
    const auto id = parse_job_id(s.positionals[i]);
    if (std::find(out.job_ids.begin(), out.job_ids.end(), id) == out.job_ids.end()) out.job_ids.push_back(id);
  }
  if (out.job_ids.empty()) throw usage_error("no job id given (fctl " + out.action + " ID...)");
  if (out.job_ids.size() > protocol::k_max_ids) throw usage_error("too many job ids");
  const bool sized = out.min_pe || out.max_pe || out.time_limit_s;
  if (out.action == "update" && !sized) throw usage_error("update needs --min, --max or --time");
  if (out.action != "update" && sized) throw usage_error("--min, --max and --time go with update only");
  if (out.min_pe && out.max_pe && *out.min_pe > *out.max_pe) {
    throw usage_error("--min " + std::to_string(*out.min_pe) + " is above --max " + std::to_string(*out.max_pe));
  }
  return out;
}

protocol::control build_control(const fctl_command_line& cmd) { return control_request(cmd.action, cmd); }

std::string fctl_usage() {
  return "Usage: fctl ACTION [options] ID...\n"
         "Change your jobs (any job, for root), like Slurm's scontrol.\n"
         "  hold ID...       keep pending jobs from starting (JobHeldUser; by root: JobHeldAdmin)\n"
         "  release ID...    let held jobs start again (a job root held: root only)\n"
         "  suspend ID...    stop running jobs (SIGSTOP on every node) and free their processors;\n"
         "                   their time limits stop too\n"
         "  resume ID...     let suspended jobs run again once there is room: a rigid job on its\n"
         "                   old processors, an adaptive one on any (sent as a new map)\n"
         "  requeue ID...    kill running or suspended jobs and queue them again\n"
         "  update ID... [--min N] [--max N] [-t|--time LIMIT]\n"
         "                   a new processor range (adaptive jobs; rigid ones while pending, with\n"
         "                   --min equal to --max) or time limit (pending jobs; UNLIMITED clears it)\n"
         "      --json       print the result as JSON\n"
         "      --socket PATH  aqsd's socket (default: $AQS_SOCKET, else the system one)\n"
         "  -h, --help       this help\n";
}

fjobs_command_line parse_fjobs_command_line(std::span<const std::string> args) {
  static constexpr std::array<opt_spec, 9> specific = {{{'a', "all", false},
                                                         {'r', "array", false},
                                                         {'u', "user", true},
                                                         {'j', "jobs", true},
                                                         {'t', "states", true},
                                                         {0, "history", true},
                                                         {0, "limit", true},
                                                         {0, "efficiency", true},
                                                         {0, "fetch", true}}};
  const scanned s = scan(args, with_faucets(specific), "fjobs");
  fjobs_command_line out;
  for (const auto& [name, value] : s.options) {
    if (apply_common(out.common, name, value)) continue;
    if (apply_faucets(out.faucets, name, value)) continue;
    if (name == "all") out.all = true;
    if (name == "array") out.expand_arrays = true;
    if (name == "history") {
      // ID, or ARRAY_TASK ("3_1") as fkill and squeue name one task.
      const auto us = value.find('_');
      if (us == std::string::npos) {
        out.history = parse_job_id(value);
      } else {
        const auto task = digits(std::string_view(value).substr(us + 1), 15);
        if (!task) throw usage_error("invalid --history '" + shown(value) + "' (a job id, or ARRAY_TASK such as 3_1)");
        out.history_task.emplace(parse_job_id(std::string_view(value).substr(0, us)), *task);
      }
    }
    if (name == "efficiency") out.efficiency = parse_job_id(value);
    if (name == "fetch") out.fetch = parse_job_id(value);
    if (name == "limit") {
      const auto v = digits(value, 15);
      if (!v) throw usage_error("invalid --limit '" + shown(value) + "' (a number of jobs; 0: no limit)");
      out.limit = *v;
    }
    if (name == "user") out.user = check_user(value);
    if (name == "jobs") {
      for (const auto part : split(value, ',')) out.job_ids.push_back(parse_job_id(part));
    }
    if (name == "states") {
      for (const auto part : split(value, ',')) {
        const auto st = core::parse_job_state(upper(part));
        if (!st) {
          throw usage_error("invalid job state '" + shown(part) +
                            "' (use PENDING, RUNNING, RESIZING, SUSPENDED, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL)");
        }
        if (std::find(out.states.begin(), out.states.end(), *st) == out.states.end()) out.states.push_back(*st);
      }
    }
  }
  if (out.common.help) return out;
  if (!s.positionals.empty()) throw usage_error("unexpected argument '" + shown(s.positionals.front()) + "' (job ids go with -j)");
  if (out.job_ids.size() > protocol::k_max_ids) throw usage_error("too many job ids");
  if ((out.history || out.history_task) && (out.all || out.user || !out.job_ids.empty() || !out.states.empty() || out.limit)) {
    throw usage_error("--history shows one job: it takes no -a, -u, -j, -t or --limit");
  }
  if (out.efficiency && (out.history || out.history_task || out.all || out.user || !out.job_ids.empty() ||
                         !out.states.empty() || out.limit || out.expand_arrays || out.faucets.used())) {
    throw usage_error("--efficiency shows one job: it takes only --json (no -a, -u, -j, -t, -r, --limit, --history or -M)");
  }
  check_faucets_options(out.faucets, cluster_choice::list, out.common.socket.has_value(), "fjobs");
  if (out.fetch && !out.faucets.used()) {
    throw usage_error("--fetch goes with -M or --faucets (the staged outputs of a job sent through a Faucets server)");
  }
  if (out.fetch && (out.all || out.history || out.history_task)) {
    throw usage_error("--fetch fetches one job's outputs: it takes no -a or --history");
  }
  if (out.faucets.used() &&
      (out.user || !out.job_ids.empty() || !out.states.empty() || out.limit || out.expand_arrays || out.history_task)) {
    const char* which = out.user ? "-u" : !out.job_ids.empty() ? "-j" : !out.states.empty() ? "-t" : out.limit ? "--limit"
                        : out.history_task                                                 ? "--history ARRAY_TASK"
                                                                                           : "-r";
    throw usage_error(std::string(which) +
                      " does not go through a Faucets server: fjobs -M takes --all, --history ID and --json");
  }
  return out;
}

std::optional<std::int64_t> listing_limit(const fjobs_command_line& cmd) {
  if (cmd.limit) return *cmd.limit == 0 ? std::nullopt : cmd.limit;
  // A person reading a table of --all wants the recent past, not years of
  // history; scripts (--json) get everything unless they say otherwise.
  if (cmd.all && !cmd.common.json) return k_default_finished_window;
  return std::nullopt;
}

protocol::list_jobs build_list_jobs(const fjobs_command_line& cmd) {
  protocol::list_jobs l;
  // Asking for finished states or for ids means the user wants them even
  // without --all.
  l.all = cmd.all || !cmd.states.empty() || !cmd.job_ids.empty();
  l.user = cmd.user;
  l.job_ids = cmd.job_ids;
  l.states = cmd.states;
  return l;
}

fnodes_command_line parse_fnodes_command_line(std::span<const std::string> args) {
  static constexpr std::array<opt_spec, 1> specific = {{{0, "latency", false}}};
  const scanned s = scan(args, specific, "fnodes");
  fnodes_command_line out;
  for (const auto& [name, value] : s.options) {
    if (name == "latency") {
      out.latency = true;
    } else {
      apply_common(out.common, name, value);
    }
  }
  if (out.common.help) return out;
  if (!s.positionals.empty()) throw usage_error("unexpected argument '" + shown(s.positionals.front()) + "'");
  return out;
}

std::string fkill_usage() {
  return "Usage: fkill [options] ID...\n"
         "       fkill [options] --user USER\n"
         "Cancel jobs (your own only, unless you are root).\n"
         "  -s, --signal SIG   send only this signal (TERM, KILL, INT, USR1, ... or a number)\n"
         "                     instead of the normal cancel (SIGTERM, grace period, SIGKILL)\n"
         "  -u, --user USER    all jobs of USER (with IDs: only those of them owned by USER)\n"
         "      --json         print the result as JSON\n"
         "      --socket PATH  aqsd's socket (default: $AQS_SOCKET, else the system one)\n"
         + faucets_usage(cluster_choice::any) +
         "  -h, --help         this help\n";
}

std::string fjobs_usage() {
  return "Usage: fjobs [options]\n"
         "List queued and running jobs with state, size, processor map and times.\n"
         "  -a, --all             include finished jobs\n"
         "  -r, --array           each pending task of a job array on its own line\n"
         "                        (else one line per array: 123_[4-99])\n"
         "  -u, --user USER       only USER's jobs\n"
         "  -j, --jobs ID[,ID]    only these jobs\n"
         "  -t, --states S[,S]    only jobs in these states (e.g. running,pending)\n"
         "      --limit N         only the newest N jobs that match (0: all); the table of\n"
         "                        --all shows the newest 1000 unless told, --json all\n"
         "      --history ID      job ID's transitions instead: when, to which state and\n"
         "                        processors, and why (each resize with its phase times);\n"
         "                        ARRAY_TASK (3_1) for one task of an array\n"
         "      --efficiency ID   like seff: what finished job ID used of what it held\n"
         "                        (CPU time measured against its core-walltime, for an\n"
         "                        adaptive job the integral of its maps; peak memory\n"
         "                        against --mem); measured figures: its owner and root\n"
         "      --fetch ID        through a Faucets server (-M): job ID's outputs (its\n"
         "                        directory there, fsub -M --stage-in) into this directory\n"
         "      --json            print one JSON array of jobs (or of the events; with\n"
         "                        --efficiency one object)\n"
         "      --socket PATH     aqsd's socket (default: $AQS_SOCKET, else the system one)\n"
         + faucets_usage(cluster_choice::list) +
         "  -h, --help            this help\n"
         "Through a Faucets server (-M or --faucets) the table is ID GID CLUSTER USER NAME STATE\n"
         "NPROCS SUBMIT TIME, GID the job's id on its cluster (CLUSTER:ID), and --json prints\n"
         "the server's job objects.\n";
}

std::string fnodes_usage() {
  return "Usage: fnodes [options]\n"
         "List nodes, their processors, which job holds each, and their state.\n"
         "      --latency         the round-trip times between nodes instead: a matrix in\n"
         "                        milliseconds, a row per node measuring, a column per node\n"
         "                        measured ('-': not measured)\n"
         "      --json            print one JSON array of nodes (each with its measured\n"
         "                        round trips, \"latency\", when there are any)\n"
         "      --socket PATH     aqsd's socket (default: $AQS_SOCKET, else the system one)\n"
         "  -h, --help            this help\n";
}

}  // namespace aqs::cmdline
