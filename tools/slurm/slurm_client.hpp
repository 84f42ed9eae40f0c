// slurm_client: what the Slurm-compatible commands ask aqsd, and how they
// end: Slurm's "CMD: error: ..." on stderr and exit status 1.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/client_connection.hpp"
#include "slurm/slurm_commands.hpp"
#include "slurm/slurm_format.hpp"
#include "cmdline/usage_error.hpp"
#include "protocol/messages.hpp"

namespace aqs::slurm {

// The uid of a user name (getpwnam), nullopt if unknown.
std::optional<std::int64_t> uid_of_user(const std::string& name);
// The calling user's name (getpwuid(getuid())), else the uid as text.
std::string current_user();
// "alice" stays, "1000" becomes that uid's name, "\x01me" (--me) the caller.
std::string resolve_user(const std::string& user_or_uid);

// The jobs `request` matches (all pages), as views. With `details`, finished
// jobs that were cancelled or killed by a signal get their history read
// (one more request each) for "CANCELLED by UID" and ExitCode's signal.
std::vector<job_view> fetch_jobs(client::connection& c, const protocol::list_jobs& request, bool details);
// A finished job's details from its history (one request): the nodes it
// ran on (NumNodes, NodeList), the signal that ended it and who cancelled
// it. Quietly nothing when the history cannot be read.
void add_history(client::connection& c, job_view& v, const uid_lookup& lookup);
// The nodes, with the processors running jobs hold on each.
std::vector<node_view> fetch_nodes(client::connection& c);

// Now, for the formats.
std::time_t now();

// fsub/frun's complaint in Slurm's words: "unknown option '--x' (see fsub
// --help)" becomes getopt's "unrecognized option '--x'\nTry \"sbatch --help\"
// for more information" (then `getopt_style`, printed without "error:"), and
// "fsub --help"/"frun --help" become "NAME --help".
std::string slurm_usage_message(const std::string& message, const std::string& name, bool& getopt_style);

// A Slurm command's main(): body() returns the exit status; failures are
// printed as Slurm prints them and give 1 (usage errors: as getopt does).
template <class Body>
int run_slurm(const std::string& name, Body&& body) noexcept {
  try {
    return body();
  } catch (const usage_error& e) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
  } catch (const cmdline::usage_error& e) {
    bool getopt_style = false;
    const std::string m = slurm_usage_message(e.what(), name, getopt_style);
    std::fprintf(stderr, getopt_style ? "%s: %s\n" : "%s: error: %s\n", name.c_str(), m.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: error: unexpected failure\n", name.c_str());
  }
  return 1;
}

// What "-V/--version" prints.
inline constexpr const char* k_version_line = "slurm 22.05.0 (AQS compatibility commands)";

// The start of the accounting commands (sshare, sprio, sreport): -h,
// --help and --usage print `usage`, -V/--version the version line; else
// body(args) inside run_slurm (one-line errors, exit 1).
template <class Body>
int accounting_main(int argc, char** argv, const char* default_name, const char* usage, Body&& body) noexcept {
  const std::string name = command_name(argv[0], default_name);
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const auto& a : args) {
    if (a == "-h" || a == "--help" || a == "--usage") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (a == "-V" || a == "--version") {
      std::printf("%s\n", k_version_line);
      return 0;
    }
  }
  return run_slurm(name, [&]() -> int { return body(args); });
}

// The start that the query commands' main() share: the name they answer to
// (argv[0]), their command line read by `parse`, --help/--usage printing
// usage() and -V/--version the version line; else body(name, cmd), all in
// run_slurm().
template <class Parse, class Usage, class Body>
int slurm_main(int argc, char** argv, const char* default_name, Parse&& parse, Usage&& usage, Body&& body) noexcept {
  const std::string name = command_name(argv[0], default_name);
  return run_slurm(name, [&]() -> int {
    const auto cmd = parse(std::vector<std::string>(argv + 1, argv + argc));
    bool wants_usage = cmd.help;
    if constexpr (requires { cmd.usage; }) wants_usage = wants_usage || cmd.usage;
    if (wants_usage) {
      const std::string text = usage();
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    }
    if (cmd.version) {
      std::printf("%s\n", k_version_line);
      return 0;
    }
    return body(name, cmd);
  });
}

// The output format a listing command (squeue, sinfo) was asked for, in
// Slurm's order: -o, else -O, else $ENV (read as -o's), else $ENV_LONG (as
// -O's) when the command has one; nullopt when none was asked for.
template <class Format, class Cmd>
std::optional<Format> asked_format(const Cmd& cmd, Format (*parse)(std::string_view),
                                   Format (*parse_long)(std::string_view), const char* env,
                                   const char* env_long = nullptr) {
  const auto set = [](const char* name) -> const char* {
    const char* v = name != nullptr ? std::getenv(name) : nullptr;
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  if (cmd.format) return parse(*cmd.format);
  if (cmd.long_format) return parse_long(*cmd.long_format);
  if (const char* v = set(env)) return parse(v);
  if (const char* v = set(env_long)) return parse_long(v);
  return std::nullopt;
}

// Whether an AQS command line parser takes the option as spelled (with its
// value, if any), followed by `tail` so that the line is complete: how sbatch
// and srun learn which Slurm options fsub and frun handle themselves.
template <class Parse>
bool parser_accepts(Parse&& parse, const std::string& spelled, const std::optional<std::string>& value,
                    const std::string& tail) {
  std::vector<std::string> probe;
  if (value && spelled.starts_with("--")) {
    probe.push_back(spelled + "=" + *value);
  } else {
    probe.push_back(spelled);
    if (value) probe.push_back(*value);
  }
  probe.push_back(tail);
  try {
    (void)parse(probe);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace aqs::slurm
