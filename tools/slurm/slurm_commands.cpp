// slurm_commands: a getopt_long-alike over tables of Slurm's options (names
// and whether they take a value, from Slurm's squeue/scancel/sinfo/sacct/
// sbatch/srun option tables).
#include "slurm/slurm_commands.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <csignal>
#include <cstring>

#include "cmdline/commands.hpp"
#include "cmdline/option_scan.hpp"
#include "cmdline/submit_options.hpp"
#include "slurm/slurm_format.hpp"
#include "cmdline/usage_error.hpp"

namespace aqs::slurm {

namespace {

enum class arg { none, required, optional };

struct opt {
  char short_name;  // 0: none
  std::string_view long_name;
  arg has_arg;
  std::string_view key;  // what the command sees
};

using scanned = cmdline::scanned_words;  // options by key

std::string shown(std::string_view s) {
  std::string out(s.substr(0, 80));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return out;
}

scanned scan(std::span<const std::string> args, std::span<const opt> table, std::string_view cmd) {
  const std::string try_help = "\nTry \"" + std::string(cmd) + " --help\" for more information";
  // "--name[=value]": a name may be cut short to a prefix of one option's.
  auto long_option = [&](scanned& out, std::size_t& i) {
    const std::string& w = args[i];
    const std::string_view body = std::string_view(w).substr(2);
    const std::size_t eq = body.find('=');
    const std::string_view name = body.substr(0, eq);
    const opt* found = nullptr;
    int matches = 0;
    for (const auto& o : table) {
      if (o.long_name.empty()) continue;
      if (o.long_name == name) {
        found = &o;
        matches = 1;
        break;
      }
      if (o.long_name.starts_with(name)) {
        if (found == nullptr || found->key != o.key) ++matches;
        found = &o;
      }
    }
    if (found == nullptr) throw usage_error("unrecognized option '--" + shown(name) + "'" + try_help);
    if (matches > 1) throw usage_error("option '--" + shown(name) + "' is ambiguous" + try_help);
    std::string value;
    if (found->has_arg == arg::none) {
      if (eq != std::string_view::npos) {
        throw usage_error("option '--" + std::string(found->long_name) + "' doesn't allow an argument" + try_help);
      }
    } else if (eq != std::string_view::npos) {
      value = std::string(body.substr(eq + 1));
    } else if (found->has_arg == arg::required) {
      if (i + 1 >= args.size()) {
        throw usage_error("option '--" + std::string(found->long_name) + "' requires an argument" + try_help);
      }
      value = args[++i];
    }
    out.options.emplace_back(std::string(found->key), value);
  };
  // "-abc": flags bundled, the first that takes a value takes the rest of
  // the word (or the next word).
  auto short_options = [&](scanned& out, std::size_t& i) {
    const std::string& w = args[i];
    for (std::size_t k = 1; k < w.size(); ++k) {
      const char c = w[k];
      const opt* found = nullptr;
      for (const auto& o : table) {
        if (o.short_name == c) found = &o;
      }
      if (found == nullptr) throw usage_error(std::string("invalid option -- '") + c + "'" + try_help);
      if (found->has_arg == arg::none) {
        out.options.emplace_back(std::string(found->key), "");
        continue;
      }
      std::string value = w.substr(k + 1);
      if (value.empty() && found->has_arg == arg::required) {
        if (i + 1 >= args.size()) throw usage_error(std::string("option requires an argument -- '") + c + "'" + try_help);
        value = args[++i];
      }
      out.options.emplace_back(std::string(found->key), value);
      break;
    }
  };
  return cmdline::scan_words(args, long_option, short_options);
}

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t comma = s.find(',', pos);
    if (comma == std::string_view::npos) comma = s.size();
    if (comma > pos) out.emplace_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

// "123", "123.batch", "123.0", "123+0": the job's id (steps and components
// are the job here).
std::int64_t job_id_of(std::string_view text, std::string_view cmd) {
  std::string_view digits = text;
  const std::size_t cut = digits.find_first_of(".+_");
  if (cut != std::string_view::npos) digits = digits.substr(0, cut);
  std::int64_t v = 0;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || r.ec != std::errc() || r.ptr != digits.data() + digits.size() || v < 1 || digits.size() > 15) {
    if (cmd == "scancel") throw command_error("Invalid job id " + shown(text));
    throw command_error("Invalid job id: " + shown(text));
  }
  return v;
}

std::vector<core::job_state> states_of(std::string_view list, std::string_view what) {
  std::vector<core::job_state> out;
  for (const auto& w : split_list(list)) {
    const auto s = parse_state_word(w);
    if (!s) throw command_error("Invalid " + std::string(what) + " state specified: " + shown(w));
    for (const auto st : *s) {
      if (std::find(out.begin(), out.end(), st) == out.end()) out.push_back(st);
    }
  }
  return out;
}

std::string me() {
  // The name of the calling user is looked up by the commands (getpwuid);
  // here "--me" is kept as a marker.
  return "\x01me";
}

// The keys the query commands (squeue, scancel, sinfo, sacct) read alike
// into their command lines: --help, --usage, -V, and --json, -u and --me
// for those that have them. Whether `key` was one of them.
template <class Line>
bool read_common_key(Line& out, const std::string& key, const std::string& value) {
  if (key == "help") {
    out.help = true;
    return true;
  }
  if (key == "usage") {
    out.usage = true;
    return true;
  }
  if (key == "version") {
    out.version = true;
    return true;
  }
  if constexpr (requires { out.json; }) {
    if (key == "json") {
      out.json = true;
      return true;
    }
  }
  if constexpr (requires { out.users; }) {
    if (key == "me") {
      out.users.push_back(me());
      return true;
    }
    if (key == "user") {
      for (auto& u : split_list(value)) out.users.push_back(u);
      return true;
    }
  }
  return false;
}

}  // namespace

