// job_options: a small Slurm-compatible option parser shared by fsub, frun and script directives.
#include "cmdline/job_options.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <set>
#include <sys/stat.h>
#include <unordered_set>

#include "cmdline/elf_needed.hpp"
#include "cmdline/exec_path.hpp"
#include "core/output_pattern.hpp"
#include "cmdline/text_util.hpp"
#include "cmdline/time_limit.hpp"
#include "cmdline/usage_error.hpp"
#include "core/array_spec.hpp"
#include "core/dependency.hpp"
#include "protocol/errors.hpp"

namespace aqs::cmdline {

namespace {

enum class opt_id {
  procs, min, max, adaptive, time, name, output, error, chdir, dependency,
  requeue, no_requeue, wrap, parsable, json, help, socket, mpi, no_mpi,
  nodes, ntasks_per_node, cpus_per_task, exclusive, mem, mem_per_cpu, gres, gpus, gpus_per_node, partition,
  array, clusters, faucets, faucets_ca, token_file,
};

struct opt_def {
  opt_id id;
  char short_name;  // 0: none
  std::array<std::string_view, 2> long_names;
  bool takes_value;
  bool command_line_only;
};

constexpr auto k_options = std::to_array<opt_def>({
    {opt_id::procs, 'n', {"ntasks", "procs"}, true, false},
    {opt_id::min, 0, {"min", ""}, true, false},
    {opt_id::max, 0, {"max", ""}, true, false},
    {opt_id::adaptive, 0, {"adaptive", ""}, false, false},
    {opt_id::time, 't', {"time", ""}, true, false},
    {opt_id::name, 'J', {"job-name", ""}, true, false},
    {opt_id::output, 'o', {"output", ""}, true, false},
    {opt_id::error, 'e', {"error", ""}, true, false},
    {opt_id::chdir, 'D', {"chdir", ""}, true, false},
    {opt_id::dependency, 'd', {"dependency", ""}, true, false},
    {opt_id::requeue, 0, {"requeue", ""}, false, false},
    {opt_id::no_requeue, 0, {"no-requeue", ""}, false, false},
    {opt_id::wrap, 0, {"wrap", ""}, true, true},
    {opt_id::parsable, 0, {"parsable", ""}, false, false},
    {opt_id::json, 0, {"json", ""}, false, true},
    {opt_id::help, 'h', {"help", ""}, false, true},
    {opt_id::socket, 0, {"socket", ""}, true, true},
    {opt_id::mpi, 0, {"mpi", ""}, false, true},
    {opt_id::no_mpi, 0, {"no-mpi", ""}, false, true},
    {opt_id::nodes, 'N', {"nodes", ""}, true, false},
    {opt_id::ntasks_per_node, 0, {"ntasks-per-node", "tasks-per-node"}, true, false},
    {opt_id::cpus_per_task, 'c', {"cpus-per-task", ""}, true, false},
    {opt_id::exclusive, 0, {"exclusive", ""}, false, false},
    {opt_id::mem, 0, {"mem", ""}, true, false},
    {opt_id::mem_per_cpu, 0, {"mem-per-cpu", ""}, true, false},
    {opt_id::gres, 0, {"gres", ""}, true, false},
    {opt_id::gpus, 'G', {"gpus", ""}, true, false},
    {opt_id::gpus_per_node, 0, {"gpus-per-node", ""}, true, false},
    {opt_id::partition, 'p', {"partition", ""}, true, false},
    {opt_id::array, 'a', {"array", ""}, true, false},
    // fsub through a Faucets server (faucets_options.hpp); frun refuses them.
    {opt_id::clusters, 'M', {"clusters", ""}, true, true},
    {opt_id::faucets, 0, {"faucets", ""}, true, true},
    {opt_id::faucets_ca, 0, {"faucets-ca", ""}, true, true},
    {opt_id::token_file, 0, {"token-file", ""}, true, true},
});

// Slurm options that AQS accepts and records on the job without acting on
// them (one warning each), so that scripts from other sites run. Ignoring
// any of these never runs a job smaller or earlier than asked.
struct recorded_def {
  std::string_view name;
  char short_name;
  bool takes_value;
};
constexpr auto k_recorded = std::to_array<recorded_def>({
    {"account", 'A', true},         {"qos", 'q', true},
    {"mail-type", 0, true},         {"mail-user", 0, true},
    {"hint", 0, true},              {"constraint", 'C', true},
    {"comment", 0, true},           {"export", 0, true},
    {"reservation", 0, true},       {"licenses", 'L', true},
    {"signal", 0, true},            {"open-mode", 0, true},
    {"get-user-env", 0, false},     {"no-kill", 'k', false},
    {"distribution", 'm', true},    {"threads-per-core", 0, true},
    {"cores-per-socket", 0, true},  {"sockets-per-node", 0, true},
    {"ntasks-per-core", 0, true},   {"ntasks-per-socket", 0, true},
    {"mem-bind", 0, true},          {"cpu-freq", 0, true},
    {"gpu-bind", 0, true},          {"gpu-freq", 0, true},
    {"gres-flags", 0, true},        {"nice", 0, true},
    {"priority", 0, true},          {"profile", 0, true},
    {"propagate", 0, true},         {"wckey", 0, true},
    {"acctg-freq", 0, true},        {"tmp", 0, true},
    {"time-min", 0, true},          {"verbose", 'v', false},
    {"quiet", 'Q', false},          {"kill-on-invalid-dep", 0, true},
    {"mcs-label", 0, true},         {"network", 0, true},
    {"overcommit", 'O', false},     {"oversubscribe", 's', false},
    {"spread-job", 0, false},       {"use-min-nodes", 0, false},
    {"wait-all-nodes", 0, true},    {"switches", 0, true},
    {"power", 0, true},             {"prefer", 0, true},
    {"reboot", 0, false},           {"delay-boot", 0, true},
    {"core-spec", 'S', true},       {"thread-spec", 0, true},
    {"contiguous", 0, false},       {"mincpus", 0, true},
    {"cluster-constraint", 0, true}, {"container", 0, true},
    {"bb", 0, true},                {"bbf", 0, true},
    {"ignore-pbs", 0, false},       {"extra-node-info", 'B', true},
});

// Slurm options whose meaning AQS cannot honour: ignoring them would run
// something else than the script asks for, so they are refused with why.
struct refused_def {
  std::string_view name;
  char short_name;
  std::string_view why;
};
constexpr auto k_refused = std::to_array<refused_def>({
    {"begin", 'b', "AQS cannot defer a job's start"},
    {"hold", 'H', "AQS cannot submit a job held"},
    {"nodelist", 'w', "AQS does not place jobs on named nodes"},
    {"exclude", 'x', "AQS does not exclude named nodes"},
    {"nodefile", 'F', "AQS does not place jobs on named nodes"},
    {"wait", 'W', "fsub does not wait for the job to end"},
    {"test-only", 0, "AQS has no test-only submission"},
    {"gpus-per-task", 0, "AQS places GPUs per node (--gres=gpu:N or --gpus-per-node)"},
    {"gpus-per-socket", 0, "AQS places GPUs per node (--gres=gpu:N or --gpus-per-node)"},
    {"ntasks-per-gpu", 0, "AQS places GPUs per node (--gres=gpu:N or --gpus-per-node)"},
    {"cpus-per-gpu", 0, "AQS places GPUs per node (--gres=gpu:N or --gpus-per-node)"},
    {"mem-per-gpu", 0, "AQS takes memory per node or per cpu (--mem, --mem-per-cpu)"},
    {"uid", 0, "a job runs as the user who submits it"},
    {"gid", 0, "a job runs with its submitter's group"},
    {"input", 'i', "a batch job's standard input is /dev/null"},
    {"batch", 0, "AQS does not select nodes by features"},
    {"deadline", 0, "AQS has no deadlines"},
});

// srun's own options that only tune how a step's tasks start (frun runs
// them with mpirun): accepted with a warning on frun's command line.
constexpr auto k_step_recorded = std::to_array<recorded_def>({
    {"mpi", 0, true},         {"cpu-bind", 0, true},   {"kill-on-bad-exit", 'K', false},
    {"label", 'l', false},    {"unbuffered", 'u', false}, {"overlap", 0, false},
    {"exact", 0, false},      {"wait", 'W', true},     {"accel-bind", 0, true},
    {"pty", 0, false},        {"jobid", 0, true},      {"ntasks-per-core", 0, true},
});

const recorded_def* find_step_recorded(std::string_view name, bool is_short) {
  for (const auto& r : k_step_recorded) {
    if (is_short ? (r.short_name != 0 && name.size() == 1 && r.short_name == name[0]) : r.name == name) return &r;
  }
  return nullptr;
}

const recorded_def* find_recorded(std::string_view name, bool is_short) {
  for (const auto& r : k_recorded) {
    if (is_short ? (r.short_name != 0 && name.size() == 1 && r.short_name == name[0]) : r.name == name) return &r;
  }
  return nullptr;
}

const refused_def* find_refused(std::string_view name, bool is_short) {
  for (const auto& r : k_refused) {
    if (is_short ? (r.short_name != 0 && name.size() == 1 && r.short_name == name[0]) : r.name == name) return &r;
  }
  return nullptr;
}

// Edit distance (with transpositions), for "did you mean".
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1, 0));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The known long option closest to a misspelt one, if close enough.
std::optional<std::string> suggestion(std::string_view name) {
  std::vector<std::string_view> all;
  for (const auto& d : k_options) {
    for (const auto n : d.long_names) {
      if (!n.empty()) all.push_back(n);
    }
  }
  for (const auto& r : k_recorded) all.push_back(r.name);
  for (const auto& r : k_refused) all.push_back(r.name);
  std::optional<std::string> best;
  std::size_t best_d = 0;
  for (const auto n : all) {
    const std::size_t dist = distance(name, n);
    const std::size_t limit = std::max<std::size_t>(1, std::min<std::size_t>(3, n.size() / 4));
    if (dist <= limit && (!best || dist < best_d)) {
      best = std::string(n);
      best_d = dist;
    }
  }
  return best;
}

