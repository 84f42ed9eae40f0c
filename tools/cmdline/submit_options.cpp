// submit_options: the table of submission options and what each one sets.
#include "cmdline/submit_options.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include "cmdline/job_options.hpp"
#include "cmdline/text_util.hpp"
#include "cmdline/time_limit.hpp"
#include "cmdline/usage_error.hpp"
#include "core/array_spec.hpp"
#include "core/begin_time.hpp"
#include "core/hostlist.hpp"
#include "core/speedup.hpp"
#include "core/dependency.hpp"
#include "protocol/messages.hpp"

namespace aqs::cmdline {

void option_context::fail(const std::string& msg) const { throw usage_error(where + msg); }

namespace {

// ---- value parsers

std::int64_t parse_count(const option_context& ctx, std::string_view value, std::string_view opt) {
  std::int64_t v = 0;
  bool ok = !value.empty() && value.size() <= 9;
  for (const char c : value) {
    if (c < '0' || c > '9') ok = false;
    if (ok) v = v * 10 + (c - '0');
  }
  if (!ok || v < 1 || v > protocol::k_max_pe) {
    ctx.fail("invalid value '" + shown(value) + "' for " + std::string(opt) +
             ": expected a whole number from 1 to " + std::to_string(protocol::k_max_pe));
  }
  return v;
}

// A whole number (0 allowed with `zero_ok`) of at most 15 digits, or nullopt.
std::optional<std::int64_t> whole(std::string_view v, bool zero_ok = false) {
  if (v.empty() || v.size() > 15) return std::nullopt;
  std::int64_t n = 0;
  for (const char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  if (n == 0 && !zero_ok) return std::nullopt;
  return n;
}

// --mem / --mem-per-cpu: a number with an optional unit K, M, G or T
// (default M, as Slurm), in MB rounded up.
std::int64_t parse_memory(const option_context& ctx, std::string_view value, std::string_view opt) {
  std::string_view digits = value;
  std::int64_t scale_kb = 1024;  // M
  // Slurm also takes "3600mb", "50GB": the unit with a B.
  if (digits.size() >= 2 && (digits.back() == 'B' || digits.back() == 'b') &&
      std::string_view("KkMmGgTt").find(digits[digits.size() - 2]) != std::string_view::npos) {
    digits.remove_suffix(1);
  }
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K': case 'k': scale_kb = 1; digits.remove_suffix(1); break;
      case 'M': case 'm': digits.remove_suffix(1); break;
      case 'G': case 'g': scale_kb = 1024 * 1024; digits.remove_suffix(1); break;
      case 'T': case 't': scale_kb = std::int64_t{1024} * 1024 * 1024; digits.remove_suffix(1); break;
      default: break;
    }
  }
  const auto n = whole(digits, true);
  if (!n || *n > (std::int64_t{1} << 40) / scale_kb) {
    ctx.fail("invalid value '" + shown(value) + "' for " + std::string(opt) +
             ": expected a size such as 4000, 500M, 4G or 1T (default unit MB)");
  }
  return (*n * scale_kb + 1023) / 1024;
}

// --gpus / --gpus-per-node: "2" or "TYPE:2".
std::int64_t parse_gpus(const option_context& ctx, std::string_view value, std::string_view opt) {
  const auto colon = value.rfind(':');
  const auto n = whole(colon == std::string_view::npos ? value : value.substr(colon + 1));
  if (!n || *n > (1 << 16)) {
    ctx.fail("invalid value '" + shown(value) + "' for " + std::string(opt) + ": expected [TYPE:]COUNT");
  }
  return *n;
}

std::string nonempty(const option_context& ctx, std::string_view value, std::string_view opt) {
  if (value.empty()) ctx.fail("empty value for " + std::string(opt));
  return std::string(value);
}

void note_memory_kind(const option_context& ctx, const std::string& kind) {
  if (ctx.memory_kinds == nullptr) return;
  ctx.memory_kinds->insert(kind);
  if (ctx.memory_kinds->size() > 1) ctx.fail("--mem and --mem-per-cpu are mutually exclusive");
}

// --mpi and --no-mpi contradict each other: no "last one wins" here, since
// either guess would run something else than one of them asks for.
void set_mpi(const option_context& ctx, job_options& o, bool mpi) {
  if (o.mpi && *o.mpi != mpi) ctx.fail("give either --mpi or --no-mpi, not both");
  o.mpi = mpi;
}

// ---- setters: what each acted option sets in job_options

#define AQS_SETTER(fn) \
  void fn([[maybe_unused]] const option_context& ctx, [[maybe_unused]] job_options& o, [[maybe_unused]] const submit_option& d, \
          [[maybe_unused]] std::string_view value, [[maybe_unused]] std::string_view opt)

AQS_SETTER(set_procs) { o.procs = parse_count(ctx, value, opt); }
AQS_SETTER(set_min) { o.min_pe = parse_count(ctx, value, opt); }
AQS_SETTER(set_pref) { o.pref = parse_count(ctx, value, opt); }
AQS_SETTER(set_speedup) {
  try {
    o.speedup = core::speedup_model::parse(std::string(value)).to_string();
  } catch (const std::invalid_argument& e) {
    ctx.fail(std::string(opt) + ": " + e.what());
  }
}
AQS_SETTER(set_resize_cost) {
  const std::int64_t n = parse_count(ctx, value, opt);
  if (n > 86400) ctx.fail(std::string(opt) + ": at most 86400 seconds");
  o.resize_cost_s = n;
}
AQS_SETTER(set_max) { o.max_pe = parse_count(ctx, value, opt); }
AQS_SETTER(set_adaptive) { o.adaptive = true; }
AQS_SETTER(set_time) {
  try {
    o.time_limit_s = parse_time_limit(value);
  } catch (const usage_error& e) {
    ctx.fail(std::string(opt) + ": " + e.what());
  }
}
// --begin: Slurm's forms against this machine's clock (core/begin_time).
AQS_SETTER(set_begin) {
  try {
    o.begin_time = core::parse_begin_time(value, static_cast<std::int64_t>(std::time(nullptr)));
  } catch (const usage_error& e) {
    ctx.fail(std::string(opt) + ": " + e.what());
  }
}
AQS_SETTER(set_name) { o.job_name = nonempty(ctx, value, opt); }
AQS_SETTER(set_output) { o.output = nonempty(ctx, value, opt); }
AQS_SETTER(set_error) { o.error = nonempty(ctx, value, opt); }
AQS_SETTER(set_chdir) { o.chdir = nonempty(ctx, value, opt); }
// Slurm's dependency list ("afterok:1:2,afterany:3", "after:4?afternotok:5"):
// the jobs it names go into o.afterok; anything beyond plain afterok is kept
// as text for the job's geometry.
AQS_SETTER(set_dependency) {
  core::dependency dep;
  try {
    dep = core::parse_dependency(value, protocol::k_max_ids);
  } catch (const std::invalid_argument& e) {
    ctx.fail(std::string("--dependency: ") + e.what());
  }
  o.afterok = dep.jobs();
  o.dependency = dep.plain_afterok() ? std::optional<std::string>() : core::to_string(dep);
}
AQS_SETTER(set_requeue) { o.requeue = true; }
AQS_SETTER(set_no_requeue) { o.requeue = false; }
AQS_SETTER(set_wrap) { o.wrap = nonempty(ctx, value, opt); }
AQS_SETTER(set_parsable) { o.parsable = true; }
AQS_SETTER(set_json) { o.json = true; }
AQS_SETTER(set_help) { o.help = true; }
AQS_SETTER(set_test_only) { o.test_only = true; }
AQS_SETTER(set_socket) { o.socket = nonempty(ctx, value, opt); }
AQS_SETTER(set_mpi_on) { set_mpi(ctx, o, true); }
AQS_SETTER(set_mpi_off) { set_mpi(ctx, o, false); }
// -N: "2" or "1-4" (Slurm's min-max).
AQS_SETTER(set_nodes) {
  const auto dash = value.find('-');
  const auto lo = whole(value.substr(0, dash));
  const auto hi = dash == std::string_view::npos ? lo : whole(value.substr(dash + 1));
  if (!lo || !hi || *lo > protocol::k_max_pe || *hi > protocol::k_max_pe) {
    ctx.fail("invalid value '" + shown(value) + "' for " + std::string(opt) + ": expected N or MIN-MAX nodes");
  }
  if (*hi < *lo) ctx.fail(std::string(opt) + " " + shown(value) + ": the maximum is below the minimum");
  o.nodes_min = *lo;
  o.nodes_max = *hi;
}
AQS_SETTER(set_ntasks_per_node) { o.ntasks_per_node = parse_count(ctx, value, opt); }
AQS_SETTER(set_cpus_per_task) { o.cpus_per_task = parse_count(ctx, value, opt); }
AQS_SETTER(set_exclusive) { o.exclusive = true; }  // --exclusive=user|mcs|topo: AQS only has whole nodes
AQS_SETTER(set_mem) {
  note_memory_kind(ctx, "--mem");
  o.mem_mb = parse_memory(ctx, value, opt);
  o.mem_per_cpu_mb.reset();
}
AQS_SETTER(set_mem_per_cpu) {
  note_memory_kind(ctx, "--mem-per-cpu");
  o.mem_per_cpu_mb = parse_memory(ctx, value, opt);
  if (*o.mem_per_cpu_mb == 0) ctx.fail(std::string(opt) + " must be above 0");
  o.mem_mb.reset();
}
// --gres: "gpu:2", "gpu:v100:2", "gpu" (one); other resources are recorded.
AQS_SETTER(set_gres) {
  for (const auto item : split(value, ',')) {
    const auto fields = split(item, ':');
    if (fields[0] != "gpu") {
      if (item.empty() || fields[0] == "none") continue;
      o.recorded.push_back("gres=" + std::string(item));
      if (ctx.warnings != nullptr) {
        ctx.warnings->push_back(ctx.where + "--gres=" + shown(item) + " is recorded; AQS schedules only GPUs");
      }
      continue;
    }
    std::int64_t n = 1;
    if (fields.size() > 1) {
      const auto last = whole(fields.back());
      if (last) {
        n = *last;
      } else if (fields.size() > 2) {
        ctx.fail("invalid value '" + shown(value) + "' for " + std::string(opt) + ": expected gpu[:TYPE]:COUNT");
      }
    }
    if (n > (1 << 16)) ctx.fail("invalid GPU count in '" + shown(value) + "' for " + std::string(opt));
    o.gpus_per_node = n;
  }
}
AQS_SETTER(set_gpus) { o.gpus_total = parse_gpus(ctx, value, opt); }
AQS_SETTER(set_gpus_per_node) { o.gpus_per_node = parse_gpus(ctx, value, opt); }
// aqsd checks the name against its partitions (aqs.conf); without any it
// takes every name and says so in its reply.
AQS_SETTER(set_partition) { o.partition = nonempty(ctx, value, opt); }
AQS_SETTER(set_array) {
  try {
    (void)core::parse_array_spec(value);
  } catch (const std::invalid_argument& e) {
    // Past the most any aqsd takes: name the cap an admin sets lower.
    const bool too_many = std::string_view(e.what()).starts_with("an array of more than");
    ctx.fail(std::string(opt) + ": " + e.what() +
             (too_many ? " (MaxArraySize is at most " + std::to_string(core::k_max_array_tasks) + ")" : ""));
  }
  o.array = std::string(value);
}
AQS_SETTER(set_cluster) { o.faucets.cluster = nonempty(ctx, value, opt); }
AQS_SETTER(set_faucets) { o.faucets.url = nonempty(ctx, value, opt); }
AQS_SETTER(set_faucets_ca) { o.faucets.ca_file = nonempty(ctx, value, opt); }
AQS_SETTER(set_token_file) { o.faucets.token_file = nonempty(ctx, value, opt); }
AQS_SETTER(set_broker) { o.faucets.broker = nonempty(ctx, value, opt); }
AQS_SETTER(set_stage_in) { o.faucets.stage_in.push_back(nonempty(ctx, value, opt)); }
// The contract (faucets_options.hpp): numbers >= 0, the deadline in
// sbatch --begin's forms. A deadline already past is the server's to refuse.
double contract_number(const option_context& ctx, std::string_view value, std::string_view opt) {
  const std::string text(value);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < 0) {
    ctx.fail(std::string(opt) + " must be a number >= 0, not '" + shown(value) + "'");
  }
  return v;
}
AQS_SETTER(set_deadline) {
  try {
    o.faucets.contract.deadline = core::parse_begin_time(value, static_cast<std::int64_t>(std::time(nullptr)));
  } catch (const usage_error& e) {
    ctx.fail(std::string(opt) + ": " + e.what());
  }
}
AQS_SETTER(set_max_price) { o.faucets.contract.max_price = contract_number(ctx, value, opt); }
AQS_SETTER(set_value) { o.faucets.contract.value = contract_number(ctx, value, opt); }
AQS_SETTER(set_value_decay) { o.faucets.contract.decay_s = contract_number(ctx, value, opt); }
AQS_SETTER(set_best_effort) { o.faucets.contract.best_effort = true; }
// --export=ALL is what AQS does anyway; what follows ALL, is set on top:
// NAME=VALUE as given, a bare NAME from the environment (already there).
// Anything else is recorded.
AQS_SETTER(set_export) {
  if (value != "ALL" && !value.starts_with("ALL,")) {
    record_option(ctx, o, d.name, value);
    return;
  }
  std::vector<std::string> vars;
  std::string_view rest = value.substr(3);
  while (!rest.empty()) {
    rest.remove_prefix(1);  // the comma
    const auto comma = rest.find(',');
    const std::string item(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma);
    const auto eq = item.find('=');
    const std::string var = item.substr(0, eq);
    const bool name_ok = !var.empty() && (std::isalpha(static_cast<unsigned char>(var[0])) || var[0] == '_') &&
                         std::all_of(var.begin(), var.end(), [](char ch) {
                           return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                         });
    if (!name_ok) ctx.fail("--export: '" + shown(item) + "' is not NAME or NAME=VALUE");
    if (eq != std::string::npos) vars.push_back(item);
  }
  o.exported = std::move(vars);
}
// --signal is kept with the recorded options, and the agent acts on it
// (core/signal_spec): no warning.
AQS_SETTER(set_signal) { record_option(ctx, o, d.name, value, false); }
// Kept on the job and acted on by aqsd's accounting (issue 32): no warning.
AQS_SETTER(set_accounting) { record_option(ctx, o, d.name, value, false); }
// -w/--nodelist, -x/--exclude: kept as host lists and acted on by aqsd's
// placement (the job runs only on the listed nodes, never on excluded ones).
AQS_SETTER(set_named_nodes) {
  try {
    if (core::expand_hostlist(value).empty()) throw std::invalid_argument("no host");
  } catch (const std::exception& e) {
    ctx.fail("invalid value '" + shown(value) + "' for --" + std::string(d.name) + ": not a host list (" + e.what() + ")");
  }
  record_option(ctx, o, d.name, value, false);
}