std::string command_name(const char* argv0, std::string_view fallback) {
  if (argv0 == nullptr || *argv0 == '\0') return std::string(fallback);
  std::string_view s(argv0);
  const std::size_t slash = s.rfind('/');
  if (slash != std::string_view::npos) s = s.substr(slash + 1);
  if (s.starts_with("aqs-")) s.remove_prefix(4);
  return s.empty() ? std::string(fallback) : std::string(s);
}

// ---------------------------------------------------------------- squeue

squeue_command_line parse_squeue_command_line(std::span<const std::string> args) {
  static constexpr opt table[] = {
      {'A', "account", arg::required, "account"},     {'a', "all", arg::none, "all"},
      {'r', "array", arg::none, "array"},             {0, "array-unique", arg::none, "ignore"},
      {0, "federation", arg::none, "ignore"},         {'h', "noheader", arg::none, "noheader"},
      {0, "help", arg::none, "help"},                 {0, "hide", arg::none, "ignore"},
      {'i', "iterate", arg::required, "iterate"},     {'j', "jobs", arg::required, "jobs"},
      {0, "local", arg::none, "ignore"},              {'l', "long", arg::none, "long"},
      {'L', "licenses", arg::required, "ignore"},     {'M', "clusters", arg::required, "ignore"},
      {0, "me", arg::none, "me"},                     {'n', "name", arg::required, "name"},
      {0, "noconvert", arg::none, "ignore"},          {'o', "format", arg::required, "format"},
      {'O', "Format", arg::required, "Format"},       {'p', "partition", arg::required, "partition"},
      {'P', "priority", arg::none, "ignore"},         {'q', "qos", arg::required, "ignore"},
      {'R', "reservation", arg::required, "ignore"},  {0, "sibling", arg::none, "ignore"},
      {'S', "sort", arg::required, "ignore"},         {'t', "states", arg::required, "states"},
      {'u', "user", arg::required, "user"},           {0, "usage", arg::none, "usage"},
      {'v', "verbose", arg::none, "ignore"},          {'V', "version", arg::none, "version"},
      {'w', "nodelist", arg::required, "ignore"},     {0, "json", arg::none, "json"},
      {0, "yaml", arg::none, "yaml"},                 {'s', "steps", arg::optional, "steps"},
      // Slurm 24.11's lighter query (Nextflow's onlyJobState): AQS answers
      // every squeue from one call, so there is nothing lighter to switch to.
      {0, "only-job-state", arg::none, "ignore"},
  };
  const scanned s = scan(args, table, "squeue");
  squeue_command_line out;
  for (const auto& [key, value] : s.options) {
    if (read_common_key(out, key, value)) continue;
    if (key == "noheader") out.noheader = true;
    if (key == "format") out.format = value;
    if (key == "Format") out.long_format = value;
    if (key == "long") out.long_list = true;
    if (key == "jobs") {
      for (const auto& j : split_list(value)) out.job_ids.push_back(job_id_of(j, "squeue"));
    }
    if (key == "name") {
      for (auto& n : split_list(value)) out.names.push_back(n);
    }
    if (key == "partition") {
      for (auto& p : split_list(value)) out.partitions.push_back(p);
    }
    if (key == "states") out.states = states_of(value, "job");
    if (key == "iterate") throw command_error("--iterate is not supported by AQS's squeue (run it in a loop)");
    if (key == "yaml") throw command_error("--yaml is not supported by AQS's squeue (use --json)");
    if (key == "steps") throw command_error("--steps: AQS jobs have no steps to list");
  }
  for (const auto& p : s.positionals) out.job_ids.push_back(job_id_of(p, "squeue"));
  if (out.format && out.long_format) throw command_error("-o (--format) is incompatible with -O (--Format)");
  if (out.long_list && out.format) {
    throw command_error("Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.");
  }
  return out;
}