const opt_def* find_long(std::string_view name) {
  for (const auto& d : k_options) {
    for (const auto n : d.long_names) {
      if (!n.empty() && n == name) return &d;
    }
  }
  return nullptr;
}

const opt_def* find_short(char c) {
  for (const auto& d : k_options) {
    if (d.short_name != 0 && d.short_name == c) return &d;
  }
  return nullptr;
}

// Printable form of user text inside an error message.
std::string shown(std::string_view s) {
  std::string out(s.substr(0, 80));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  if (s.size() > 80) out += "...";
  return out;
}

enum class source { fsub, frun, aqs_directive, sbatch_directive };

struct parse_context {
  source src;
  std::string where;  // "" or "script line 7: "
  std::vector<std::string>* warnings = nullptr;
  std::set<std::string>* warned = nullptr;

  // Which of --mem / --mem-per-cpu this source gave: sbatch refuses both
  // from one source (a later source, the command line, may replace either).
  std::set<std::string>* memory_kinds = nullptr;

  bool directive() const { return src == source::aqs_directive || src == source::sbatch_directive; }
  [[noreturn]] void fail(const std::string& msg) const { throw usage_error(where + msg); }
};

std::int64_t parse_count(const parse_context& pc, std::string_view value, std::string_view opt) {
  std::int64_t v = 0;
  bool ok = !value.empty() && value.size() <= 9;
  for (const char c : value) {
    if (c < '0' || c > '9') ok = false;
    if (ok) v = v * 10 + (c - '0');
  }
  if (!ok || v < 1 || v > protocol::k_max_pe) {
    pc.fail("invalid value '" + shown(value) + "' for " + std::string(opt) +
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

// -N: "2" or "1-4" (Slurm's min-max).
void parse_nodes(const parse_context& pc, std::string_view value, std::string_view opt, job_options& o) {
  const auto dash = value.find('-');
  const auto lo = whole(value.substr(0, dash));
  const auto hi = dash == std::string_view::npos ? lo : whole(value.substr(dash + 1));
  if (!lo || !hi || *lo > protocol::k_max_pe || *hi > protocol::k_max_pe) {
    pc.fail("invalid value '" + shown(value) + "' for " + std::string(opt) + ": expected N or MIN-MAX nodes");
  }
  if (*hi < *lo) pc.fail(std::string(opt) + " " + shown(value) + ": the maximum is below the minimum");
  o.nodes_min = *lo;
  o.nodes_max = *hi;
}

// --mem / --mem-per-cpu: a number with an optional unit K, M, G or T
// (default M, as Slurm), in MB rounded up.
std::int64_t parse_memory(const parse_context& pc, std::string_view value, std::string_view opt) {
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
    pc.fail("invalid value '" + shown(value) + "' for " + std::string(opt) +
            ": expected a size such as 4000, 500M, 4G or 1T (default unit MB)");
  }
  return (*n * scale_kb + 1023) / 1024;
}

// --gres: "gpu:2", "gpu:v100:2", "gpu" (one); other resources are recorded.
void parse_gres(const parse_context& pc, std::string_view value, std::string_view opt, job_options& o,
                std::vector<std::string>& others) {
  for (const auto item : split(value, ',')) {
    const auto fields = split(item, ':');
    if (fields[0] != "gpu") {
      if (item.empty() || fields[0] == "none") continue;
      others.push_back(std::string(item));
      continue;
    }
    std::int64_t n = 1;
    if (fields.size() > 1) {
      const auto last = whole(fields.back());
      if (last) {
        n = *last;
      } else if (fields.size() > 2) {
        pc.fail("invalid value '" + shown(value) + "' for " + std::string(opt) + ": expected gpu[:TYPE]:COUNT");
      }
    }
    if (n > (1 << 16)) pc.fail("invalid GPU count in '" + shown(value) + "' for " + std::string(opt));
    o.gpus_per_node = n;
  }
}

// --gpus / --gpus-per-node: "2" or "TYPE:2".
std::int64_t parse_gpus(const parse_context& pc, std::string_view value, std::string_view opt) {
  const auto colon = value.rfind(':');
  const auto n = whole(colon == std::string_view::npos ? value : value.substr(colon + 1));
  if (!n || *n > (1 << 16)) {
    pc.fail("invalid value '" + shown(value) + "' for " + std::string(opt) + ": expected [TYPE:]COUNT");
  }
  return *n;
}

// Slurm's dependency list ("afterok:1:2,afterany:3", "after:4?afternotok:5"):
// the jobs it names go into o.afterok; anything beyond plain afterok is kept
// as text for the job's geometry.
void parse_dependency(const parse_context& pc, std::string_view value, job_options& o) {
  core::dependency d;
  try {
    d = core::parse_dependency(value, protocol::k_max_ids);
  } catch (const std::invalid_argument& e) {
    pc.fail(std::string("--dependency: ") + e.what());
  }
  o.afterok = d.jobs();
  o.dependency = d.plain_afterok() ? std::optional<std::string>() : core::to_string(d);
}

std::string nonempty(const parse_context& pc, std::string_view value, std::string_view opt) {
  if (value.empty()) pc.fail("empty value for " + std::string(opt));
  return std::string(value);
}

void note_memory_kind(const parse_context& pc, const std::string& kind) {
  if (pc.memory_kinds == nullptr) return;
  pc.memory_kinds->insert(kind);
  if (pc.memory_kinds->size() > 1) pc.fail("--mem and --mem-per-cpu are mutually exclusive");
}

// --mpi and --no-mpi contradict each other: no "last one wins" here, since
// either guess would run something else than one of them asks for.
void set_mpi(const parse_context& pc, job_options& o, bool mpi) {
  if (o.mpi && *o.mpi != mpi) pc.fail("give either --mpi or --no-mpi, not both");
  o.mpi = mpi;
}

void apply(const parse_context& pc, job_options& o, const opt_def& d, std::string_view value,
           std::string_view opt) {
  switch (d.id) {
    case opt_id::procs: o.procs = parse_count(pc, value, opt); break;
    case opt_id::min: o.min_pe = parse_count(pc, value, opt); break;
    case opt_id::max: o.max_pe = parse_count(pc, value, opt); break;
    case opt_id::adaptive: o.adaptive = true; break;
    case opt_id::time:
      try {
        o.time_limit_s = parse_time_limit(value);
      } catch (const usage_error& e) {
        pc.fail(std::string(opt) + ": " + e.what());
      }
      break;
    case opt_id::name: o.job_name = nonempty(pc, value, opt); break;
    case opt_id::output: o.output = nonempty(pc, value, opt); break;
    case opt_id::error: o.error = nonempty(pc, value, opt); break;
    case opt_id::chdir: o.chdir = nonempty(pc, value, opt); break;
    case opt_id::dependency: parse_dependency(pc, value, o); break;
    case opt_id::requeue: o.requeue = true; break;
    case opt_id::no_requeue: o.requeue = false; break;
    case opt_id::wrap: o.wrap = nonempty(pc, value, opt); break;
    case opt_id::parsable: o.parsable = true; break;
    case opt_id::json: o.json = true; break;
    case opt_id::help: o.help = true; break;
    case opt_id::socket: o.socket = nonempty(pc, value, opt); break;
    case opt_id::mpi: set_mpi(pc, o, true); break;
    case opt_id::no_mpi: set_mpi(pc, o, false); break;
    case opt_id::nodes: parse_nodes(pc, value, opt, o); break;
    case opt_id::ntasks_per_node: o.ntasks_per_node = parse_count(pc, value, opt); break;
    case opt_id::cpus_per_task: o.cpus_per_task = parse_count(pc, value, opt); break;
    case opt_id::exclusive: o.exclusive = true; break;
    case opt_id::mem:
      note_memory_kind(pc, "--mem");
      o.mem_mb = parse_memory(pc, value, opt);
      o.mem_per_cpu_mb.reset();
      break;
    case opt_id::mem_per_cpu:
      note_memory_kind(pc, "--mem-per-cpu");
      o.mem_per_cpu_mb = parse_memory(pc, value, opt);
      if (*o.mem_per_cpu_mb == 0) pc.fail(std::string(opt) + " must be above 0");
      o.mem_mb.reset();
      break;
    case opt_id::gres: {
      std::vector<std::string> others;
      parse_gres(pc, value, opt, o, others);
      for (const auto& g : others) {
        o.recorded.push_back("gres=" + g);
        if (pc.warnings != nullptr) {
          pc.warnings->push_back(pc.where + "--gres=" + shown(g) + " is recorded; AQS schedules only GPUs");
        }
      }
      break;
    }
    case opt_id::gpus: o.gpus_total = parse_gpus(pc, value, opt); break;
    case opt_id::gpus_per_node: o.gpus_per_node = parse_gpus(pc, value, opt); break;
    case opt_id::partition:
      // aqsd checks the name against its partitions (aqs.conf); without
      // any it takes every name and says so in its reply.
      o.partition = nonempty(pc, value, opt);
      break;
    case opt_id::array:
      try {
        (void)core::parse_array_spec(value);
      } catch (const std::invalid_argument& e) {
        // Past the most any aqsd takes: name the cap an admin sets lower.
        const bool too_many = std::string_view(e.what()).starts_with("an array of more than");
        pc.fail(std::string(opt) + ": " + e.what() +
                (too_many ? " (MaxArraySize is at most " + std::to_string(core::k_max_array_tasks) + ")" : ""));
      }
      o.array = std::string(value);
      break;
    case opt_id::clusters: o.faucets.cluster = nonempty(pc, value, opt); break;
    case opt_id::faucets: o.faucets.url = nonempty(pc, value, opt); break;
    case opt_id::faucets_ca: o.faucets.ca_file = nonempty(pc, value, opt); break;
    case opt_id::token_file: o.faucets.token_file = nonempty(pc, value, opt); break;
  }
}

// An option that is not one of AQS's own. Slurm options AQS records are
// accepted with one warning (their value skipped with them); Slurm options
// it cannot honour are refused saying why; anything else is an error that
// suggests the option meant, as Slurm does. Returns how many extra words
// were consumed.
std::size_t other_option(const parse_context& pc, job_options& o, std::string_view name, bool is_short,
                         std::optional<std::string_view> inline_value, std::optional<std::string_view> next) {
  const std::string_view bare = name.substr(is_short ? 1 : 2);
  const recorded_def* step = pc.src == source::frun ? find_step_recorded(bare, is_short) : nullptr;
  if (const refused_def* r = step != nullptr ? nullptr : find_refused(bare, is_short)) {
    pc.fail(std::string(r->why) + " (" + std::string(name) + ")");
  }
  if (const recorded_def* r = step != nullptr ? step : find_recorded(bare, is_short)) {
    std::size_t used = 0;
    std::string value;
    if (r->takes_value) {
      if (inline_value) {
        value = std::string(*inline_value);
      } else if (next) {
        value = std::string(*next);
        used = 1;
      } else {
        pc.fail("option '" + std::string(name) + "' needs a value");
      }
    } else if (inline_value) {
      value = std::string(*inline_value);
    }
    const std::string entry = std::string(r->name) + (value.empty() ? "" : "=" + value);
    // --export=ALL is what AQS does anyway; what follows ALL, is set on top:
    // NAME=VALUE as given, a bare NAME from the environment (already there).
    if (r->name == "export" && (value == "ALL" || value.starts_with("ALL,"))) {
      std::vector<std::string> vars;
      std::string_view rest = std::string_view(value).substr(3);
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
        if (!name_ok) pc.fail("--export: '" + shown(item) + "' is not NAME or NAME=VALUE");
        if (eq != std::string::npos) vars.push_back(item);
      }
      o.exported = std::move(vars);
      return used;
    }
    o.recorded.push_back(entry);
    // --signal is kept with the others, and the agent acts on it (core/signal_spec).
    if (r->name == "signal") return used;
    const std::string key(r->name);
    if (pc.warned != nullptr && pc.warned->insert(key).second && pc.warnings != nullptr) {
      pc.warnings->push_back(pc.where + "--" + shown(entry) + " is recorded; AQS does not act on it");
    }
    return used;
  }
  const auto close = is_short ? std::nullopt : suggestion(bare);
  pc.fail("unknown option '" + shown(name) + "'" + (close ? " (did you mean '--" + *close + "'?)" : std::string()) +
          (pc.directive() ? std::string(pc.src == source::aqs_directive ? " in #AQS directive" : " in #SBATCH directive")
                          : " (see " + std::string(pc.src == source::frun ? "frun" : "fsub") + " --help)"));
}

// Parses options from words[i..]. Returns the index of the first word that
// is not an option (words.size() if none); "--" is consumed and ends options.
std::size_t parse_words(const parse_context& pc, std::span<const std::string> words, job_options& o) {
  std::size_t i = 0;
  while (i < words.size()) {
    const std::string& w = words[i];
    if (w == "--") return i + 1;
    const bool is_long = w.size() > 2 && w[0] == '-' && w[1] == '-';
    const bool is_short = !is_long && w.size() >= 2 && w[0] == '-' && w[1] != '-';
    if (!is_long && !is_short) return i;

    std::string_view name;
    std::optional<std::string_view> inline_value;
    const opt_def* d = nullptr;
    const std::string_view wv(w);
    if (is_long) {
      const auto eq = wv.find('=');
      name = wv.substr(0, eq);
      if (eq != std::string_view::npos) inline_value = wv.substr(eq + 1);
      d = find_long(name.substr(2));
    } else {
      name = wv.substr(0, 2);
      d = find_short(w[1]);
      if (w.size() > 2) inline_value = wv.substr(2);
    }
    if (d == nullptr) {
      std::optional<std::string_view> next;
      if (i + 1 < words.size()) next = words[i + 1];
      i += 1 + other_option(pc, o, name, is_short, inline_value, next);
      continue;
    }
    if (d->id == opt_id::mpi && inline_value && pc.src == source::frun) {
      // srun's --mpi=pmix (a plugin name), not frun's --mpi flag.
      std::optional<std::string_view> next;
      i += 1 + other_option(pc, o, name, is_short, inline_value, next);
      continue;
    }
    if ((d->id == opt_id::mpi || d->id == opt_id::no_mpi) && pc.src != source::frun) {
      pc.fail("option '" + std::string(name) + "' is for frun; a batch script starts mpirun itself");
    }
    if (d->command_line_only && pc.directive()) {
      pc.fail("option '" + std::string(name) + "' is only allowed on the command line");
    }
    if (d->command_line_only && pc.src == source::frun && d->id == opt_id::wrap) {
      pc.fail("option '--wrap' is for fsub; give frun the command itself");
    }
    const bool faucets_option = d->id == opt_id::clusters || d->id == opt_id::faucets ||
                                d->id == opt_id::faucets_ca || d->id == opt_id::token_file;
    if (faucets_option && pc.src == source::frun) {
      pc.fail("option '" + std::string(name) + "' is for fsub: frun runs on this cluster only");
    }
    std::string_view value;
    if (d->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else {
        if (i + 1 >= words.size()) pc.fail("option '" + std::string(name) + "' needs a value");
        value = words[++i];
      }
    } else if (inline_value && d->id == opt_id::exclusive) {
      // --exclusive=user|mcs|topo: AQS only has whole nodes for the job.
      if (!is_long) pc.fail("option '" + std::string(name) + "' takes no value");
      value = *inline_value;
    } else if (inline_value) {
      pc.fail("option '" + std::string(name) + "' takes no value");
    }
    apply(pc, o, *d, value, name);
    ++i;
  }
  return i;
}

// Shell-like word splitting of one directive line.
std::vector<std::string> split_words(const parse_context& pc, std::string_view line) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  std::size_t i = 0;
  while (i < line.size()) {
    const char c = line[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      if (in_word) words.push_back(std::move(cur));
      cur.clear();
      in_word = false;
      ++i;
    } else if (c == '#' && !in_word) {
      break;  // comment to end of line
    } else if (c == '\'' || c == '"') {
      const std::size_t close = line.find(c, i + 1);
      if (close == std::string_view::npos) pc.fail("unterminated quote");
      cur.append(line.substr(i + 1, close - i - 1));
      in_word = true;
      i = close + 1;
    } else if (c == '\\' && i + 1 < line.size()) {
      cur.push_back(line[i + 1]);
      in_word = true;
      i += 2;
    } else {
      cur.push_back(c);
      in_word = true;
      ++i;
    }
  }
  if (in_word) words.push_back(std::move(cur));
  return words;
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xe0) == 0xc0) { n = 1; cp = c & 0x1f; }
    else if ((c & 0xf0) == 0xe0) { n = 2; cp = c & 0x0f; }
    else if ((c & 0xf8) == 0xf0) { n = 3; cp = c & 0x07; }
    else return false;
    if (i + n >= s.size()) return false;  // truncated sequence
    for (std::size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

void check_text(std::string_view s, const std::string& what) {
  if (s.find('\0') != std::string_view::npos) throw usage_error(what + " contains a NUL byte");
  if (!valid_utf8(s)) throw usage_error(what + " is not valid UTF-8");
}

std::string base_name(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// Slurm's geometry options into the job's geometry and size (min_pe ==
// max_pe == ntasks * cpus_per_task), checked as sbatch checks them. Unset
// when none is given and the size comes from --min/--max (AQS's own way).
std::optional<protocol::job_geometry> geometry_of(const job_options& o, protocol::job_spec& s, bool by_range,
                                                  std::vector<std::string>* warnings) {
  const bool shaped = o.nodes_min || o.ntasks_per_node || o.cpus_per_task || o.exclusive || o.mem_mb ||
                      o.mem_per_cpu_mb || o.gpus_per_node || o.gpus_total;
  if (!shaped && !o.partition && o.recorded.empty() && !o.procs && !o.array && !o.dependency) return std::nullopt;
  protocol::job_geometry g;
  g.dependency = o.dependency;
  g.partition = o.partition;
  g.recorded = o.recorded;
  g.array = o.array;
  if (o.array && (s.adaptive || by_range)) {
    throw usage_error("job arrays are of rigid jobs (-n N); an adaptive job is one job that changes size");
  }
  if (s.adaptive || by_range) {
    // Per-rank geometry: -c gives each rank that many processors on one
    // node, and --min/--max (or -n) count ranks, as -n does in Slurm. The
    // scheduler keeps whole ranks as the job changes size; node counts,
    // tasks per node, whole nodes, memory and GPUs it does not keep, so
    // they are refused rather than silently dropped.
    if (!s.adaptive && shaped) {
      throw usage_error("-N, --ntasks-per-node, -c, --exclusive, --mem, --mem-per-cpu and GPUs size a rigid job with "
                        "-n N, not --min/--max");
    }
    std::vector<std::string> unkept;
    if (o.nodes_min) unkept.emplace_back("-N");
    if (o.ntasks_per_node) unkept.emplace_back("--ntasks-per-node");
    if (o.exclusive) unkept.emplace_back("--exclusive");
    if (o.mem_mb) unkept.emplace_back("--mem");
    if (o.mem_per_cpu_mb) unkept.emplace_back("--mem-per-cpu");
    if (o.gpus_per_node || o.gpus_total) unkept.emplace_back("GPUs");
    if (!unkept.empty()) {
      std::string names;
      for (const auto& n : unkept) names += (names.empty() ? "" : ", ") + n;
      throw usage_error(names + (unkept.size() == 1 && unkept[0] != "GPUs" ? " is" : " are") +
                        " not supported for an adaptive job (its ranks go where there is room as it changes size; it "
                        "takes -c for processors per rank, and --min/--max count ranks)");
    }
    const std::int64_t c = o.cpus_per_task.value_or(1);
    if (s.max_pe > protocol::k_max_pe / c) {
      throw usage_error("--max times -c is more than " + std::to_string(protocol::k_max_pe) + " processors");
    }
    g.ntasks = s.min_pe;
    g.cpus_per_task = c;
    s.min_pe *= c;
    s.max_pe *= c;
    return g;
  }
  const std::int64_t c = o.cpus_per_task.value_or(1);
  std::int64_t ntasks = 1;
  if (o.procs) {
    ntasks = *o.procs;
  } else if (o.nodes_min) {
    ntasks = *o.nodes_min * o.ntasks_per_node.value_or(1);  // sbatch: one task per node by default
  } else if (o.ntasks_per_node) {
    ntasks = *o.ntasks_per_node;
  }
  std::optional<std::int64_t> nodes_min = o.nodes_min, nodes_max = o.nodes_max;
  if (nodes_min && *nodes_min > ntasks) {
    // sbatch does the same: a node with no task would sit idle.
    if (warnings != nullptr) {
      warnings->push_back("can't run " + std::to_string(ntasks) + (ntasks == 1 ? " task" : " tasks") + " on " +
                          std::to_string(*nodes_min) + " nodes, setting nodes to " + std::to_string(ntasks));
    }
    nodes_min = ntasks;
    nodes_max = std::min(*nodes_max, ntasks);
  }
  if (o.ntasks_per_node && nodes_max) {
    const std::int64_t need = (ntasks + *o.ntasks_per_node - 1) / *o.ntasks_per_node;
    if (need > *nodes_max) {
      throw usage_error(std::to_string(ntasks) + " tasks at " + std::to_string(*o.ntasks_per_node) +
                        " per node need " + std::to_string(need) + " nodes, but -N allows at most " +
                        std::to_string(*nodes_max));
    }
  }
  if (ntasks > protocol::k_max_pe / c) throw usage_error("-n times -c is more than " + std::to_string(protocol::k_max_pe) + " processors");
  g.ntasks = ntasks;
  g.cpus_per_task = c;
  g.ntasks_per_node = o.ntasks_per_node;
  g.nodes_min = nodes_min;
  g.nodes_max = nodes_max;
  g.exclusive = o.exclusive.value_or(false);
  if (o.mem_mb) {
    if (*o.mem_mb == 0) {
      g.exclusive = true;  // Slurm: --mem=0 is all of each node's memory
    } else {
      g.mem_per_node_mb = o.mem_mb;
    }
  }
  g.mem_per_cpu_mb = o.mem_per_cpu_mb;
  if (o.gpus_per_node && o.gpus_total) throw usage_error("give --gpus or GPUs per node (--gres=gpu:N, --gpus-per-node), not both");
  if (o.gpus_per_node && *o.gpus_per_node > 0) g.gpus_per_node = o.gpus_per_node;
  if (o.gpus_total && *o.gpus_total > 0) {
    const std::int64_t nodes = nodes_min.value_or(1);
    g.gpus_per_node = (*o.gpus_total + nodes - 1) / nodes;
  }
  s.min_pe = s.max_pe = ntasks * c;
  return g;
}

// Size, name, workdir, patterns, environment: what fsub and frun share.
protocol::job_spec common_spec(const job_options& o, const std::string& default_name,
                               const submit_context& ctx, std::vector<std::string>* warnings = nullptr) {
  protocol::job_spec s;
  const bool by_n = o.procs.has_value();
  const bool by_range = o.min_pe.has_value() || o.max_pe.has_value();
  if (by_n && by_range) throw usage_error("use either -n/--ntasks or --min/--max, not both");
  const bool adaptive = o.adaptive.value_or(false);
  if (by_n) {
    s.min_pe = s.max_pe = *o.procs;
  } else if (by_range) {
    s.max_pe = o.max_pe.value_or(o.min_pe.value_or(1));
    s.min_pe = o.min_pe.value_or(adaptive ? 1 : s.max_pe);
    if (s.min_pe > s.max_pe) {
      throw usage_error("--min " + std::to_string(s.min_pe) + " is greater than --max " + std::to_string(s.max_pe));
    }
    if (s.min_pe < s.max_pe && !adaptive) {
      throw usage_error("--min " + std::to_string(s.min_pe) + " below --max " + std::to_string(s.max_pe) +
                        " needs --adaptive (a rigid job runs on exactly one size)");
    }
  }
  s.adaptive = adaptive;
  s.geometry = geometry_of(o, s, by_range, warnings);
  if (o.time_limit_s && *o.time_limit_s > 0) s.walltime_s = *o.time_limit_s;
  s.name = o.job_name.value_or(default_name);
  if (s.name.empty()) s.name = "job";
  for (const char c : s.name) {
    if (static_cast<unsigned char>(c) < 0x20) throw usage_error("job name '" + shown(s.name) + "' contains a control character");
  }
  if (s.name.size() > protocol::k_max_name) {
    throw usage_error("job name is longer than " + std::to_string(protocol::k_max_name) + " bytes");
  }
  std::filesystem::path wd(ctx.cwd);
  if (o.chdir) wd /= *o.chdir;  // an absolute -D replaces cwd
  std::string workdir = wd.lexically_normal().string();
  while (workdir.size() > 1 && workdir.back() == '/') workdir.pop_back();
  s.workdir = workdir;
  // An array's tasks each get a file of their own by default, as sbatch's.
  s.stdout_pattern = o.output.value_or(o.array ? std::string("aqs-%A_%a.out") : std::string(core::k_default_output_pattern));
  s.stderr_pattern = o.error;
  for (const auto& e : ctx.environment) {
    const auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0 || e.starts_with("PWD=")) continue;
    s.environment.push_back(e);
  }
  // --export=ALL,NAME=VALUE: those win over the submitter's own.
  for (const auto& e : o.exported.value_or(std::vector<std::string>{})) {
    const std::string prefix = e.substr(0, e.find('=') + 1);
    std::erase_if(s.environment, [&](const std::string& have) { return have.starts_with(prefix); });
    s.environment.push_back(e);
  }
  // The directory fsub ran in, whatever a parent left in $PWD: the job's
  // SLURM_SUBMIT_DIR (Slurm takes it from getcwd() too).
  if (!ctx.cwd.empty()) s.environment.push_back("PWD=" + ctx.cwd);
  s.afterok = o.afterok.value_or(std::vector<std::int64_t>{});
  s.requeue = o.requeue.value_or(false);
  s.submit_token = ctx.submit_token;
  s.umask = ctx.umask;
  check_text(s.name, "the job name");
  check_text(s.workdir, "the working directory");
  check_text(s.stdout_pattern, "the output pattern");
  if (s.stderr_pattern) check_text(*s.stderr_pattern, "the error pattern");
  for (const auto& e : s.environment) check_text(e, "environment variable '" + shown(e.substr(0, e.find('='))) + "'");
  return s;
}

// srun's way for an MPI program: under plain mpirun, whose environment from
// the node agent starts one rank per processor of a rigid job, each on its
// cpu. The program is looked up as the node will (the job's PATH and working
// directory), and mpirun by its absolute path, so that the node runs the one
// found here. Adaptive jobs start their ranks themselves (mpirun -np
// $AQS_NPROCS with the shim), so they run as given.
std::vector<std::string> frun_argv(const frun_command_line& cmd, const protocol::job_spec& s) {
  const auto& program = cmd.command.front();
  if (s.adaptive) {
    if (cmd.options.mpi.value_or(false)) {
      throw usage_error("--mpi is for rigid jobs; an adaptive job starts its ranks itself (mpirun -np $AQS_NPROCS)");
    }
    return cmd.command;
  }
  if (cmd.options.mpi == false) return cmd.command;
  const auto path = path_variable(s.environment);
  if (!cmd.options.mpi) {
    const auto file = find_executable(program, path, s.workdir);
    if (!file || !is_mpi_program(*file)) return cmd.command;
  }
  const auto mpirun = find_executable("mpirun", path, s.workdir);
  if (!mpirun) {
    throw usage_error(cmd.options.mpi ? std::string("--mpi needs mpirun, but there is no mpirun on PATH")
                                      : "'" + shown(program) +
                                            "' is an MPI program but there is no mpirun on PATH "
                                            "(use --no-mpi to run it as one process)");
  }
  std::vector<std::string> argv{*mpirun};
  argv.insert(argv.end(), cmd.command.begin(), cmd.command.end());
  return argv;
}

// Runs the request through the server's own validation.
void validate_like_server(const protocol::submit& req) {
  try {
    (void)protocol::parse_message(std::string_view(protocol::encode_body(req)));
  } catch (const protocol::protocol_error& e) {
    throw usage_error(std::string("the job request would be refused: ") + e.what());
  }
}

}  // namespace