#undef AQS_SETTER

using k = option_kind;
using a = option_arg;
using s = option_scope;

constexpr std::string_view k_gpus_per_node_why = "AQS places GPUs per node (--gres=gpu:N or --gpus-per-node)";
constexpr std::string_view k_named_nodes_why = "AQS takes named nodes as a host list: use --nodelist";

// The declaration. Order: --help's order for AQS's own options, then the
// recorded, refused and Slurm-only ones (the order "did you mean" prefers).
constexpr auto k_options = std::to_array<submit_option>({
    // ---- AQS's own (acted)
    {.name = "ntasks", .short_name = 'n', .arg = a::required, .alias = "procs",
     .usage = "-n, --ntasks N", .help = "N tasks (one processor each unless -c); --procs N is the same", .set = set_procs},
    {.name = "nodes", .short_name = 'N', .arg = a::required, .lenient = true,
     .usage = "-N, --nodes N[-M]", .help = "on N nodes (at most M); one task per node unless -n says more", .set = set_nodes},
    {.name = "ntasks-per-node", .arg = a::required, .alias = "tasks-per-node", .lenient = true,
     .usage = "    --ntasks-per-node K", .help = "exactly K tasks on every node used", .set = set_ntasks_per_node},
    {.name = "cpus-per-task", .short_name = 'c', .arg = a::required, .lenient = true,
     .usage = "-c, --cpus-per-task C", .help = "C processors per task, on one node (threads of an OpenMP task)",
     .set = set_cpus_per_task},
    {.name = "exclusive", .arg = a::optional, .lenient = true, .env = "SBATCH_EXCLUSIVE",
     .usage = "    --exclusive", .help = "whole nodes, shared with no other job", .set = set_exclusive},
    {.name = "mem", .arg = a::required, .lenient = true, .env = "SBATCH_MEM_PER_NODE",
     .usage = "    --mem SIZE", .help = "memory per node (K, M, G, T; default M; 0: all of it)", .set = set_mem},
    {.name = "mem-per-cpu", .arg = a::required, .lenient = true, .env = "SBATCH_MEM_PER_CPU",
     .usage = "    --mem-per-cpu SIZE", .help = "memory per processor", .set = set_mem_per_cpu},
    {.name = "gres", .arg = a::required, .lenient = true, .env = "SBATCH_GRES",
     .usage = "    --gres gpu[:TYPE]:N", .help = "N GPUs per node (other resources are recorded)", .set = set_gres},
    {.name = "gpus-per-node", .arg = a::required, .lenient = true, .env = "SBATCH_GPUS_PER_NODE",
     .usage = "    --gpus-per-node N", .help = "N GPUs per node, as --gres=gpu:N", .set = set_gpus_per_node},
    {.name = "gpus", .short_name = 'G', .arg = a::required, .lenient = true, .env = "SBATCH_GPUS",
     .usage = "-G, --gpus N", .help = "N GPUs in all, spread evenly over the job's nodes", .set = set_gpus},
    {.name = "partition", .short_name = 'p', .arg = a::required, .lenient = true, .env = "SBATCH_PARTITION",
     .usage = "-p, --partition NAME", .help = "the partition(s) to run in, \"a,b\" (default: the default one)",
     .set = set_partition},
    {.name = "array", .short_name = 'a', .arg = a::required, .env = "SBATCH_ARRAY_INX",
     .usage = "-a, --array LIST[%K]", .help = "a job per index: 0-99, 1,3,5-9:2; %K: at most K at once",
     .help_scope = s::batch, .set = set_array},
    {.name = "min", .arg = a::required, .usage = "    --min N",
     .help = "adaptive size: at least N ranks (with --adaptive; -c C: C processors each)", .set = set_min},
    {.name = "max", .arg = a::required, .usage = "    --max M", .help = "adaptive size: at most M ranks", .set = set_max},
    {.name = "pref", .arg = a::required, .usage = "    --pref P",
     .help = "adaptive: the size it runs best at, P ranks in --min..--max", .set = set_pref},
    {.name = "speedup", .arg = a::required, .usage = "    --speedup MODEL",
     .help = "adaptive: how it scales: linear, amdahl:F or table:P=S,...", .set = set_speedup},
    {.name = "resize-cost", .arg = a::required, .usage = "    --resize-cost S",
     .help = "adaptive: seconds of progress one resize costs it", .set = set_resize_cost},
    {.name = "adaptive", .usage = "    --adaptive", .help = "the job uses the AQS runtime and can be resized",
     .set = set_adaptive},
    {.name = "time", .short_name = 't', .arg = a::required, .env = "SBATCH_TIMELIMIT",
     .usage = "-t, --time LIMIT", .help = "minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S or UNLIMITED", .set = set_time},
    {.name = "job-name", .short_name = 'J', .arg = a::required, .env = "SBATCH_JOB_NAME",
     .usage = "-J, --job-name NAME", .help = "default: the script's file name",
     .help_interactive = "default: the command's file name", .set = set_name},
    {.name = "output", .short_name = 'o', .arg = a::required, .env = "SBATCH_OUTPUT",
     .usage = "-o, --output PATTERN", .help = "stdout file; %j job id, %x name, %u user (default aqs-%j.out)",
     .help_scope = s::batch, .set = set_output},
    {.name = "error", .short_name = 'e', .arg = a::required, .env = "SBATCH_ERROR",
     .usage = "-e, --error PATTERN", .help = "stderr file (default: with stdout)", .help_scope = s::batch,
     .set = set_error},
    {.name = "chdir", .short_name = 'D', .arg = a::required,
     .usage = "-D, --chdir DIR", .help = "working directory (default: the current one)", .set = set_chdir},
    {.name = "dependency", .short_name = 'd', .arg = a::required,
     .usage = "-d, --dependency LIST",
     .help = "afterok:ID[:ID..] (completed), afterany: (ended), afternotok:\n"
             "(failed), after: (started); ',' all of them, '?' any",
     .set = set_dependency},
    {.name = "requeue", .env = "SBATCH_REQUEUE", .usage = "    --requeue",
     .help = "requeue the job if its node fails", .help_scope = s::batch, .set = set_requeue},
    {.name = "no-requeue", .env = "SBATCH_NO_REQUEUE", .usage = "    --no-requeue",
     .help = "do not requeue it (the default)", .help_scope = s::batch, .set = set_no_requeue},
    // Kept with the recorded options, but acted on: --export=ALL[,...] sets
    // variables, the agent sends --signal's signal.
    {.name = "export", .arg = a::required, .lenient = true, .env = "SBATCH_EXPORT",
     .usage = "    --export ALL[,N=V]", .help = "the submitter's environment (the default), N=V set on top\n"
                                               "(anything but ALL is recorded)",
     .set = set_export},
    {.name = "begin", .short_name = 'b', .arg = a::required, .scope = s::batch,
     .other_scope = "is for fsub: an interactive job starts when it can", .env = "SBATCH_BEGIN",
     .usage = "-b, --begin TIME", .help = "not before TIME (now+60, 16:00, tomorrow, 2026-12-01T08:00)",
     .set = set_begin},
    {.name = "account", .short_name = 'A', .arg = a::required, .lenient = true, .env = "SBATCH_ACCOUNT",
     .usage = "-A, --account NAME", .help = "the account charged (default: your default account)",
     .set = set_accounting},
    {.name = "qos", .short_name = 'q', .arg = a::required, .lenient = true, .env = "SBATCH_QOS",
     .usage = "-q, --qos NAME", .help = "the quality of service (its priority and limits)", .set = set_accounting},
    {.name = "nodelist", .short_name = 'w', .arg = a::required, .scope = s::batch,
     .other_scope = "is for fsub and sbatch: a job step runs where its allocation is",
     .usage = "-w, --nodelist HOSTS", .help = "run on these nodes only (node[1-2],node5)", .set = set_named_nodes},
    {.name = "exclude", .short_name = 'x', .arg = a::required, .scope = s::batch,
     .other_scope = "is for fsub and sbatch: a job step runs where its allocation is",
     .usage = "-x, --exclude HOSTS", .help = "never run on these nodes", .set = set_named_nodes},
    {.name = "reservation", .arg = a::required, .lenient = true, .env = "SBATCH_RESERVATION",
     .usage = "    --reservation NAME", .help = "run in this advance reservation (scontrol show reservation)",
     .set = set_accounting},
    {.name = "signal", .arg = a::required, .lenient = true, .env = "SBATCH_SIGNAL",
     .usage = "    --signal SIG[@T]", .help = "signal SIG T seconds (default 60) before the time limit\n"
                                             "(B:SIG[@T]: the batch shell only)",
     .help_scope = s::batch, .set = set_signal},
    {.name = "wrap", .arg = a::required, .scope = s::batch, .command_line_only = true,
     .other_scope = "is for fsub; give frun the command itself",
     .usage = "    --wrap CMD", .help = "run CMD with /bin/sh instead of a script", .set = set_wrap},
    {.name = "parsable", .usage = "    --parsable", .help = "print only the job id", .help_scope = s::batch,
     .set = set_parsable},
    {.name = "mpi", .scope = s::interactive, .command_line_only = true,
     .other_scope = "is for frun; a batch script starts mpirun itself",
     .usage = "    --mpi", .help = "run the command under mpirun even if it does not look like MPI", .set = set_mpi_on},
    {.name = "no-mpi", .scope = s::interactive, .command_line_only = true,
     .other_scope = "is for frun; a batch script starts mpirun itself",
     .usage = "    --no-mpi", .help = "run the command once even if it is an MPI program", .set = set_mpi_off},
    {.name = "json", .command_line_only = true, .usage = "    --json", .help = "print the result as JSON",
     .help_interactive = "print events as JSON", .set = set_json},
    {.name = "socket", .arg = a::required, .command_line_only = true,
     .usage = "    --socket PATH", .help = "aqsd's socket (default: $AQS_SOCKET, else the system one)",
     .set = set_socket},
    // fsub through a Faucets server (faucets_options.hpp); frun refuses them.
    {.name = "clusters", .short_name = 'M', .arg = a::required, .scope = s::batch, .command_line_only = true,
     .other_scope = "is for fsub: frun runs on this cluster only", .lenient = true,
     .usage = "-M, --clusters NAME",
     .help = "through a Faucets server: to cluster NAME, or auto to let\n"
             "the server choose (the default with --faucets)",
     .set = set_cluster},
    {.name = "broker", .arg = a::required, .scope = s::batch, .command_line_only = true,
     .other_scope = "is for fsub: frun runs on this cluster only",
     .usage = "    --broker NAME",
     .help = "through a Faucets server: let its broker plugin NAME choose\n"
             "the cluster (where the server's admin allows it)",
     .set = set_broker},
    {.name = "stage-in", .arg = a::required, .scope = s::batch, .command_line_only = true,
     .other_scope = "is for fsub: frun runs on this cluster only",
     .usage = "    --stage-in PATH",
     .help = "through a Faucets server: send PATH (a file or directory under\n"
             "this one; repeat for more) to the job's own directory on its cluster,\n"
             "where it runs; fjobs -M --fetch ID brings the outputs back",
     .set = set_stage_in},
    {.name = "faucets", .arg = a::required, .scope = s::batch, .command_line_only = true,
     .other_scope = "is for fsub: frun runs on this cluster only",
     .usage = "    --faucets URL",
     .help = "the Faucets server, https://HOST:PORT (default: $AQS_FAUCETS;\n"
             "http:// only to this machine, e.g. http://127.0.0.1:PORT)",
     .set = set_faucets},
    {.name = "faucets-ca", .arg = a::required, .scope = s::batch, .command_line_only = true,
     .other_scope = "is for fsub: frun runs on this cluster only",
     .usage = "    --faucets-ca FILE",
     .help = "the server's CA certificate (default: $AQS_FAUCETS_CA, else\nthe system's CAs)", .set = set_faucets_ca},
    {.name = "token-file", .arg = a::required, .scope = s::batch, .command_line_only = true,
     .other_scope = "is for fsub: frun runs on this cluster only",
     .usage = "    --token-file FILE", .help = "the token, when $AQS_TOKEN is unset (default:\n~/.aqs/faucets-token)",
     .set = set_token_file},
    {.name = "deadline", .arg = a::required, .scope = s::batch, .command_line_only = true,
     .other_scope = "is for fsub: frun runs on this cluster only",
     .usage = "    --deadline WHEN",
     .help = "contract: done by WHEN (sbatch --begin's forms: now+30minutes,\n16:00, 2026-12-01T08:00)",
     .set = set_deadline},
    {.name = "max-price", .arg = a::required, .scope = s::batch, .command_line_only = true,
     .other_scope = "is for fsub: frun runs on this cluster only",
     .usage = "    --max-price CREDITS",
     .help = "contract: at most CREDITS per processor-second", .set = set_max_price},
    {.name = "value", .arg = a::required, .scope = s::batch, .command_line_only = true,
     .other_scope = "is for fsub: frun runs on this cluster only",
     .usage = "    --value CREDITS",
     .help = "contract: what the job is worth done by the deadline", .set = set_value},
    {.name = "value-decay", .arg = a::required, .scope = s::batch, .command_line_only = true,
     .other_scope = "is for fsub: frun runs on this cluster only",
     .usage = "    --value-decay SECONDS",
     .help = "contract: after the deadline the value falls to 0 over\nSECONDS (default 0: at once)",
     .set = set_value_decay},
    {.name = "best-effort", .scope = s::batch, .command_line_only = true,
     .other_scope = "is for fsub: frun runs on this cluster only",
     .usage = "    --best-effort",
     .help = "contract: run it even if no cluster can finish it by the\ndeadline (else it is refused)",
     .set = set_best_effort},
    {.name = "help", .short_name = 'h', .command_line_only = true, .usage = "-h, --help", .help = "this help",
     .set = set_help},

    // ---- recorded: accepted and kept on the job, one warning each, so that
    // scripts from other sites run. Ignoring any of these never runs a job
    // smaller or earlier than asked.
    {.name = "mail-type", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "mail-user", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "hint", .arg = a::required, .kind = k::recorded, .lenient = true, .env = "SBATCH_HINT"},
    {.name = "constraint", .short_name = 'C', .arg = a::required, .kind = k::recorded, .lenient = true,
     .env = "SBATCH_CONSTRAINT"},
    {.name = "comment", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "licenses", .short_name = 'L', .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "open-mode", .arg = a::required, .kind = k::recorded, .lenient = true, .env = "SBATCH_OPEN_MODE"},
    {.name = "get-user-env", .arg = a::optional, .kind = k::recorded, .lenient = true},
    {.name = "no-kill", .short_name = 'k', .arg = a::optional, .kind = k::recorded, .lenient = true},
    {.name = "distribution", .short_name = 'm', .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "threads-per-core", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "cores-per-socket", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "sockets-per-node", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "ntasks-per-core", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "ntasks-per-socket", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "mem-bind", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "cpu-freq", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "gpu-bind", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "gpu-freq", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "gres-flags", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "nice", .arg = a::optional, .kind = k::recorded, .lenient = true},
    {.name = "priority", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "profile", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "propagate", .arg = a::optional, .kind = k::recorded, .lenient = true},
    {.name = "wckey", .arg = a::required, .kind = k::recorded, .lenient = true, .env = "SBATCH_WCKEY"},
    {.name = "acctg-freq", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "tmp", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "time-min", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "verbose", .short_name = 'v', .kind = k::recorded, .lenient = true},
    {.name = "quiet", .short_name = 'Q', .kind = k::recorded, .lenient = true},
    {.name = "kill-on-invalid-dep", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "mcs-label", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "network", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "overcommit", .short_name = 'O', .kind = k::recorded, .lenient = true},
    {.name = "oversubscribe", .short_name = 's', .kind = k::recorded, .lenient = true},
    {.name = "spread-job", .kind = k::recorded, .lenient = true},
    {.name = "use-min-nodes", .kind = k::recorded, .lenient = true},
    {.name = "wait-all-nodes", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "switches", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "power", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "prefer", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "reboot", .kind = k::recorded, .lenient = true},
    {.name = "delay-boot", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "core-spec", .short_name = 'S', .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "thread-spec", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "contiguous", .kind = k::recorded, .lenient = true},
    {.name = "mincpus", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "cluster-constraint", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "container", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "bb", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "bbf", .arg = a::required, .kind = k::recorded, .lenient = true},
    {.name = "ignore-pbs", .kind = k::recorded, .lenient = true},
    {.name = "extra-node-info", .short_name = 'B', .arg = a::required, .kind = k::recorded, .lenient = true},

    // ---- refused: ignoring them would run something else than the script
    // asks for, so they are refused saying why.

    {.name = "hold", .short_name = 'H', .kind = k::refused, .why = "AQS cannot submit a job held"},
    {.name = "nodefile", .short_name = 'F', .arg = a::required, .kind = k::refused, .why = k_named_nodes_why},
    {.name = "wait", .short_name = 'W', .kind = k::refused, .scope = s::batch,
     .why = "fsub does not wait for the job to end"},
    {.name = "test-only", .scope = s::batch, .command_line_only = true,
     .other_scope = "is for fsub and sbatch: an interactive job starts when it can",
     .usage = "    --test-only", .help = "say when the job would start; submit nothing", .set = set_test_only},
    {.name = "gpus-per-task", .arg = a::required, .kind = k::refused, .why = k_gpus_per_node_why},
    {.name = "gpus-per-socket", .arg = a::required, .kind = k::refused, .why = k_gpus_per_node_why},
    {.name = "ntasks-per-gpu", .arg = a::required, .kind = k::refused, .why = k_gpus_per_node_why},
    {.name = "cpus-per-gpu", .arg = a::required, .kind = k::refused, .why = k_gpus_per_node_why},
    {.name = "mem-per-gpu", .arg = a::required, .kind = k::refused,
     .why = "AQS takes memory per node or per cpu (--mem, --mem-per-cpu)"},
    {.name = "uid", .arg = a::required, .kind = k::refused, .why = "a job runs as the user who submits it"},
    {.name = "gid", .arg = a::required, .kind = k::refused, .why = "a job runs with its submitter's group"},
    {.name = "input", .short_name = 'i', .arg = a::required, .kind = k::refused,
     .why = "a batch job's standard input is /dev/null"},
    {.name = "batch", .arg = a::required, .kind = k::refused, .why = "AQS does not select nodes by features"},
    // --deadline is fsub's contract through a Faucets server (above).

    // ---- srun's own (a job step launcher): frun records those that only
    // tune how a step's tasks start (it runs them with mpirun); srun drops
    // the others with a warning, except --multi-prog, which it takes itself.
    {.name = "mpi", .arg = a::required, .kind = k::recorded, .scope = s::interactive, .lenient = true},
    {.name = "cpu-bind", .arg = a::required, .kind = k::recorded, .scope = s::interactive, .lenient = true},
    {.name = "kill-on-bad-exit", .short_name = 'K', .arg = a::optional, .kind = k::recorded, .scope = s::interactive,
     .lenient = true},
    {.name = "label", .short_name = 'l', .kind = k::recorded, .scope = s::interactive, .lenient = true},
    {.name = "unbuffered", .short_name = 'u', .kind = k::recorded, .scope = s::interactive, .lenient = true},
    {.name = "overlap", .kind = k::recorded, .scope = s::interactive, .lenient = true},
    {.name = "exact", .kind = k::recorded, .scope = s::interactive, .lenient = true},
    {.name = "wait", .short_name = 'W', .arg = a::required, .kind = k::recorded, .scope = s::interactive,
     .lenient = true},
    {.name = "accel-bind", .arg = a::required, .kind = k::recorded, .scope = s::interactive, .lenient = true},
    {.name = "pty", .kind = k::recorded, .scope = s::interactive, .lenient = true},
    {.name = "jobid", .arg = a::required, .kind = k::recorded, .scope = s::interactive, .lenient = true},
    {.name = "disable-status", .short_name = 'X', .kind = k::slurm, .scope = s::interactive, .lenient = true},
    {.name = "multi-prog", .kind = k::slurm, .scope = s::interactive},
    {.name = "no-allocate", .short_name = 'Z', .kind = k::slurm, .scope = s::interactive, .lenient = true},
    {.name = "task-epilog", .arg = a::required, .kind = k::slurm, .scope = s::interactive, .lenient = true},
    {.name = "task-prolog", .arg = a::required, .kind = k::slurm, .scope = s::interactive, .lenient = true},
    {.name = "epilog", .arg = a::required, .kind = k::slurm, .scope = s::interactive, .lenient = true},
    {.name = "prolog", .arg = a::required, .kind = k::slurm, .scope = s::interactive, .lenient = true},
    {.name = "het-group", .arg = a::required, .kind = k::slurm, .scope = s::interactive, .lenient = true},
    {.name = "send-libs", .arg = a::optional, .kind = k::slurm, .scope = s::interactive, .lenient = true},
    {.name = "slurmd-debug", .arg = a::required, .kind = k::slurm, .scope = s::interactive, .lenient = true},
    {.name = "threads", .short_name = 'T', .arg = a::required, .kind = k::slurm, .scope = s::interactive,
     .lenient = true},
    // sbatch's own that fsub does not know: dropped with a warning.
    {.name = "export-file", .arg = a::required, .kind = k::slurm, .scope = s::batch, .lenient = true},
});

