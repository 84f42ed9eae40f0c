// submit_options: the one declaration of every submission option: fsub's and
// frun's command lines, #AQS/#SBATCH directives, sbatch's input environment,
// aqs-sbatch/aqs-srun/aqs-salloc's Slurm option handling and the --help texts
// all read it.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aqs::cmdline {

struct job_options;

// Where an option is read. A directive is a batch source; sbatch's
// environment is read like a directive line of its own.
enum class option_source { fsub, frun, aqs_directive, sbatch_directive, sbatch_environment };

// Which commands an option belongs to: batch (fsub, sbatch, directives),
// interactive (frun, srun, salloc), or both.
enum class option_scope : unsigned { batch = 1, interactive = 2, both = 3 };
constexpr bool in_scope(option_scope have, option_scope want) noexcept {
  return (static_cast<unsigned>(have) & static_cast<unsigned>(want)) != 0;
}

// What AQS does with an option.
enum class option_kind {
  acted,     // `set` changes the submission
  recorded,  // kept on the job as "name=value" (sacct, SLURM_JOB_*), one warning
  refused,   // an error, one line: "`why` (--name)"
  slurm,     // fsub/frun do not know it; sbatch/srun drop it with one warning
};

// Whether an option takes a value, as Slurm's getopt_long tables say
// (optional: only attached, "--nice=5" or "-kX").
enum class option_arg { none, required, optional };

// What a setter is given: where the option was read, and where to warn.
struct option_context {
  option_source src = option_source::fsub;
  std::string where;  // "" or "script line 7: " or "$SBATCH_JOB_NAME: "
  std::vector<std::string>* warnings = nullptr;
  std::set<std::string>* warned = nullptr;  // recorded options already warned about
  // Which of --mem / --mem-per-cpu this source gave: sbatch refuses both
  // from one source (a later source, the command line, may replace either).
  std::set<std::string>* memory_kinds = nullptr;

  bool directive() const noexcept {
    return src == option_source::aqs_directive || src == option_source::sbatch_directive ||
           src == option_source::sbatch_environment;
  }
  option_scope scope() const noexcept { return src == option_source::frun ? option_scope::interactive : option_scope::batch; }
  // Throws usage_error(where + msg).
  [[noreturn]] void fail(const std::string& msg) const;
};

struct submit_option;
// Applies one use of an option: `value` ("" for a flag), `spelled` as the
// user wrote it ("-n", "--ntasks"). Throws usage_error through ctx.fail.
using option_setter = void (*)(const option_context& ctx, job_options& o, const submit_option& d,
                               std::string_view value, std::string_view spelled);

struct submit_option {
  std::string_view name;      // long name without "--"
  char short_name = 0;        // 0: none
  option_arg arg = option_arg::none;
  option_kind kind = option_kind::acted;
  option_scope scope = option_scope::both;
  std::string_view alias{};   // a second long name ("procs" for "ntasks")
  // Not in #AQS/#SBATCH lines nor the environment (--wrap, --json, ...).
  bool command_line_only = false;
  // Given to a command of the other scope (found, then refused): the rest of
  // "option '--mpi' is for frun; ...". Empty: such a use is an unknown option.
  std::string_view other_scope{};
  // sbatch/srun drop it with one warning when fsub/frun refuse it as given
  // (recorded and Slurm-only options, and the Slurm geometry AQS only partly
  // honours); otherwise fsub/frun's error stands.
  bool lenient = false;
  // sbatch's input environment variable (Slurm's SBATCH_*): read as if it
  // were a directive line under the command line; "" for none.
  std::string_view env{};
  // --help: the left column ("-n, --ntasks N") and the text ('\n' starts a
  // continuation line); `help_interactive` replaces the text in frun's.
  std::string_view usage{};
  std::string_view help{};
  std::string_view help_interactive{};
  // Which helps list it (the option's own scope unless narrower).
  option_scope help_scope = option_scope::both;
  std::string_view why{};      // refused: the reason, one line
  option_setter set = nullptr;  // acted (and recorded with a twist: --export, --signal)
};

// Every submission option, once, in the order --help lists them.
std::span<const submit_option> submit_options();

// fsub/frun's lookup: their own (acted) options first, whatever the scope
// (a wrong scope is refused with other_scope), then recorded and refused
// options of `scope`. nullptr for an option they do not know.
const submit_option* find_option(std::string_view long_name, option_scope scope);
const submit_option* find_short_option(char c, option_scope scope);

// sbatch/srun's lookup (Slurm's getopt tables): for srun first the options
// that are srun's alone, then the batch ones; for sbatch and salloc the
// batch ones. Aliases count. nullptr if none.
const submit_option* find_slurm_option(std::string_view long_name, bool srun);
const submit_option* find_slurm_short_option(char c, bool srun);

// Records "name[=value]" on the job with one warning per name and source.
void record_option(const option_context& ctx, job_options& o, std::string_view name, std::string_view value,
                   bool warn = true);

// One --help line (or several, for a text with '\n'): "  " + left padded to
// column `col`, the text; a left column too wide for it goes on a line of
// its own.
std::string help_line(std::string_view left, std::string_view text, std::size_t col);
// The --help lines of the options listed in `scope`'s help, in order.
std::string options_help(option_scope scope);

}  // namespace aqs::cmdline
