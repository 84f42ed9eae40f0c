// job_options: fsub/frun options from the command line and from #AQS/#SBATCH script directives.
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

// The options of fsub and frun, each unset until given. One set comes from
// the command line, one from the script's directives (and, for sbatch, one
// from its SBATCH_* environment); merge() lets the command line win.
//
// Accepted forms, as with sbatch: "--ntasks=4", "--ntasks 4", "-n4", "-n 4".
// Long options must be spelled in full (no getopt-style abbreviations, which
// could silently capture a Slurm option AQS ignores).
// Every option is declared once in submit_options.cpp (names, value, scope,
// directive and environment forms, help text, the field it sets): AQS's own,
// the Slurm options recorded on the job without being acted on (--account,
// --qos, ...), and those refused because ignoring them would run something
// else than asked (--begin, --nodelist, ...). `fsub --help` lists AQS's own.
struct job_options {
  // -n and --min/--max form one group: a later source that sets any of the
  // three replaces all three (a script's "-n 4" is overridden by a command
  // line "--min 2 --max 8" as a whole).
  std::optional<std::int64_t> procs;
  std::optional<std::int64_t> min_pe;
  std::optional<std::int64_t> max_pe;
  std::optional<bool> adaptive;
  std::optional<std::int64_t> time_limit_s;  // 0: no limit
  std::optional<std::string> job_name;
  std::optional<std::string> output;
  std::optional<std::string> error;
  std::optional<std::string> chdir;
  std::optional<std::vector<std::int64_t>> afterok;  // every job the dependency names
  std::optional<std::string> dependency;              // beyond afterok: the whole expression
  std::optional<std::int64_t> begin_time;             // --begin, Unix seconds
  std::optional<std::int64_t> pref;                   // --pref: ranks (adaptive)
  std::optional<std::string> speedup;                 // --speedup MODEL (adaptive)
  std::optional<std::int64_t> resize_cost_s;          // --resize-cost SECONDS (adaptive)
  std::optional<bool> requeue;
  std::optional<std::string> wrap;
  std::optional<bool> parsable;
  bool json = false;
  bool help = false;
  bool test_only = false;  // fsub/sbatch --test-only: when it would start; nothing is submitted
  std::optional<std::string> socket;
  faucets_options faucets;  // fsub -M/--faucets: through a Faucets server
  std::optional<bool> mpi;  // --mpi: true, --no-mpi: false, neither: frun decides
  // Slurm's geometry (see geometry.hpp in the core): each replaces its own
  // kind only; --mem and --mem-per-cpu replace each other.
  std::optional<std::int64_t> nodes_min, nodes_max;  // -N N[-M]
  std::optional<std::int64_t> ntasks_per_node;
  std::optional<std::int64_t> cpus_per_task;
  std::optional<bool> exclusive;
  std::optional<std::int64_t> mem_mb;          // --mem; 0: all of each node's memory
  std::optional<std::int64_t> mem_per_cpu_mb;  // --mem-per-cpu
  std::optional<std::int64_t> gpus_per_node;   // --gres=gpu[:type]:N, --gpus-per-node
  std::optional<std::int64_t> gpus_total;      // -G, --gpus
  std::optional<std::string> partition;        // -p, --partition
  std::optional<std::string> array;            // -a, --array "0-99%10" (core/array_spec.hpp)
  // The Slurm options kept on the job as given, in order ("account=proj",
  // "gres=license:2", "signal=B:USR1@90"): those AQS records without acting
  // on them, and --signal, which the node agent acts on.
  std::vector<std::string> recorded;
  // --export=ALL,NAME=VALUE,...: variables set in the job's environment on
  // top of the submitter's (a later --export replaces them as a whole).
  std::optional<std::vector<std::string>> exported;
  friend bool operator==(const job_options&, const job_options&) = default;
};

// Fields set in `over` replace those in `base` (the size group as a whole).
void merge(job_options& base, const job_options& over);

// The command line of fsub: options, then the script path and its arguments
// (the first non-option word ends the options, as with sbatch; "--" also does).
struct fsub_command_line {
  job_options options;
  // sbatch's input environment (SBATCH_JOB_NAME, ...): under the command
  // line, over the script's directives, as in Slurm. Empty for fsub.
  job_options environment_options;
  std::vector<std::string> warnings;  // recorded options (and sbatch's environment's), one line each
  std::optional<std::string> script_path;
  std::vector<std::string> script_args;
};

// Parses fsub's arguments (without argv[0]). Throws usage_error for an
// unknown option, an option AQS refuses (saying why), a missing or malformed
// value, a value given to a flag, neither a script nor --wrap, or both. With
// --help nothing else is checked.
fsub_command_line parse_fsub_command_line(std::span<const std::string> args);

