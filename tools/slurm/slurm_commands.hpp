// slurm_commands: the command lines of the Slurm-compatible commands
// (aqs-sbatch, aqs-srun, aqs-squeue, aqs-scancel, aqs-sinfo, aqs-sacct), read
// as Slurm's getopt_long reads them: clustered short flags ("-nP"), "-ovalue",
// "--opt=value", "--opt value", unique prefixes of long options, and
// positional words anywhere (except for sbatch/srun, where the first one ends
// the options).
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <initializer_list>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/job_state.hpp"

namespace aqs::slurm {

// A bad command line as getopt reports it, printed after "CMD: " as is
// ("unrecognized option '--foo'\nTry \"squeue --help\" for more information").
class usage_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};
// Anything else, printed as "CMD: error: MESSAGE".
class command_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// The name the command answers to: argv[0]'s file name without an "aqs-"
// prefix ("/usr/bin/aqs-squeue" and a symlink "squeue" both give "squeue"),
// else `fallback`.
std::string command_name(const char* argv0, std::string_view fallback);

// ---- squeue ----
struct squeue_command_line {
  bool noheader = false;
  std::optional<std::string> format;       // -o
  std::optional<std::string> long_format;  // -O
  bool long_list = false;                  // -l
  std::vector<std::string> users;          // -u (names or uids), --me
  std::vector<std::int64_t> job_ids;       // -j, and positional ids
  std::optional<std::vector<core::job_state>> states;  // -t; nullopt: Slurm's default
  std::vector<std::string> names;          // -n
  std::vector<std::string> partitions;     // -p
  bool json = false;
  bool help = false, usage = false, version = false;
};
squeue_command_line parse_squeue_command_line(std::span<const std::string> args);

// ---- scancel ----
struct scancel_command_line {
  std::vector<std::int64_t> job_ids;
  // "123_4": task 4 of array 123 alone (submitit cancels one map task so).
  std::vector<std::pair<std::int64_t, std::int64_t>> array_tasks;
  std::vector<std::string> users;  // -u, --me
  std::optional<std::string> name;  // -n
  std::optional<std::vector<core::job_state>> states;  // -t
  std::optional<int> signal;        // -s
  bool quiet = false, verbose = false, interactive = false;
  bool help = false, usage = false, version = false;
  std::vector<std::string> partitions;
};
scancel_command_line parse_scancel_command_line(std::span<const std::string> args);
// Whether anything selects jobs besides ids (then the ids are filtered too).
bool has_filter(const scancel_command_line& c);

// ---- sinfo ----
struct sinfo_command_line {
  bool noheader = false, node_oriented = false, long_list = false, summarize = false;
  bool reservations = false;  // -T: the reservations instead of the nodes
  std::optional<std::string> format, long_format;
  bool json = false;
  bool help = false, usage = false, version = false;
  // -p/--partition a,b: only these partitions' lines (an unknown name
  // selects nothing: the header alone, as Slurm's sinfo).
  std::vector<std::string> partitions;
};
sinfo_command_line parse_sinfo_command_line(std::span<const std::string> args);

// ---- sacct ----
struct sacct_command_line {
  std::vector<std::int64_t> job_ids;     // -j (step suffixes ".batch" dropped)
  bool allocations = false;              // -X
  bool noheader = false;                 // -n
  bool parsable = false, parsable2 = false;  // -p, -P
  std::optional<std::string> delimiter;  // --delimiter
  std::optional<std::string> format;     // -o/--format
  bool brief = false;                    // -b
  std::vector<std::string> users;        // -u ("-1"/ALL: everyone)
  bool all_users = false;                // -a
  std::optional<std::string> start, end;  // -S, -E as given
  std::vector<std::string> names;        // --name
  std::optional<std::vector<core::job_state>> states;  // -s
  bool json = false;
  bool help = false, usage = false, version = false;
};
sacct_command_line parse_sacct_command_line(std::span<const std::string> args);
// sacct's -S/-E times: "YYYY-MM-DD[THH:MM[:SS]]", "MM/DD[/YY]", "HH:MM[:SS]"
// (today), "now[{+|-}N[seconds|minutes|hours|days|weeks]]", "today",
// "midnight", "noon", "tomorrow", or seconds since the epoch. nullopt if none.
std::optional<std::time_t> parse_sacct_time(std::string_view text, std::time_t now);

// ---- sbatch / srun ----
// Which Slurm options take a value, and which AQS may drop, is the
// submission options' declaration (cmdline/submit_options.hpp): an option
// marked `lenient` that fsub/frun do not take as given (asked through
// `known`) is dropped with one warning, so that scripts and workflow tools
// run unchanged; every other word is passed on untouched.
struct translated_args {
  std::vector<std::string> args;      // for parse_fsub/frun_command_line
  std::vector<std::string> warnings;  // "--export=ALL is not supported by AQS; ignored"
  std::size_t command_at = 0;         // where in args the script or command (or "--") begins
};
// Takes every word of `spellings` off the options of `args` (the words
// before the script or command, or "--"); whether there was one.
bool take_flag(std::vector<std::string>& args, std::initializer_list<std::string_view> spellings);

// `known(option_word, value)` is asked with the option spelled as on the
// command line ("--export", "-A"). Options are read up to the first
// positional word (the script or the command), which ends them as in sbatch
// and srun; `srun` looks srun's own options up first (--mpi=TYPE, -l, ...).
translated_args translate_submit_args(std::span<const std::string> args, bool srun,
                                      const std::function<bool(const std::string&, const std::optional<std::string>&)>& known);

std::string squeue_usage();
std::string scancel_usage();
std::string sinfo_usage();
std::string sacct_usage();
std::string sbatch_usage();
std::string srun_usage();

}  // namespace aqs::slurm