void merge(job_options& base, const job_options& over) {
  if (over.procs || over.min_pe || over.max_pe) {
    base.procs = over.procs;
    base.min_pe = over.min_pe;
    base.max_pe = over.max_pe;
  }
  auto take = [](auto& b, const auto& v) {
    if (v) b = v;
  };
  take(base.adaptive, over.adaptive);
  take(base.time_limit_s, over.time_limit_s);
  take(base.job_name, over.job_name);
  take(base.output, over.output);
  take(base.error, over.error);
  take(base.chdir, over.chdir);
  if (over.afterok) {
    base.afterok = over.afterok;
    base.dependency = over.dependency;
  }
  take(base.requeue, over.requeue);
  take(base.wrap, over.wrap);
  take(base.parsable, over.parsable);
  take(base.socket, over.socket);
  take(base.faucets.cluster, over.faucets.cluster);
  take(base.faucets.url, over.faucets.url);
  take(base.faucets.ca_file, over.faucets.ca_file);
  take(base.faucets.token_file, over.faucets.token_file);
  take(base.mpi, over.mpi);
  if (over.nodes_min) {
    base.nodes_min = over.nodes_min;
    base.nodes_max = over.nodes_max;
  }
  take(base.ntasks_per_node, over.ntasks_per_node);
  take(base.cpus_per_task, over.cpus_per_task);
  take(base.exclusive, over.exclusive);
  if (over.mem_mb || over.mem_per_cpu_mb) {
    base.mem_mb = over.mem_mb;
    base.mem_per_cpu_mb = over.mem_per_cpu_mb;
  }
  take(base.gpus_per_node, over.gpus_per_node);
  take(base.gpus_total, over.gpus_total);
  take(base.partition, over.partition);
  take(base.array, over.array);
  take(base.exported, over.exported);
  base.recorded.insert(base.recorded.end(), over.recorded.begin(), over.recorded.end());
  base.json = base.json || over.json;
  base.help = base.help || over.help;
}