bool named(const submit_option& o, std::string_view name) {
  return !name.empty() && (o.name == name || o.alias == name);
}

template <class Match>
const submit_option* find_aqs(Match&& match, option_scope scope) {
  for (const auto& o : k_options) {
    if (o.kind == option_kind::acted && match(o)) return &o;
  }
  for (const auto& o : k_options) {
    if ((o.kind == option_kind::recorded || o.kind == option_kind::refused) && in_scope(o.scope, scope) && match(o)) {
      return &o;
    }
  }
  return nullptr;
}

template <class Match>
const submit_option* find_slurm(Match&& match, bool srun) {
  if (srun) {
    for (const auto& o : k_options) {
      if (o.kind != option_kind::acted && o.scope == option_scope::interactive && match(o)) return &o;
    }
  }
  for (const auto& o : k_options) {
    if (in_scope(o.scope, option_scope::batch) && match(o)) return &o;
  }
  return nullptr;
}

}  // namespace

std::span<const submit_option> submit_options() { return k_options; }

const submit_option* find_option(std::string_view long_name, option_scope scope) {
  return find_aqs([&](const submit_option& o) { return named(o, long_name); }, scope);
}
const submit_option* find_short_option(char c, option_scope scope) {
  return find_aqs([&](const submit_option& o) { return c != 0 && o.short_name == c; }, scope);
}
const submit_option* find_slurm_option(std::string_view long_name, bool srun) {
  return find_slurm([&](const submit_option& o) { return named(o, long_name); }, srun);
}
const submit_option* find_slurm_short_option(char c, bool srun) {
  return find_slurm([&](const submit_option& o) { return c != 0 && o.short_name == c; }, srun);
}

