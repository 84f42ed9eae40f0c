// faucets_commands: what fsub, fjobs and fkill do through a Faucets server
// (-M, --faucets; see faucets_options.hpp for the options and faucets_api.hpp
// for the client), and the tables fjobs prints of the server's jobs.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cmdline/commands.hpp"
#include "faucets_client/faucets_api.hpp"
#include "cmdline/job_options.hpp"

namespace aqs::client {

// The client for a command's options: URL --faucets else $AQS_FAUCETS, CA
// --faucets-ca else $AQS_FAUCETS_CA, token $AQS_TOKEN else --token-file else
// ~/.aqs/faucets-token (faucets::resolve_client_options). Throws faucets::error.
faucets::client faucets_client_for(const cmdline::faucets_options& o,
                                   const faucets::environment& env = faucets::environment::of_process());

// fsub -M/--faucets: POSTs the job of `req` (protocol::to_json of its submit
// message's "job") for cluster -M (default auto) and prints
//   stdout: "Submitted job N" (N the server's id); --parsable: "N";
//           --json: {"job_id":N,"gid":...,"cluster":...,"state":...}
//   stderr: "fsub: job N went to cluster C (C:LOCAL)" when a cluster was
//           chosen at once (not with --json).
// With a contract (--deadline ...), it waits up to 30 s for the server's
// award: a refusal is "fsub: job N refused: REASON" on stderr, exit status 1.
// Returns the exit status; throws faucets::error.
int fsub_through_faucets(faucets::client& c, const cmdline::fsub_command_line& cmd, const cmdline::fsub_request& req,
                         std::FILE* out = stdout, std::FILE* err = stderr);

// fjobs -M all|NAME [--all] [--history ID] [--json]: the server's jobs (on
// cluster NAME only, unless all) as format_faucets_jobs_table or the JSON
// array the server gave; --history ID its events.
int fjobs_through_faucets(faucets::client& c, const cmdline::fjobs_command_line& cmd, std::FILE* out = stdout);

// fkill -M ... ID...: cancels each id. A job the server refuses (no such
// job, not yours) is one line "fkill: job N: why" on `err` and exit status 1,
// the others are still cancelled; no answer or a refused token throws.
// --json: one JSON array of the server's answers.
int fkill_through_faucets(faucets::client& c, const cmdline::fkill_command_line& cmd, std::FILE* out = stdout,
                          std::FILE* err = stderr);

// One line per job under a header:
//   ID  GID  CLUSTER  USER  NAME  STATE  NPROCS  SUBMIT  TIME
// GID "CLUSTER:LOCAL" ("-" while the server holds the job), NPROCS the
// processors it has (while it has none: its range, "2-8"), SUBMIT the
// submit time to the second (UTC, as the server gives it), TIME the run time
// so far or in all (Slurm's format; "-" if it never ran). Missing or null
// fields show as "-". `now`: seconds since the epoch.
std::string format_faucets_jobs_table(const nlohmann::json& jobs, double now);
// fjobs -M --history: TIME EVENT DETAIL.
std::string format_faucets_history_table(const nlohmann::json& events);
// Seconds since the epoch of an ISO 8601 time: "2026-11-26T02:03:04Z",
// with or without fractions, 'Z', "+00:00" or "+HH:MM"; nullopt otherwise.
std::optional<double> parse_iso8601(std::string_view text);

}  // namespace aqs::client