fsub_command_line parse_fsub_command_line(std::span<const std::string> args) {
  fsub_command_line out;
  std::set<std::string> warned, memory_kinds;
  const parse_context pc{source::fsub, "", &out.warnings, &warned, &memory_kinds};
  const std::size_t first = parse_words(pc, args, out.options);
  if (out.options.help) return out;
  check_faucets_options(out.options.faucets, cluster_choice::submit, out.options.socket.has_value(), "fsub");
  if (first < args.size()) {
    out.script_path = args[first];
    out.script_args.assign(args.begin() + static_cast<std::ptrdiff_t>(first) + 1, args.end());
  }
  if (out.options.wrap && out.script_path) {
    throw usage_error("give either a script or --wrap, not both ('" + shown(*out.script_path) + "' after --wrap)");
  }
  if (!out.options.wrap && !out.script_path) throw usage_error("no script given (fsub [options] script [args...] or fsub --wrap \"cmd\")");
  if (out.script_path && out.script_path->empty()) throw usage_error("empty script path");
  return out;
}

frun_command_line parse_frun_command_line(std::span<const std::string> args) {
  frun_command_line out;
  std::set<std::string> warned, memory_kinds;
  const parse_context pc{source::frun, "", &out.warnings, &warned, &memory_kinds};
  const std::size_t first = parse_words(pc, args, out.options);
  if (out.options.help) return out;
  out.command.assign(args.begin() + static_cast<std::ptrdiff_t>(first), args.end());
  if (out.command.empty() || out.command.front().empty()) throw usage_error("no command given (frun [options] command [args...])");
  return out;
}