void record_option(const option_context& ctx, job_options& o, std::string_view name, std::string_view value,
                   bool warn) {
  const std::string entry = std::string(name) + (value.empty() ? "" : "=" + std::string(value));
  o.recorded.push_back(entry);
  if (warn && ctx.warned != nullptr && ctx.warned->insert(std::string(name)).second && ctx.warnings != nullptr) {
    ctx.warnings->push_back(ctx.where + "--" + shown(entry) + " is recorded; AQS does not act on it");
  }
}

std::string help_line(std::string_view left, std::string_view text, std::size_t col) {
  std::string out;
  std::string head = "  " + std::string(left);
  if (head.size() + 2 > col) {
    out += head + "\n";
    head.clear();
  }
  for (const auto line : split(text, '\n')) {
    out += head + std::string(col - head.size(), ' ') + std::string(line) + "\n";
    head.clear();
  }
  return out;
}

std::string options_help(option_scope scope) {
  std::string out;
  for (const auto& o : k_options) {
    if (o.help.empty() || !in_scope(o.scope, scope) || !in_scope(o.help_scope, scope)) continue;
    const bool interactive = scope == option_scope::interactive && !o.help_interactive.empty();
    out += help_line(o.usage, interactive ? o.help_interactive : o.help, 27);
  }
  return out;
}

}  // namespace aqs::cmdline
