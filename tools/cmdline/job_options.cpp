// job_options: fsub's and frun's command lines and script directives, read through the options' declaration
// (submit_options.hpp), and the submit requests they build.
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
#include "cmdline/submit_options.hpp"
#include "core/output_pattern.hpp"
#include "cmdline/text_util.hpp"
#include "cmdline/usage_error.hpp"
#include "protocol/errors.hpp"

namespace aqs::cmdline {

namespace {

using source = option_source;
using parse_context = option_context;

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

// The known long option closest to a misspelt one, if close enough: AQS's
// own, the recorded and the refused ones (not srun's launcher options).
std::optional<std::string> suggestion(std::string_view name) {
  std::optional<std::string> best;
  std::size_t best_d = 0;
  for (const auto& d : submit_options()) {
    if (d.kind == option_kind::slurm || (d.kind == option_kind::recorded && d.scope == option_scope::interactive)) continue;
    for (const auto n : {d.name, d.alias}) {
      if (n.empty()) continue;
      const std::size_t dist = distance(name, n);
      const std::size_t limit = std::max<std::size_t>(1, std::min<std::size_t>(3, n.size() / 4));
      if (dist <= limit && (!best || dist < best_d)) {
        best = std::string(n);
        best_d = dist;
      }
    }
  }
  return best;
}

// An option fsub/frun do not know: an error that suggests the option meant,
// as Slurm does.
[[noreturn]] void unknown_option(const parse_context& pc, std::string_view name, bool is_short) {
  const auto close = is_short ? std::nullopt : suggestion(name.substr(2));
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
    const submit_option* d = nullptr;
    const std::string_view wv(w);
    if (is_long) {
      const auto eq = wv.find('=');
      name = wv.substr(0, eq);
      if (eq != std::string_view::npos) inline_value = wv.substr(eq + 1);
      d = find_option(name.substr(2), pc.scope());
    } else {
      name = wv.substr(0, 2);
      d = find_short_option(w[1], pc.scope());
      if (w.size() > 2) inline_value = wv.substr(2);
    }
    if (d == nullptr) unknown_option(pc, name, is_short);
    if (d->kind == option_kind::acted && d->arg == option_arg::none && inline_value) {
      // A flag of AQS's given a value may be Slurm's option of that name
      // (srun's --mpi=pmix, a plugin name, not frun's --mpi flag).
      for (const auto& other : submit_options()) {
        if (&other != d && other.name == d->name && other.kind != option_kind::acted &&
            in_scope(other.scope, pc.scope())) {
          d = &other;
        }
      }
    }
    if (!in_scope(d->scope, pc.scope())) {
      if (d->other_scope.empty()) unknown_option(pc, name, is_short);
      pc.fail("option '" + std::string(name) + "' " + std::string(d->other_scope));
    }
    if (d->kind == option_kind::refused) pc.fail(std::string(d->why) + " (" + std::string(name) + ")");
    if (d->command_line_only && pc.directive()) {
      pc.fail("option '" + std::string(name) + "' is only allowed on the command line");
    }
    // The value: attached, or the next word when the option needs one. A
    // recorded option keeps whatever is attached; AQS's own flags take
    // none, and an optional value is attached to the long form only.
    std::string_view value;
    if (d->arg == option_arg::required) {
      if (inline_value) {
        value = *inline_value;
      } else {
        if (i + 1 >= words.size()) pc.fail("option '" + std::string(name) + "' needs a value");
        value = words[++i];
      }
    } else if (inline_value) {
      if (d->kind == option_kind::acted && (d->arg == option_arg::none || !is_long)) {
        pc.fail("option '" + std::string(name) + "' takes no value");
      }
      value = *inline_value;
    }
    if (d->set != nullptr) {
      d->set(pc, o, *d, value, name);
    } else {
      record_option(pc, o, d->name, value);
    }
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
  // They describe how an adaptive job changes size: a rigid job has nothing
  // to use them for (ignoring them never runs it smaller or earlier).
  const bool malleable = (o.pref || o.speedup || o.resize_cost_s) && s.adaptive;
  if ((o.pref || o.speedup || o.resize_cost_s) && !s.adaptive && warnings != nullptr) {
    warnings->push_back("--pref, --speedup and --resize-cost describe an adaptive job (--adaptive); ignored");
  }
  if (!shaped && !o.partition && o.recorded.empty() && !o.procs && !o.array && !o.dependency && !o.begin_time &&
      !malleable) {
    return std::nullopt;
  }
  protocol::job_geometry g;
  g.dependency = o.dependency;
  g.begin_time = o.begin_time;
  g.partition = o.partition;
  g.recorded = o.recorded;
  g.array = o.array;
  if (o.array && (s.adaptive || by_range)) {
    throw usage_error("job arrays are of rigid jobs (-n N); an adaptive job is one job that changes size");
  }
  if (s.adaptive || by_range) {
    // Per-rank geometry: -c gives each rank that many processors on one
    // node, and --min/--max (or -n) count ranks, as -n does in Slurm. The
    // node options are bounds the scheduler keeps as the job changes size
    // (core/adaptive_placement.hpp): -N MIN[-MAX] nodes, at most
    // --ntasks-per-node ranks a node, --mem and GPUs on every node it uses,
    // --exclusive whole nodes.
    if (!s.adaptive && shaped) {
      throw usage_error("-N, --ntasks-per-node, -c, --exclusive, --mem, --mem-per-cpu and GPUs size a rigid job with "
                        "-n N, not --min/--max");
    }
    if (o.mem_per_cpu_mb) {
      throw usage_error("--mem-per-cpu is not supported for an adaptive job (its memory on a node would change with "
                        "every resize); give --mem, the memory on each node it uses");
    }
    const std::int64_t ranks_min = s.min_pe;
    const bool whole = o.exclusive.value_or(false) || (o.mem_mb && *o.mem_mb == 0);
    if (whole && (o.ntasks_per_node || o.cpus_per_task.value_or(1) > 1)) {
      throw usage_error("--exclusive gives an adaptive job whole nodes, a rank on each of their processors; it takes "
                        "neither --ntasks-per-node nor -c");
    }
    if (o.nodes_min) {
      if (*o.nodes_min > ranks_min) {
        throw usage_error("-N " + std::to_string(*o.nodes_min) + " needs a rank on each node: --min must be at least " +
                          std::to_string(*o.nodes_min) + " (it is " + std::to_string(ranks_min) + ")");
      }
      g.nodes_min = o.nodes_min;
      g.nodes_max = o.nodes_max;
    }
    if (o.ntasks_per_node) {
      if (g.nodes_max && *o.ntasks_per_node * *g.nodes_max < ranks_min) {
        throw usage_error("--min " + std::to_string(ranks_min) + " ranks at most " + std::to_string(*o.ntasks_per_node) +
                          " per node need more than the " + std::to_string(*g.nodes_max) + " nodes -N allows");
      }
      g.ntasks_per_node = o.ntasks_per_node;
    }
    g.exclusive = whole;
    if (o.mem_mb && *o.mem_mb > 0) g.mem_per_node_mb = o.mem_mb;
    if (o.gpus_per_node && o.gpus_total) throw usage_error("give --gpus or GPUs per node (--gres=gpu:N, --gpus-per-node), not both");
    if (o.gpus_per_node && *o.gpus_per_node > 0) g.gpus_per_node = o.gpus_per_node;
    if (o.gpus_total && *o.gpus_total > 0) {
      // As for a rigid job: the total over its minimum of nodes, per node.
      const std::int64_t nodes = o.nodes_min.value_or(1);
      g.gpus_per_node = (*o.gpus_total + nodes - 1) / nodes;
    }
    const std::int64_t c = o.cpus_per_task.value_or(1);
    if (s.max_pe > protocol::k_max_pe / c) {
      throw usage_error("--max times -c is more than " + std::to_string(protocol::k_max_pe) + " processors");
    }
    if (o.pref && (*o.pref < s.min_pe || *o.pref > s.max_pe)) {
      throw usage_error("--pref " + std::to_string(*o.pref) + " must be between --min " + std::to_string(s.min_pe) +
                        " and --max " + std::to_string(s.max_pe));
    }
    g.ntasks = s.min_pe;
    g.cpus_per_task = c;
    if (o.pref) g.pref_pe = *o.pref * c;
    g.speedup = o.speedup;
    g.resize_cost_s = o.resize_cost_s;
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
  // Groups replace each other as a whole: the size, the dependency, the
  // node range, the memory.
  auto group = [&](bool given, auto... members) {
    if (given) ((base.*members = over.*members), ...);
  };
  group(over.procs || over.min_pe || over.max_pe, &job_options::procs, &job_options::min_pe, &job_options::max_pe);
  group(over.afterok.has_value(), &job_options::afterok, &job_options::dependency);
  group(over.nodes_min.has_value(), &job_options::nodes_min, &job_options::nodes_max);
  group(over.mem_mb || over.mem_per_cpu_mb, &job_options::mem_mb, &job_options::mem_per_cpu_mb);
  // Every other field: the over side's when it has one.
  auto take = [](auto& into, const auto& from, auto... members) {
    ((from.*members ? void(into.*members = from.*members) : void()), ...);
  };
  take(base, over, &job_options::adaptive, &job_options::time_limit_s, &job_options::job_name, &job_options::output,
       &job_options::error, &job_options::chdir, &job_options::requeue, &job_options::wrap, &job_options::parsable,
       &job_options::socket, &job_options::mpi, &job_options::ntasks_per_node, &job_options::cpus_per_task,
       &job_options::exclusive, &job_options::gpus_per_node, &job_options::gpus_total, &job_options::partition,
       &job_options::array, &job_options::exported, &job_options::begin_time, &job_options::pref,
       &job_options::speedup, &job_options::resize_cost_s);
  take(base.faucets, over.faucets, &faucets_options::cluster, &faucets_options::url, &faucets_options::ca_file,
       &faucets_options::token_file, &faucets_options::broker);
  if (!over.faucets.stage_in.empty()) base.faucets.stage_in = over.faucets.stage_in;
  base.recorded.insert(base.recorded.end(), over.recorded.begin(), over.recorded.end());
  base.json = base.json || over.json;
  base.help = base.help || over.help;
  base.test_only = base.test_only || over.test_only;
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

void read_sbatch_environment(fsub_command_line& cmd, std::span<const std::string> environment) {
  std::set<std::string> warned, memory_kinds;
  for (const auto& d : submit_options()) {
    if (d.env.empty()) continue;
    const std::string key = std::string(d.env) + "=";
    for (const auto& e : environment) {
      if (!e.starts_with(key) || e.size() == key.size()) continue;  // an empty variable is no option
      const parse_context pc{source::sbatch_environment, "$" + std::string(d.env) + ": ", &cmd.warnings, &warned,
                             &memory_kinds};
      const std::string word = "--" + std::string(d.name) + (d.arg == option_arg::none ? "" : "=" + e.substr(key.size()));
      (void)parse_words(pc, std::span<const std::string>(&word, 1), cmd.environment_options);
    }
  }
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
  merge(opts, cmd.environment_options);
  merge(opts, cmd.options);
  out.warnings.insert(out.warnings.end(), cmd.warnings.begin(), cmd.warnings.end());
  const std::string default_name = cmd.options.wrap ? std::string("wrap") : base_name(*cmd.script_path);
  out.request.job = common_spec(opts, default_name, ctx, &out.warnings);
  out.request.job.script = std::move(script);
  out.request.job.argv = cmd.script_args;
  for (const auto& a : out.request.job.argv) check_text(a, "a script argument");
  out.parsable = opts.parsable.value_or(false);
  out.json = opts.json;
  out.request.test_only = opts.test_only;
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

std::string fsub_usage() {
  return "Usage: fsub [options] script [args...]\n"
         "       fsub [options] --wrap \"command\"\n"
         "Submit a batch job; prints \"Submitted job N\". Options may also be given as #AQS or\n"
         "#SBATCH lines at the top of the script; the command line wins.\n" +
         options_help(option_scope::batch) +
         "Through a Faucets server the first line is still \"Submitted job N\", N the server's\n"
         "job id; the cluster and its job id follow on stderr once a cluster is chosen.\n"
         "Slurm options AQS does not act on (--mail-*, --hint, ...) are\n"
         "accepted with a warning; options it cannot honour (--begin, --nodelist, ...) are errors.\n";
}

std::string frun_usage() {
  return "Usage: frun [options] command [args...]\n"
         "Run an interactive job: waits for processors, streams its output, Ctrl-C cancels it,\n"
         "and exits with the job's exit code. Like srun, an MPI program (an executable that\n"
         "links libmpi.so) runs as one rank per processor, started with mpirun from PATH;\n"
         "other commands run once. Adaptive jobs run the command as given.\n" +
         options_help(option_scope::interactive);
}

}  // namespace aqs::cmdline