script_directives parse_directives(std::string_view script) {
  script_directives out;
  std::set<std::string> warned, memory_kinds;
  std::size_t pos = 0;
  std::size_t line_no = 0;
  while (pos < script.size()) {
    const std::size_t nl = script.find('\n', pos);
    std::string_view line = script.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? script.size() : nl + 1;
    ++line_no;
    if (line_no == 1 && line.starts_with("#!")) continue;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) continue;  // blank
    if (line[first] != '#') break;                  // the first command ends directives
    source src;
    std::string_view rest;
    if (line.starts_with("#AQS") && (line.size() == 4 || line[4] == ' ' || line[4] == '\t')) {
      src = source::aqs_directive;
      rest = line.substr(4);
    } else if (line.starts_with("#SBATCH") &&
               (line.size() == 7 || line[7] == ' ' || line[7] == '\t' || line[7] == '-')) {
      // sbatch needs no blank after the keyword ("#SBATCH--gres=gpu:1").
      src = source::sbatch_directive;
      rest = line.substr(7);
    } else {
      continue;  // an ordinary comment
    }
    const parse_context pc{src, "script line " + std::to_string(line_no) + ": ", &out.warnings, &warned,
                           &memory_kinds};
    const auto words = split_words(pc, rest);
    job_options line_opts;
    const std::size_t stop = parse_words(pc, words, line_opts);
    if (stop < words.size()) {
      if (src == source::aqs_directive) pc.fail("unexpected argument '" + shown(words[stop]) + "' in #AQS directive");
      out.warnings.push_back(pc.where + "#SBATCH argument '" + shown(words[stop]) + "' is not an option; ignored");
    }
    merge(out.options, line_opts);
  }
  return out;
}