// The command line of frun: options, then the command and its arguments.
struct frun_command_line {
  job_options options;
  std::vector<std::string> warnings;
  std::vector<std::string> command;
};
// Throws usage_error as above, for --wrap, for a missing command, or for
// both --mpi and --no-mpi (in any order). fsub refuses --mpi and --no-mpi.
frun_command_line parse_frun_command_line(std::span<const std::string> args);

// Reads the SBATCH_* variables the options declare (SBATCH_JOB_NAME,
// SBATCH_PARTITION, SBATCH_TIMELIMIT, ...) from `environment` ("KEY=VALUE")
// into cmd.environment_options, as Slurm's sbatch does (an empty variable
// counts as unset); warnings go to cmd.warnings. Throws usage_error naming
// the variable for a bad value.
void read_sbatch_environment(fsub_command_line& cmd, std::span<const std::string> environment);

// The options found in a script's directives.
struct script_directives {
  job_options options;
  // One line each, for stderr: "script line 3: --account=proj is recorded;
  // AQS does not act on it".
  std::vector<std::string> warnings;
};

// Reads "#AQS" and "#SBATCH" directive lines at the top of `script`: after
// the "#!" line, up to the first line that is neither blank nor a comment,
// as sbatch does. A directive is the keyword at the very start of the line
// followed by blanks; its words are split like a shell would (single and
// double quotes, an unquoted word starting with '#' begins a comment). Later
// directives override earlier ones. Both kinds take the same options as
// fsub's command line (-n, -N, --mem, -p, --array, ...); a Slurm option AQS
// records (--account, --qos, ...) is kept with one warning. Throws
// usage_error (with the line number) for an unknown option, a bad value, an
// option AQS refuses (--begin, --nodelist, ...), an unterminated quote, or
// an option that only makes sense on the command line (--wrap, --json,
// --help, --socket, -M, --mpi). A word that is not an option ends an #SBATCH
// line with a warning; in an #AQS line it is an error.
script_directives parse_directives(std::string_view script);

// What the command passes in rather than the library reading it.
// The calling process's umask (read without changing it for good).
std::int64_t process_umask() noexcept;

struct submit_context {
  std::string cwd;                        // absolute current directory
  std::vector<std::string> environment;   // the caller's environ, "KEY=VALUE"
  std::optional<std::string> submit_token;  // idempotency key for retries
  // The submitter's umask, applied to the job's output files and processes
  // (Slurm's behaviour); nullopt: the server's default, 0022.
  std::optional<std::int64_t> umask = process_umask();
};

// What fsub sends, and how it should print the answer.
struct fsub_request {
  protocol::submit request;  // id 0; the client library assigns ids
  bool parsable = false;
  bool json = false;
  std::vector<std::string> warnings;
};

// Builds the submit request: directives of `script_text` (the file at
// cmd.script_path, read by the caller; ignored with --wrap, whose script is
// "#!/bin/sh\n" + CMD) merged under the command-line options, then sizes
// resolved and everything checked:
//   - size: -n N gives N..N; --min only gives min..min; --max only gives
//     max..max, or 1..max with --adaptive; none gives 1; min > max, and
//     min < max without --adaptive, are errors;
//   - name: -J, else the script's file name, else "wrap";
//   - workdir: -D resolved against ctx.cwd, else ctx.cwd;
//   - stdout: -o else "aqs-%j.out"; stderr: -e else unset (into stdout);
//   - environment: ctx.environment minus entries without a KEY=;
//   - the script must start with "#!" (as sbatch demands), contain no NUL,
//     and be valid UTF-8.
// The result is finally validated exactly as aqsd will (protocol
// parse_message), so what passes here is not refused as bad_request later.
// Throws usage_error with a one-line message for every failure.
fsub_request build_fsub_request(const fsub_command_line& cmd, std::optional<std::string_view> script_text,
                                const submit_context& ctx);

// Builds frun's interactive submit: interactive = true, same size/name/
// workdir rules (name defaults to the command's file name), and argv:
//   - the command itself for an adaptive job, with --no-mpi, or when the
//     command is not an MPI program;
//   - else the absolute path of the mpirun found on the job's PATH, then the
//     command: one rank per processor, as srun does. The command is an MPI
//     program with --mpi, or when the file exec will run (found as execvp
//     would, through the job's PATH, relative to its working directory) is an
//     ELF executable needing libmpi.so (is_mpi_program); it is read here.
// Throws usage_error, beyond the rules above, for --mpi with --adaptive and
// for an MPI launch without mpirun on the job's PATH.
protocol::submit build_frun_request(const frun_command_line& cmd, const submit_context& ctx);

// The --help text of fsub and frun (several lines, ending in '\n').
std::string fsub_usage();
std::string frun_usage();

}  // namespace aqs::cmdline