// ---------------------------------------------------------------- scancel

scancel_command_line parse_scancel_command_line(std::span<const std::string> args) {
  static constexpr opt table[] = {
      {'A', "account", arg::required, "ignore"},    {'b', "batch", arg::none, "ignore"},
      {0, "ctld", arg::none, "ignore"},             {'f', "full", arg::none, "ignore"},
      {0, "help", arg::none, "help"},               {'H', "hurry", arg::none, "ignore"},
      {'i', "interactive", arg::none, "interactive"}, {'M', "clusters", arg::required, "ignore"},
      {0, "me", arg::none, "me"},                   {'n', "name", arg::required, "name"},
      {0, "jobname", arg::required, "name"},        {'p', "partition", arg::required, "partition"},
      {'Q', "quiet", arg::none, "quiet"},           {'q', "qos", arg::required, "ignore"},
      {'R', "reservation", arg::required, "ignore"}, {0, "sibling", arg::required, "ignore"},
      {'s', "signal", arg::required, "signal"},     {'t', "state", arg::required, "state"},
      {'u', "user", arg::required, "user"},         {0, "usage", arg::none, "usage"},
      {'v', "verbose", arg::none, "verbose"},       {'V', "version", arg::none, "version"},
      {'w', "nodelist", arg::required, "ignore"},   {0, "wckey", arg::required, "ignore"},
  };
  const scanned s = scan(args, table, "scancel");
  scancel_command_line out;
  for (const auto& [key, value] : s.options) {
    if (read_common_key(out, key, value)) continue;
    if (key == "quiet") out.quiet = true;
    if (key == "verbose") out.verbose = true;
    if (key == "interactive") out.interactive = true;
    if (key == "name") out.name = value;
    if (key == "partition") {
      for (auto& p : split_list(value)) out.partitions.push_back(p);
    }
    if (key == "state") out.states = states_of(value, "job");
    if (key == "signal") {
      try {
        out.signal = cmdline::parse_signal(value);
      } catch (const cmdline::usage_error&) {
        throw command_error("Invalid job signal: " + shown(value));
      }
    }
  }
  for (const auto& p : s.positionals) {
    // ARRAY_TASK names one task of an array, as in Slurm; any other suffix
    // (".batch", "_[1-3]") still means the whole job.
    const std::size_t us = p.find('_');
    if (us != std::string::npos && us + 1 < p.size() && p.size() - us - 1 <= 7 &&
        std::all_of(p.begin() + static_cast<std::ptrdiff_t>(us) + 1, p.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      out.array_tasks.emplace_back(job_id_of(p, "scancel"), std::stoll(p.substr(us + 1)));
      continue;
    }
    out.job_ids.push_back(job_id_of(p, "scancel"));
  }
  if (out.interactive) throw command_error("--interactive is not supported by AQS's scancel");
  return out;
}

bool has_filter(const scancel_command_line& c) {
  return !c.users.empty() || c.name.has_value() || c.states.has_value() || !c.partitions.empty();
}

// ---------------------------------------------------------------- sinfo

sinfo_command_line parse_sinfo_command_line(std::span<const std::string> args) {
  static constexpr opt table[] = {
      {'a', "all", arg::none, "ignore"},            {'d', "dead", arg::none, "ignore"},
      {'e', "exact", arg::none, "ignore"},          {0, "federation", arg::none, "ignore"},
      {'h', "noheader", arg::none, "noheader"},     {0, "help", arg::none, "help"},
      {0, "hide", arg::none, "ignore"},             {'i', "iterate", arg::required, "iterate"},
      {0, "local", arg::none, "ignore"},            {'l', "long", arg::none, "long"},
      {'M', "clusters", arg::required, "ignore"},   {'n', "nodes", arg::required, "ignore"},
      {0, "noconvert", arg::none, "ignore"},        {'N', "Node", arg::none, "node"},
      {'o', "format", arg::required, "format"},     {'O', "Format", arg::required, "Format"},
      {'p', "partition", arg::required, "partition"},  {'r', "responding", arg::none, "ignore"},
      {'R', "list-reasons", arg::none, "ignore"},   {'s', "summarize", arg::none, "summarize"},
      {'S', "sort", arg::required, "ignore"},       {'t', "states", arg::required, "ignore"},
      {'T', "reservation", arg::none, "reservation"},    {0, "usage", arg::none, "usage"},
      {'v', "verbose", arg::none, "ignore"},        {'V', "version", arg::none, "version"},
      {0, "json", arg::none, "json"},               {0, "yaml", arg::none, "yaml"},
  };
  const scanned s = scan(args, table, "sinfo");
  sinfo_command_line out;
  for (const auto& [key, value] : s.options) {
    if (read_common_key(out, key, value)) continue;
    if (key == "noheader") out.noheader = true;
    if (key == "long") out.long_list = true;
    if (key == "node") out.node_oriented = true;
    if (key == "summarize") out.summarize = true;
    if (key == "reservation") out.reservations = true;
    if (key == "format") out.format = value;
    if (key == "Format") out.long_format = value;
    if (key == "partition") {
      // -p a,b (repeated: the last one counts, as Slurm's).
      out.partitions.clear();
      std::string_view rest = value;
      while (!rest.empty()) {
        const auto comma = rest.find(',');
        if (comma != 0) out.partitions.emplace_back(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      }
    }
    if (key == "iterate") throw command_error("--iterate is not supported by AQS's sinfo (run it in a loop)");
    if (key == "yaml") throw command_error("--yaml is not supported by AQS's sinfo (use --json)");
  }
  if (!s.positionals.empty()) throw usage_error("Unknown argument " + shown(s.positionals.front()));
  return out;
}

// ---------------------------------------------------------------- sacct

sacct_command_line parse_sacct_command_line(std::span<const std::string> args) {
  static constexpr opt table[] = {
      {'a', "allusers", arg::none, "allusers"},     {'A', "accounts", arg::required, "ignore"},
      {'b', "brief", arg::none, "brief"},           {'c', "completion", arg::none, "ignore"},
      {'D', "duplicates", arg::none, "ignore"},     {0, "delimiter", arg::required, "delimiter"},
      {'e', "helpformat", arg::none, "helpformat"}, {'E', "endtime", arg::required, "end"},
      {'g', "gid", arg::required, "ignore"},        {'g', "group", arg::required, "ignore"},
      {0, "help", arg::none, "help"},               {'j', "jobs", arg::required, "jobs"},
      {'l', "long", arg::none, "long"},             {'L', "allclusters", arg::none, "ignore"},
      {'M', "clusters", arg::required, "ignore"},   {'n', "noheader", arg::none, "noheader"},
      {0, "name", arg::required, "name"},           {'N', "nodelist", arg::required, "ignore"},
      {0, "noconvert", arg::none, "ignore"},        {'o', "format", arg::required, "format"},
      {'p', "parsable", arg::none, "parsable"},     {'P', "parsable2", arg::none, "parsable2"},
      {'q', "qos", arg::required, "ignore"},        {'r', "partition", arg::required, "ignore"},
      {'s', "state", arg::required, "state"},       {'S', "starttime", arg::required, "start"},
      {'T', "truncate", arg::none, "ignore"},       {'u', "uid", arg::required, "user"},
      {'u', "user", arg::required, "user"},         {0, "usage", arg::none, "usage"},
      {'v', "verbose", arg::none, "ignore"},        {'V', "version", arg::none, "version"},
      {'X', "allocations", arg::none, "allocations"}, {0, "json", arg::none, "json"},
      {0, "yaml", arg::none, "yaml"},               {0, "units", arg::required, "ignore"},
  };
  const scanned s = scan(args, table, "sacct");
  sacct_command_line out;
  for (const auto& [key, value] : s.options) {
    if (read_common_key(out, key, value)) continue;
    if (key == "allusers") out.all_users = true;
    if (key == "brief") out.brief = true;
    if (key == "delimiter") out.delimiter = value;
    if (key == "end") out.end = value;
    if (key == "start") out.start = value;
    if (key == "noheader") out.noheader = true;
    if (key == "parsable") out.parsable = true;
    if (key == "parsable2") out.parsable2 = true;
    if (key == "allocations") out.allocations = true;
    if (key == "format") out.format = out.format ? *out.format + "," + value : value;
    if (key == "long") {
      out.format = "JobID,JobIDRaw,JobName,Partition,NCPUS,NNodes,State,ExitCode,Elapsed,Start,End,Submit,NodeList";
    }
    if (key == "jobs") {
      for (const auto& j : split_list(value)) out.job_ids.push_back(job_id_of(j, "sacct"));
    }
    if (key == "name") {
      for (auto& n : split_list(value)) out.names.push_back(n);
    }
    if (key == "state") out.states = states_of(value, "job");
    if (key == "helpformat") out.help = true;
    if (key == "yaml") throw command_error("--yaml is not supported by AQS's sacct (use --json)");
  }
  if (!s.positionals.empty()) throw command_error("Unknown arguments: " + shown(s.positionals.front()));
  return out;
}

std::optional<std::time_t> parse_sacct_time(std::string_view text, std::time_t now) {
  std::string t(text);
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t.empty()) return std::nullopt;
  std::tm today{};
  ::localtime_r(&now, &today);
  auto at = [&](int day_offset, int h, int m, int s) {
    std::tm tm = today;
    tm.tm_mday += day_offset;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = s;
    tm.tm_isdst = -1;
    return std::mktime(&tm);
  };
  if (t == "today" || t == "midnight") return at(0, 0, 0, 0);
  if (t == "noon") return at(0, 12, 0, 0);
  if (t == "tomorrow") return at(1, 0, 0, 0);
  if (t == "teatime") return at(0, 16, 0, 0);
  if (t.starts_with("now")) {
    if (t.size() == 3) return now;
    const char sign = t[3];
    if (sign != '+' && sign != '-') return std::nullopt;
    std::size_t i = 4;
    std::int64_t n = 0;
    if (i >= t.size() || std::isdigit(static_cast<unsigned char>(t[i])) == 0) return std::nullopt;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])) != 0 && n < 100000000) n = n * 10 + (t[i++] - '0');
    const std::string unit = t.substr(i);
    std::int64_t mult = 1;
    if (unit.empty() || unit == "s" || unit == "sec" || unit == "secs" || unit == "second" || unit == "seconds") {
      mult = 1;
    } else if (unit == "m" || unit == "min" || unit == "mins" || unit == "minute" || unit == "minutes") {
      mult = 60;
    } else if (unit == "h" || unit == "hour" || unit == "hours") {
      mult = 3600;
    } else if (unit == "d" || unit == "day" || unit == "days") {
      mult = 86400;
    } else if (unit == "w" || unit == "week" || unit == "weeks") {
      mult = 7 * 86400;
    } else {
      return std::nullopt;
    }
    return sign == '+' ? now + n * mult : now - n * mult;
  }
  if (std::all_of(t.begin(), t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }) &&
      t.size() >= 9) {
    return static_cast<std::time_t>(std::stoll(t));
  }
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char extra = 0;
  std::tm tm = today;
  tm.tm_isdst = -1;
  if (std::sscanf(t.c_str(), "%4d-%2d-%2dt%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &s, &extra) >= 3 && extra == 0) {
    const int n = std::sscanf(t.c_str(), "%4d-%2d-%2dt%2d:%2d:%2d", &y, &mo, &d, &h, &mi, &s);
    if (n < 3 || n == 4) return std::nullopt;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = n >= 5 ? h : 0;
    tm.tm_min = n >= 5 ? mi : 0;
    tm.tm_sec = n >= 6 ? s : 0;
    return std::mktime(&tm);
  }
  if (t.find('/') != std::string::npos) {
    const int n = std::sscanf(t.c_str(), "%2d/%2d/%4d", &mo, &d, &y);
    if (n < 2) return std::nullopt;
    if (n == 3) tm.tm_year = (y < 100 ? y + 2000 : y) - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    return std::mktime(&tm);
  }
  if (t.find(':') != std::string::npos) {
    const int n = std::sscanf(t.c_str(), "%2d:%2d:%2d", &h, &mi, &s);
    if (n < 2) return std::nullopt;
    return at(0, h, mi, n == 3 ? s : 0);
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- sbatch / srun

// Slurm's sbatch/srun options are the submission options' declaration
// (cmdline/submit_options.hpp): whether each takes a value, and whether it
// may be dropped with a warning when fsub/frun do not take it as given
// (`lenient`). Options not declared go to fsub/frun's parser as they are.

translated_args translate_submit_args(std::span<const std::string> args, bool srun,
                                      const std::function<bool(const std::string&, const std::optional<std::string>&)>& known) {
  translated_args out;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "--") break;
    if (w.size() < 2 || w[0] != '-') break;  // the script or the command
    std::string spelled;                     // "--export" or "-A"
    std::optional<std::string> value;
    std::vector<std::string> words{w};
    const cmdline::submit_option* o = nullptr;
    if (w.starts_with("--")) {
      const std::size_t eq = w.find('=');
      spelled = w.substr(0, eq);
      o = cmdline::find_slurm_option(std::string_view(spelled).substr(2), srun);
      if (eq != std::string::npos) {
        value = w.substr(eq + 1);
      } else if (o != nullptr && o->arg == cmdline::option_arg::required && i + 1 < args.size()) {
        value = args[i + 1];
        words.push_back(args[++i]);
      }
    } else {
      spelled = w.substr(0, 2);
      o = cmdline::find_slurm_short_option(w[1], srun);
      if (w.size() > 2) {
        value = w.substr(2);
      } else if (o != nullptr && o->arg == cmdline::option_arg::required && i + 1 < args.size()) {
        value = args[i + 1];
        words.push_back(args[++i]);
      }
    }
    const bool drop = o != nullptr && o->lenient && !known(spelled, value);
    if (!drop) {
      out.args.insert(out.args.end(), words.begin(), words.end());
      continue;
    }
    std::string what = spelled;
    if (value) what += "=" + *value;
    out.warnings.push_back(what + " is not supported by AQS; ignored");
  }
  out.command_at = out.args.size();
  out.args.insert(out.args.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return out;
}

bool take_flag(std::vector<std::string>& args, std::initializer_list<std::string_view> spellings) {
  bool found = false;
  for (std::size_t i = 0; i < args.size();) {
    const std::string& w = args[i];
    if (w == "--" || w.size() < 2 || w[0] != '-') break;
    if (std::find(spellings.begin(), spellings.end(), w) != spellings.end()) {
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
      found = true;
      continue;
    }
    // An option's value is never the script: skip it when it is a word of its own.
    const bool long_with_value = w.starts_with("--") && w.find('=') == std::string::npos;
    const cmdline::submit_option* o = long_with_value ? cmdline::find_slurm_option(w.substr(2), false)
                                      : w.size() == 2 ? cmdline::find_slurm_short_option(w[1], false)
                                                      : nullptr;
    const bool takes = o != nullptr && o->arg == cmdline::option_arg::required;
    i += takes ? 2 : 1;
  }
  return found;
}

// ---------------------------------------------------------------- usage

std::string squeue_usage() {
  return "Usage: squeue [OPTIONS]   (AQS's Slurm-compatible squeue)\n"
         "  -h, --noheader          no header line\n"
         "  -o, --format=FORMAT     fields as %[.][width]letter: %i %A %j %u %U %t %T %M %l %L %D %C %R %r\n"
         "                          %N %P %S %V %e %a %F %K %B %q ... (see squeue(1))\n"
         "  -O, --Format=FIELDS     long names: JobID:.18,Name:20,State,...\n"
         "  -l, --long              long listing\n"
         "  -u, --user=USERS        only these users' jobs (names or uids)\n"
         "      --me                only your jobs\n"
         "  -j, --jobs=IDS          only these jobs\n"
         "  -n, --name=NAMES        only jobs with these names\n"
         "  -t, --states=STATES     PD,R,CD,CA,F,TO,NF,... or all (default: pending and running)\n"
         "      --json              the jobs as JSON (Slurm's squeue --json layout)\n"
         "      --help, --usage, -V/--version\n"
         "aqsd's socket: $AQS_SOCKET, else /var/lib/aqs/aqsd.sock.\n";
}

std::string scancel_usage() {
  return "Usage: scancel [OPTIONS] [JOB_ID...]   (AQS's Slurm-compatible scancel)\n"
         "  -s, --signal=SIG        send SIG instead of cancelling\n"
         "  -u, --user=USER         that user's jobs\n"
         "      --me                your jobs\n"
         "  -n, --name=NAME         jobs with this name\n"
         "  -t, --state=STATES      jobs in these states (PD, R, ...)\n"
         "  -Q, --quiet             no error messages\n"
         "  -v, --verbose           say what is done\n"
         "      --help, --usage, -V/--version\n";
}

std::string sinfo_usage() {
  return "Usage: sinfo [OPTIONS]   (AQS's Slurm-compatible sinfo)\n"
         "  -h, --noheader          no header line\n"
         "  -N, --Node              one line per node\n"
         "  -l, --long              long listing\n"
         "  -o, --format=FORMAT     %P %R %a %l %D %t %T %N %c %C %m %G %F %A\n"
         "  -O, --Format=FIELDS     long names (Partition,Nodes,StateLong,...)\n"
         "      --json              as JSON\n"
         "      --help, --usage, -V/--version\n";
}

std::string sacct_usage() {
  return "Usage: sacct [OPTIONS]   (AQS's Slurm-compatible sacct, the subset workflow tools use)\n"
         "  -j, --jobs=IDS          these jobs\n"
         "  -X, --allocations       jobs only (AQS jobs have no steps: always the case)\n"
         "  -n, --noheader          no header\n"
         "  -p, --parsable          fields separated by '|', with a trailing '|'\n"
         "  -P, --parsable2         fields separated by '|'\n"
         "      --delimiter=TEXT    the separator for -p/-P\n"
         "  -o, --format=FIELDS     JobID,JobIDRaw,JobName,State,ExitCode,Elapsed,ElapsedRaw,Start,End,\n"
         "                          Submit,NCPUS,AllocCPUS,NNodes,NodeList,User,UID,Partition,Account,\n"
         "                          Timelimit,ReqCPUS,Reason,... (NAME%WIDTH)\n"
         "  -b, --brief             JobID,State,ExitCode\n"
         "  -u, --user=USERS        these users' jobs; -a, --allusers: everyone's\n"
         "  -S, --starttime=TIME    jobs that ran or were eligible after TIME (default: midnight)\n"
         "  -E, --endtime=TIME      ... before TIME (default: now)\n"
         "      --name=NAMES        jobs with these names\n"
         "  -s, --state=STATES      jobs in these states\n"
         "      --json              as JSON\n"
         "      --help, --usage, -V/--version\n";
}

std::string sbatch_usage() {
  return "Usage: sbatch [OPTIONS] SCRIPT [ARGS...]   (AQS's Slurm-compatible sbatch)\n"
         "       sbatch [OPTIONS] --wrap=COMMAND\n"
         "Takes everything fsub takes (see fsub --help), #SBATCH directives in the script,\n"
         "the script on standard input when none is named, and prints \"Submitted batch job ID\"\n"
         "(--parsable: the id alone). -W, --wait: then wait for the job to end and exit with\n"
         "its exit code. Slurm options AQS does not act on are accepted with a warning.\n";
}

std::string srun_usage() {
  return "Usage: srun [OPTIONS] COMMAND [ARGS...]   (AQS's Slurm-compatible srun)\n"
         "Runs N tasks of COMMAND, as Slurm's srun: outside a job in an interactive job of its own\n"
         "(the allocation options are frun's and fsub's: -n, -N, -c, --ntasks-per-node, -t, -J, ...),\n"
         "inside a job as a step of the job's tasks (all of them, or the first N with -n N).\n"
         "Tasks start through mpirun, so an MPI program is one MPI job of N ranks; each task has\n"
         "SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURM_NTASKS and SLURM_STEP_ID.\n"
         "  -n, --ntasks=N          N tasks\n"
         "  -l, --label             prefix each output line with its task number (\"0: \")\n"
         "      --multi-prog        COMMAND is a file: per line TASKS PROGRAM ARGS (%t task, %o offset)\n"
         "Its exit status is the tasks'. Slurm options AQS does not act on are accepted with a warning.\n";
}

}  // namespace aqs::slurm