fsub_request build_fsub_request(const fsub_command_line& cmd, std::optional<std::string_view> script_text,
                                const submit_context& ctx) {
  fsub_request out;
  job_options opts;
  std::string script;
  if (cmd.options.wrap) {
    script = "#!/bin/sh\n" + *cmd.options.wrap + "\n";
  } else {
    if (!script_text) throw usage_error("no script text given for '" + shown(cmd.script_path.value_or("")) + "'");
    script = std::string(*script_text);
    if (!script.starts_with("#!")) {
      throw usage_error("'" + shown(cmd.script_path.value_or("script")) +
                        "' does not look like a batch script: the first line must start with #! and an interpreter");
    }
    check_text(script, "the script");
    if (script.size() > protocol::k_max_script) {
      throw usage_error("the script is larger than " + std::to_string(protocol::k_max_script) + " bytes");
    }
    auto d = parse_directives(script);
    opts = std::move(d.options);
    out.warnings = std::move(d.warnings);
  }
  merge(opts, cmd.options);
  out.warnings.insert(out.warnings.end(), cmd.warnings.begin(), cmd.warnings.end());
  const std::string default_name = cmd.options.wrap ? std::string("wrap") : base_name(*cmd.script_path);
  out.request.job = common_spec(opts, default_name, ctx, &out.warnings);
  out.request.job.script = std::move(script);
  out.request.job.argv = cmd.script_args;
  for (const auto& a : out.request.job.argv) check_text(a, "a script argument");
  out.parsable = opts.parsable.value_or(false);
  out.json = opts.json;
  validate_like_server(out.request);
  return out;
}

std::int64_t process_umask() noexcept {
  const mode_t mask = ::umask(022);
  ::umask(mask);
  return static_cast<std::int64_t>(mask & 0777);
}

protocol::submit build_frun_request(const frun_command_line& cmd, const submit_context& ctx) {
  if (cmd.options.array) throw usage_error("--array is for batch jobs (fsub); frun runs one interactive job");
  protocol::submit out;
  out.job = common_spec(cmd.options, base_name(cmd.command.front()), ctx);
  out.job.argv = frun_argv(cmd, out.job);
  for (const auto& a : out.job.argv) check_text(a, "a command argument");
  out.job.interactive = true;
  validate_like_server(out);
  return out;
}

namespace {
// The size and layout options, the same for fsub and frun.
std::string geometry_usage() {
  return "  -n, --ntasks N           N tasks (one processor each unless -c); --procs N is the same\n"
         "  -N, --nodes N[-M]        on N nodes (at most M); one task per node unless -n says more\n"
         "      --ntasks-per-node K  exactly K tasks on every node used\n"
         "  -c, --cpus-per-task C    C processors per task, on one node (threads of an OpenMP task)\n"
         "      --exclusive          whole nodes, shared with no other job\n"
         "      --mem SIZE           memory per node (K, M, G, T; default M; 0: all of it)\n"
         "      --mem-per-cpu SIZE   memory per processor\n"
         "      --gres gpu[:TYPE]:N  N GPUs per node (also --gpus-per-node N; -G, --gpus N in all)\n"
         "  -p, --partition NAME     the partition(s) to run in, \"a,b\" (default: the default one)\n";
}
}  // namespace

std::string fsub_usage() {
  return "Usage: fsub [options] script [args...]\n"
         "       fsub [options] --wrap \"command\"\n"
         "Submit a batch job; prints \"Submitted job N\". Options may also be given as #AQS or\n"
         "#SBATCH lines at the top of the script; the command line wins.\n"
         + geometry_usage() +
         "  -a, --array LIST[%K]     a job per index: 0-99, 1,3,5-9:2; %K: at most K at once\n"
         "      --min N, --max M     adaptive size range in ranks (with --adaptive; -c C: C processors each)\n"
         "      --adaptive           the job uses the AQS runtime and can be resized\n"
         "  -t, --time LIMIT         minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S or UNLIMITED\n"
         "  -J, --job-name NAME      default: the script's file name\n"
         "  -o, --output PATTERN     stdout file; %j job id, %x name, %u user (default aqs-%j.out)\n"
         "  -e, --error PATTERN      stderr file (default: with stdout)\n"
         "  -D, --chdir DIR          working directory (default: the current one)\n"
         "  -d, --dependency LIST    afterok:ID[:ID..] (completed), afterany: (ended), afternotok:\n"
         "                           (failed), after: (started); ',' all of them, '?' any\n"
         "      --requeue            requeue the job if its node fails (--no-requeue: don't)\n"
         "      --wrap CMD           run CMD with /bin/sh instead of a script\n"
         "      --parsable           print only the job id\n"
         "      --json               print the result as JSON\n"
         "      --socket PATH        aqsd's socket (default: $AQS_SOCKET, else the system one)\n"
         + faucets_usage(cluster_choice::submit) +
         "  -h, --help               this help\n"
         "Through a Faucets server the first line is still \"Submitted job N\", N the server's\n"
         "job id; the cluster and its job id follow on stderr once a cluster is chosen.\n"
         "Slurm options AQS does not act on (--account, --qos, --mail-*, --hint, ...) are\n"
         "accepted with a warning; options it cannot honour (--begin, --nodelist, ...) are errors.\n";
}

std::string frun_usage() {
  return "Usage: frun [options] command [args...]\n"
         "Run an interactive job: waits for processors, streams its output, Ctrl-C cancels it,\n"
         "and exits with the job's exit code. Like srun, an MPI program (an executable that\n"
         "links libmpi.so) runs as one rank per processor, started with mpirun from PATH;\n"
         "other commands run once. Adaptive jobs run the command as given.\n"
         + geometry_usage() +
         "      --min N, --max M     adaptive size range in ranks (with --adaptive; -c C: C processors each)\n"
         "      --adaptive           the job uses the AQS runtime and can be resized\n"
         "  -t, --time LIMIT         minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S or UNLIMITED\n"
         "  -J, --job-name NAME      default: the command's file name\n"
         "  -D, --chdir DIR          working directory (default: the current one)\n"
         "  -d, --dependency LIST    afterok:ID[:ID..] (completed), afterany: (ended), afternotok:\n"
         "                           (failed), after: (started); ',' all of them, '?' any\n"
         "      --mpi                run the command under mpirun even if it does not look like MPI\n"
         "      --no-mpi             run the command once even if it is an MPI program\n"
         "      --json               print events as JSON\n"
         "      --socket PATH        aqsd's socket (default: $AQS_SOCKET, else the system one)\n"
         "  -h, --help               this help\n";
}

}  // namespace aqs::cmdline
