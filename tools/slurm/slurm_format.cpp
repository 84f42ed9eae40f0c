// slurm_format: Slurm's layouts. The facts (widths, headers, justification,
// truncation, default formats) follow Slurm's squeue/print.c, sacct and
// common/print_fields.c, sinfo/opts.c; the code is AQS's own.
#include "slurm/slurm_format.hpp"

#include "core/partition.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <span>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "client/format.hpp"
#include "cmdline/text_util.hpp"

namespace aqs::slurm {

namespace {

std::string upper(std::string_view s) { return cmdline::ascii_upper(s); }

bool iequals(std::string_view a, std::string_view b) { return upper(a) == upper(b); }

std::string lower(std::string_view s) { return cmdline::ascii_lower(s); }

constexpr std::int64_t k_year_secs = 365LL * 24 * 3600;

// Slurm's _print_str: right-justified values are padded on the left (cut to
// the width only when `cut`); left-justified ones are always cut to the
// width, then padded.
std::string field_text(const std::string& value, int width, bool right, bool cut) {
  if (width <= 0) return value;
  const auto w = static_cast<std::size_t>(width);
  std::string out;
  if (right) {
    out = value.size() < w ? std::string(w - value.size(), ' ') + value : value;
    if (cut && out.size() > w) out.resize(w);
  } else {
    out = value.substr(0, w);
    out.append(w - out.size(), ' ');
  }
  return out;
}

std::string two(std::int64_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02lld", static_cast<long long>(v));
  return buf;
}

// ---- the one -o/-O grammar of squeue and sinfo, over a table of fields

// A field as a format names it: its -o letter, its -O long name, its header.
struct field_code {
  char code;
  std::string_view long_name;
  std::string_view header;
  bool cut = true;  // cut a right-justified value to the width (node lists never are)
};

// What differs between squeue's and sinfo's formats.
struct format_grammar {
  std::span<const field_code> codes;
  std::string_view noun;          // "job": "Invalid job format specification: X"
  bool hash_width = false;        // sinfo's "%#P": as wide as the values need
  bool keep_unknown_long = false;  // squeue keeps an unknown -O name's column, blank
};

const field_code* find_code(const format_grammar& g, char c) {
  for (const auto& f : g.codes) {
    if (f.code == c) return &f;
  }
  return nullptr;
}

// -o: "%[.][#][width]letter" fields, text between them kept; unknown letters
// are printed literally and reported.
field_format parse_short(std::string_view format, const format_grammar& g) {
  field_format out;
  const std::size_t first = format.find('%');
  out.prefix = std::string(format.substr(0, first == std::string_view::npos ? format.size() : first));
  if (first == std::string_view::npos) return out;
  std::size_t pos = first;
  while (pos < format.size()) {
    // format[pos] == '%'
    std::size_t i = pos + 1;
    format_field f;
    if (i < format.size() && format[i] == '.') {
      f.right = true;
      ++i;
    }
    if (g.hash_width && i < format.size() && format[i] == '#') ++i;
    while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i])) != 0) {
      f.width = f.width * 10 + (format[i] - '0');
      ++i;
    }
    if (i >= format.size()) break;
    const char c = format[i++];
    std::size_t next = format.find('%', i);
    if (next == std::string_view::npos) next = format.size();
    f.suffix = std::string(format.substr(i, next - i));
    if (find_code(g, c) == nullptr) {
      out.errors.push_back("Invalid " + std::string(g.noun) + " format specification: " + std::string(1, c));
      f.suffix = "%" + std::string(format.substr(pos + 1, next - pos - 1));
    } else {
      f.code = c;
    }
    out.fields.push_back(std::move(f));
    pos = next;
  }
  return out;
}

// -O: "Name[:[.]width[suffix]]" fields separated by commas, long names in
// any case, 20 columns left-justified when no width is given.
field_format parse_long(std::string_view format, const format_grammar& g) {
  field_format out;
  std::size_t pos = 0;
  while (pos < format.size()) {
    std::size_t comma = format.find(',', pos);
    if (comma == std::string_view::npos) comma = format.size();
    const std::string_view token = format.substr(pos, comma - pos);
    pos = comma + 1;
    if (token.empty()) continue;
    format_field f;
    std::string_view name = token;
    const std::size_t colon = token.find(':');
    if (colon != std::string_view::npos) {
      name = token.substr(0, colon);
      std::size_t i = colon + 1;
      if (i < token.size() && token[i] == '.') {
        f.right = true;
        ++i;
      }
      while (i < token.size() && std::isdigit(static_cast<unsigned char>(token[i])) != 0) {
        f.width = f.width * 10 + (token[i] - '0');
        ++i;
      }
      f.suffix = std::string(token.substr(i));
    } else {
      f.width = 20;
    }
    const field_code* found = nullptr;
    for (const auto& c : g.codes) {
      if (iequals(c.long_name, name)) found = &c;
    }
    if (found == nullptr) {
      out.errors.push_back("Invalid " + std::string(g.noun) + " format specification: " + std::string(name));
      if (!g.keep_unknown_long) continue;
      f.suffix = std::string(static_cast<std::size_t>(std::max(f.width, 0)), ' ') + f.suffix;
    } else {
      f.code = found->code;
    }
    out.fields.push_back(std::move(f));
  }
  return out;
}

// One line of a format: each field's value (`value(code)`, or its header
// when `row` is false) at its width (`width(field)`), then its suffix.
template <class Value, class Width>
std::string format_line(const field_format& f, const format_grammar& g, bool row, Value&& value, Width&& width) {
  std::string l = f.prefix;
  for (const auto& field : f.fields) {
    if (field.code != 0) {
      const field_code* c = find_code(g, field.code);
      const std::string v = row ? value(field.code) : std::string(c->header);
      l += field_text(v, width(field), field.right, c->cut);
    }
    l += field.suffix;
  }
  return l + "\n";
}

}  // namespace

state_names slurm_state(core::job_state s) {
  const std::string name(core::to_string(s));
  static const std::map<std::string, std::string, std::less<>> compact = {
      {"PENDING", "PD"},      {"RUNNING", "R"},     {"SUSPENDED", "S"},  {"COMPLETED", "CD"},
      {"CANCELLED", "CA"},    {"FAILED", "F"},      {"TIMEOUT", "TO"},   {"NODE_FAIL", "NF"},
      {"PREEMPTED", "PR"},    {"BOOT_FAIL", "BF"},  {"DEADLINE", "DL"},  {"OUT_OF_MEMORY", "OOM"},
      {"COMPLETING", "CG"},   {"CONFIGURING", "CF"}, {"REQUEUED", "RQ"}, {"RESIZING", "RS"},
  };
  if (name == "RESIZING") return {"RUNNING", "R"};
  const auto it = compact.find(name);
  return {name, it != compact.end() ? it->second : name};
}

std::optional<std::vector<core::job_state>> parse_state_word(std::string_view word) {
  const std::string w = upper(word);
  if (w == "ALL") return std::vector<core::job_state>(core::k_all_job_states.begin(), core::k_all_job_states.end());
  std::vector<core::job_state> out;
  for (const core::job_state s : core::k_all_job_states) {
    const state_names n = slurm_state(s);
    if (n.name == w || n.compact == w || core::to_string(s) == w) out.push_back(s);
  }
  if (!out.empty()) return out;
  static constexpr std::array<std::string_view, 22> known = {
      "PD", "PENDING", "R", "RUNNING", "S", "SUSPENDED", "CD", "COMPLETED", "CA", "CANCELLED", "F", "FAILED",
      "TO", "TIMEOUT", "NF", "NODE_FAIL", "PR", "PREEMPTED", "BF", "BOOT_FAIL", "DL", "DEADLINE"};
  static constexpr std::array<std::string_view, 16> more = {
      "OOM", "OUT_OF_MEMORY", "CG", "COMPLETING", "CF", "CONFIGURING", "RD", "RESV_DEL_HOLD", "RF", "REQUEUE_FED",
      "RH", "REQUEUE_HOLD", "RQ", "REQUEUED", "RS", "RESIZING"};
  for (const auto k : known) {
    if (k == w) return out;
  }
  for (const auto k : more) {
    if (k == w) return out;
  }
  for (const auto k : {"SE", "SPECIAL_EXIT", "SI", "SIGNALING", "SO", "STAGE_OUT", "ST", "STOPPED", "EXPEDITING"}) {
    if (k == w) return out;
  }
  return std::nullopt;
}

std::string squeue_secs(std::int64_t t) {
  if (t < 0 || t > k_year_secs) return "INVALID";
  const std::int64_t s = t % 60, m = (t / 60) % 60, h = (t / 3600) % 24, d = t / 86400;
  if (d != 0) return std::to_string(d) + "-" + two(h) + ":" + two(m) + ":" + two(s);
  if (h != 0) return std::to_string(h) + ":" + two(m) + ":" + two(s);
  return std::to_string(m) + ":" + two(s);
}

std::string sacct_secs(std::int64_t t) {
  if (t < 0) t = 0;
  const std::int64_t s = t % 60, m = (t / 60) % 60, h = (t / 3600) % 24, d = t / 86400;
  if (d != 0) return std::to_string(d) + "-" + two(h) + ":" + two(m) + ":" + two(s);
  return two(h) + ":" + two(m) + ":" + two(s);
}

std::string squeue_limit(std::optional<std::int64_t> secs) {
  if (!secs || *secs <= 0) return "UNLIMITED";
  return squeue_secs(*secs);
}

std::string sacct_limit(std::optional<std::int64_t> secs) {
  if (!secs || *secs <= 0) return "UNLIMITED";
  return sacct_secs(*secs);
}

std::string slurm_time(std::optional<std::time_t> t, const char* time_format) {
  if (!t || *t == 0) return "Unknown";
  std::tm tm{};
  ::localtime_r(&*t, &tm);
  const char* fmt = "%FT%T";
  if (time_format != nullptr && *time_format != '\0' && std::string_view(time_format) != "standard" &&
      std::string_view(time_format).find('%') != std::string_view::npos) {
    fmt = time_format;
  }
  char buf[128];
  if (std::strftime(buf, sizeof buf, fmt, &tm) == 0) return "Unknown";
  return buf;
}

std::vector<std::string> job_hosts(const std::string& nodes) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < nodes.size()) {
    const std::size_t colon = nodes.find(':', pos);
    if (colon == std::string::npos) break;
    out.push_back(nodes.substr(pos, colon - pos));
    // Ranges after the colon are separated by ',' too: the next host starts
    // after a ',' followed by a non-digit.
    std::size_t next = colon + 1;
    while (next < nodes.size()) {
      if (nodes[next] == ',' && next + 1 < nodes.size() && std::isdigit(static_cast<unsigned char>(nodes[next + 1])) == 0) {
        break;
      }
      ++next;
    }
    pos = next + 1;
  }
  return out;
}

std::int64_t procs_on_host(const std::string& nodes, const std::string& host) {
  std::int64_t total = 0;
  std::size_t pos = 0;
  while (pos < nodes.size()) {
    const std::size_t colon = nodes.find(':', pos);
    if (colon == std::string::npos) break;
    const std::string name = nodes.substr(pos, colon - pos);
    std::size_t next = colon + 1;
    while (next < nodes.size()) {
      if (nodes[next] == ',' && next + 1 < nodes.size() && std::isdigit(static_cast<unsigned char>(nodes[next + 1])) == 0) {
        break;
      }
      ++next;
    }
    if (name == host) {
      const std::string ranges = nodes.substr(colon + 1, next - colon - 1);
      std::size_t p = 0;
      while (p < ranges.size()) {
        std::size_t comma = ranges.find(',', p);
        if (comma == std::string::npos) comma = ranges.size();
        const std::string r = ranges.substr(p, comma - p);
        const std::size_t dash = r.find('-');
        try {
          if (dash == std::string::npos) {
            if (!r.empty()) total += 1;
          } else {
            total += std::stoll(r.substr(dash + 1)) - std::stoll(r.substr(0, dash)) + 1;
          }
        } catch (const std::exception&) {
        }
        p = comma + 1;
      }
    }
    pos = next + 1;
  }
  return total;
}

job_view make_view(const protocol::job_info& j, const uid_lookup& uid_of) {
  job_view v;
  v.info = j;
  auto t = [](const std::optional<std::string>& s) -> std::optional<std::time_t> {
    if (!s) return std::nullopt;
    const auto d = client::parse_iso_time(*s);
    if (!d) return std::nullopt;
    return static_cast<std::time_t>(*d);
  };
  v.submit = t(j.submit_time);
  v.start = t(j.start_time);
  v.end = t(j.end_time);
  v.hosts = job_hosts(j.nodes);
  if (uid_of) v.uid = uid_of(j.user);
  return v;
}

std::int64_t elapsed(const job_view& j, std::time_t now) {
  if (!j.start) return 0;
  const std::time_t until = j.end.value_or(now);
  return std::max<std::int64_t>(0, until - *j.start);
}

std::int64_t cpus_of(const job_view& j) { return j.info.nprocs > 0 ? j.info.nprocs : j.info.min_pe; }

std::int64_t node_count(const job_view& j) {
  return j.hosts.empty() ? 1 : static_cast<std::int64_t>(j.hosts.size());
}

std::string job_reason(const job_view& j) {
  if (j.info.state == core::job_state::pending && j.info.reason) return *j.info.reason;
  switch (j.info.state) {
    case core::job_state::out_of_memory: return "OutOfMemory";
    case core::job_state::failed: return "NonZeroExitCode";
    case core::job_state::timeout: return "TimeLimit";
    case core::job_state::node_fail: return "NodeDown";
    default: return "None";
  }
}

// ---------------------------------------------------------------- squeue

namespace {

constexpr std::array<field_code, 40> k_squeue_codes = {{
    {'a', "Account", "ACCOUNT", true},
    {'A', "JobId", "JOBID", true},
    {'B', "BatchHost", "EXEC_HOST", true},
    {'c', "MinCPUs", "MIN_CPUS", true},
    {'C', "NumCPUs", "CPUS", true},
    {'D', "NumNodes", "NODES", true},
    {'e', "EndTime", "END_TIME", true},
    {'E', "Dependency", "DEPENDENCY", true},
    {'F', "ArrayJobId", "ARRAY_JOB_ID", true},
    {'g', "GroupName", "GROUP", true},
    {'G', "GroupId", "GROUP", true},
    {'h', "OverSubscribe", "OVER_SUBSCRIBE", true},
    {'i', "JobArrayId", "JOBID", true},
    {'j', "Name", "NAME", true},
    {'k', "Comment", "COMMENT", true},
    {'K', "ArrayTaskId", "ARRAY_TASK_ID", true},
    {'l', "TimeLimit", "TIME_LIMIT", true},
    {'L', "TimeLeft", "TIME_LEFT", true},
    {'m', "MinMemory", "MIN_MEMORY", true},
    {'M', "TimeUsed", "TIME", true},
    {'N', "NodeList", "NODELIST", false},
    {'o', "Command", "COMMAND", true},
    {'p', "Priority", "PRIORITY", true},
    {'P', "Partition", "PARTITION", true},
    {'q', "QOS", "QOS", true},
    {'Q', "PriorityLong", "PRIORITY", true},
    {'r', "Reason", "REASON", true},
    {'R', "ReasonList", "NODELIST(REASON)", false},
    {'S', "StartTime", "START_TIME", true},
    {'t', "StateCompact", "ST", true},
    {'T', "State", "STATE", true},
    {'u', "UserName", "USER", true},
    {'U', "UserId", "UID", true},
    {'V', "SubmitTime", "SUBMIT_TIME", true},
    {'y', "Nice", "NICE", true},
    {'Z', "WorkDir", "WORK_DIR", true},
    {'z', "SCT", "S:C:T", true},
    {'v', "Reservation", "RESERVATION", true},
    {'w', "WCKey", "WCKEY", true},
    {'W', "Licenses", "LICENSES", true},
}};

constexpr format_grammar k_squeue_grammar{k_squeue_codes, "job", false, true};

bool reason_instead_of_nodes(const job_view& j) {
  const std::string st = slurm_state(j.info.state).name;
  return st == "PENDING" || st == "TIMEOUT" || st == "FAILED" || st == "OUT_OF_MEMORY" || st == "DEADLINE";
}

std::string squeue_value(char code, const job_view& j, std::time_t now, const char* tf) {
  const auto& i = j.info;
  switch (code) {
    case 'a': return "(null)";
    case 'A':
    case 'F': return std::to_string(i.array_job_id.value_or(i.id));
    case 'K': return i.array_task_id ? std::to_string(*i.array_task_id) : "N/A";
    case 'i':
      // An array's task as squeue shows it: ARRAY_TASK.
      if (i.array_job_id && i.array_task_id) return std::to_string(*i.array_job_id) + "_" + std::to_string(*i.array_task_id);
      return std::to_string(i.id);
    case 'B': return j.hosts.empty() ? "n/a" : j.hosts.front();
    case 'c': return "1";
    case 'C': return std::to_string(cpus_of(j));
    case 'D': return std::to_string(node_count(j));
    case 'e': {
      if (j.end) return slurm_time(j.end, tf);
      if (j.start && i.walltime_s && *i.walltime_s > 0) return slurm_time(*j.start + *i.walltime_s, tf);
      if (j.start) return "NONE";
      return "N/A";
    }
    case 'E': return "(null)";
    case 'g':
    case 'G': return "(null)";
    case 'h': return "OK";
    case 'j': return i.name;
    case 'k': return "(null)";
    case 'l': return squeue_limit(i.walltime_s);
    case 'L': {
      if (!i.walltime_s || *i.walltime_s <= 0) return "UNLIMITED";
      return squeue_secs(*i.walltime_s - elapsed(j, now));
    }
    case 'm': return "0";
    case 'M': return squeue_secs(elapsed(j, now));
    case 'N': return compress_hostlist(j.hosts);
    case 'o': return "(null)";
    case 'p': return "0.00000000000000";
    case 'P': return i.partition.value_or(std::string(k_default_partition));
    case 'q': return "normal";
    case 'Q': return "0";
    case 'r': return job_reason(j);
    case 'R': return reason_instead_of_nodes(j) ? "(" + job_reason(j) + ")" : compress_hostlist(j.hosts);
    case 'S': return j.start ? slurm_time(j.start, tf) : "N/A";
    case 't': return slurm_state(i.state).compact;
    case 'T': return slurm_state(i.state).name;
    case 'u': return i.user;
    case 'U': return j.uid ? std::to_string(*j.uid) : "4294967294";
    case 'V': return j.submit ? slurm_time(j.submit, tf) : "N/A";
    case 'y': return "0";
    case 'Z': return "(null)";
    case 'z': return "*:*:*";
    case 'v': return "(null)";
    case 'w': return "(null)";
    case 'W': return "(null)";
    default: return "";
  }
}

}  // namespace

squeue_format parse_squeue_format(std::string_view format) { return parse_short(format, k_squeue_grammar); }

squeue_format parse_squeue_long_format(std::string_view format) { return parse_long(format, k_squeue_grammar); }

squeue_format default_squeue_format() {
  return parse_squeue_long_format(
      "jobarrayid:.18 ,partition:.9 ,name:.8 ,username:.8 ,statecompact:.2 ,timeused:.10 ,numnodes:.6 ,reasonlist:0");
}

std::string render_squeue(const squeue_format& f, const std::vector<job_view>& jobs, bool header, std::time_t now,
                          const char* time_format) {
  std::string out;
  auto line = [&](const job_view* j) {
    // Times computed by _print_secs are not cut (they are never wider).
    out += format_line(
        f, k_squeue_grammar, j != nullptr, [&](char code) { return squeue_value(code, *j, now, time_format); },
        [](const format_field& field) { return field.width; });
  };
  if (header) line(nullptr);
  for (const auto& j : jobs) line(&j);
  return out;
}

// ---------------------------------------------------------------- sacct

namespace {

struct sacct_column {
  std::string_view name;
  int width;
};

// Slurm's order matters: a prefix picks the first match ("jobid" -> JobID).
constexpr std::array<sacct_column, 37> k_sacct_columns = {{
    {"Account", 10},   {"AllocCPUS", 10}, {"AllocNodes", 10}, {"AllocTRES", 10}, {"Cluster", 10},
    {"Comment", 14},   {"CPUTime", 10},   {"CPUTimeRAW", 10}, {"DerivedExitCode", 15}, {"Elapsed", 10},
    {"ElapsedRaw", 10}, {"Eligible", 19}, {"End", 19},        {"ExitCode", 8},     {"GID", 6},
    {"Group", 9},      {"JobID", -12},    {"JobIDRaw", -12},  {"JobName", 10},     {"MaxRSS", 10},
    {"NCPUS", 10},     {"NNodes", 8},     {"NodeList", 15},   {"NTasks", 8},       {"Partition", 10},
    {"QOS", 10},       {"Reason", 22},    {"ReqCPUS", 8},     {"Start", 19},       {"State", 10},
    {"Submit", 19},    {"SystemCPU", 10}, {"Timelimit", 10},  {"TotalCPU", 10},    {"UID", 6},
    {"User", 9},       {"UserCPU", 10},
}};

constexpr std::array<sacct_column, 2> k_sacct_more = {{{"WorkDir", 20}, {"ReqMem", 10}}};

enum class value_kind { text, number, date };

struct sacct_value {
  std::string text;
  value_kind kind = value_kind::text;
  bool null = false;
};

sacct_value sacct_field_value(const std::string& name, const job_view& j, std::time_t now, const char* tf) {
  const auto& i = j.info;
  auto num = [](std::int64_t v) { return sacct_value{std::to_string(v), value_kind::number, false}; };
  auto text = [](std::string v) { return sacct_value{std::move(v), value_kind::text, false}; };
  auto date = [&](std::optional<std::time_t> t) { return sacct_value{slurm_time(t, tf), value_kind::date, false}; };
  auto null_text = [] { return sacct_value{"", value_kind::text, true}; };
  const bool ran = j.start.has_value();
  // Usage (issue 32): the account charged, the processor-time held (an
  // adaptive job's map integral once it has ended), what was measured
  // (empty when nothing was, or for another user's job).
  if (name == "Account") return i.account ? text(*i.account) : null_text();
  if (name == "AllocCPUS" || name == "NCPUS") return num(ran || i.nprocs > 0 ? cpus_of(j) : 0);
  if (name == "AllocNodes") return text(std::to_string(ran ? node_count(j) : 0));
  if (name == "AllocTRES") return ran ? text(alloc_tres(j)) : null_text();
  if (name == "Cluster") return text("aqs");
  if (name == "Comment") return null_text();
  if (name == "CPUTime") return text(sacct_secs(std::llround(alloc_cpu_seconds(j, now))));
  if (name == "CPUTimeRAW") return num(std::llround(alloc_cpu_seconds(j, now)));
  if (name == "TotalCPU") return total_cpu_us(j) ? text(sacct_cpu_time(*total_cpu_us(j))) : null_text();
  if (name == "UserCPU") return i.user_cpu_us ? text(sacct_cpu_time(*i.user_cpu_us)) : null_text();
  if (name == "SystemCPU") return i.system_cpu_us ? text(sacct_cpu_time(*i.system_cpu_us)) : null_text();
  if (name == "MaxRSS") return i.max_rss_kb ? text(sacct_memory(*i.max_rss_kb)) : null_text();
  if (name == "DerivedExitCode") return text("0:0");
  if (name == "Elapsed") return text(sacct_secs(elapsed(j, now)));
  if (name == "ElapsedRaw") return num(elapsed(j, now));
  if (name == "Eligible") return date(j.submit);
  if (name == "End") return j.end ? date(j.end) : text("Unknown");
  if (name == "ExitCode") return text(sacct_exit_code(j));
  if (name == "GID") return null_text();
  if (name == "Group") return null_text();
  // An array's task as Slurm's sacct shows it, ARRAY_TASK (submitit reads
  // its map tasks' states so); JobIDRaw stays the task's own id.
  if (name == "JobID" && i.array_job_id && i.array_task_id) {
    return text(std::to_string(*i.array_job_id) + "_" + std::to_string(*i.array_task_id));
  }
  if (name == "JobID" || name == "JobIDRaw") return text(std::to_string(i.id));
  if (name == "JobName") return text(i.name);
  if (name == "NNodes") return num(node_count(j));
  if (name == "NodeList") return text(j.hosts.empty() ? "None assigned" : compress_hostlist(j.hosts));
  if (name == "NTasks") return null_text();
  if (name == "Partition") return text(i.partition.value_or(std::string(k_default_partition)));
  if (name == "QOS") return text("normal");
  if (name == "Reason") return text(job_reason(j));
  if (name == "ReqCPUS") return num(i.min_pe);
  if (name == "ReqMem") return text(requested_mem_mb(j) ? slurm_exact_units(static_cast<double>(*requested_mem_mb(j)), 2) : "0");
  if (name == "Start") return j.start ? date(j.start) : text("Unknown");
  if (name == "State") return text(sacct_state(j));
  if (name == "Submit") return date(j.submit);
  if (name == "Timelimit") return text(sacct_limit(i.walltime_s));
  if (name == "UID") return j.uid ? num(*j.uid) : null_text();
  if (name == "User") return text(i.user);
  if (name == "WorkDir") return null_text();
  return null_text();
}

}  // namespace

std::vector<sacct_field> parse_sacct_fields(std::string_view list) {
  std::vector<sacct_field> out;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view token = list.substr(pos, comma - pos);
    pos = comma + 1;
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front())) != 0) token.remove_prefix(1);
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())) != 0) token.remove_suffix(1);
    if (!token.empty()) {
      std::optional<int> width;
      const std::size_t pct = token.find('%');
      if (pct != std::string_view::npos) {
        width = std::atoi(std::string(token.substr(pct + 1)).c_str());
        token = token.substr(0, pct);
      }
      const sacct_column* found = nullptr;
      for (const auto& c : k_sacct_columns) {
        if (token.size() <= c.name.size() && iequals(c.name.substr(0, token.size()), token)) {
          found = &c;
          break;
        }
      }
      if (found == nullptr) {
        for (const auto& c : k_sacct_more) {
          if (token.size() <= c.name.size() && iequals(c.name.substr(0, token.size()), token)) {
            found = &c;
            break;
          }
        }
      }
      if (found == nullptr || token.empty()) {
        throw std::invalid_argument("Invalid field requested: \"" + std::string(token) + "\"");
      }
      int w = found->width;
      if (width) w = found->width < 0 ? -*width : *width;
      out.push_back({std::string(found->name), w});
    }
    if (comma >= list.size()) break;
  }
  return out;
}

std::vector<sacct_field> default_sacct_fields() {
  return parse_sacct_fields("jobid,jobname,partition,account,alloccpus,state,exitcode");
}

std::string sacct_state(const job_view& j) {
  std::string s = slurm_state(j.info.state).name;
  if (s == "CANCELLED" && j.cancelled_by) s += " by " + std::to_string(*j.cancelled_by);
  return s;
}

std::string sacct_exit_code(const job_view& j) {
  // A job killed by a signal has no exit code of its own (the shell's
  // 128 + N is not one): Slurm prints "0:N".
  std::int64_t code = j.info.exit_code.value_or(0);
  if (j.signal && code == 128 + *j.signal) code = 0;
  return std::to_string(code) + ":" + std::to_string(j.signal.value_or(0));
}

std::string render_sacct(const std::vector<sacct_field>& fields, const std::vector<job_view>& jobs, bool header,
                         sacct_style style, std::time_t now, const std::string& delimiter, const char* time_format) {
  std::string out;
  auto cell = [&](std::string value, int len, value_kind kind, bool null, bool last) {
    if (style == sacct_style::parsable2) return value + (last ? "" : delimiter);
    if (style == sacct_style::parsable) return value + delimiter;
    const auto abs_len = static_cast<std::size_t>(std::abs(len));
    const bool right = len >= 0;
    if (null) value = " ";
    if (kind == value_kind::text && !null && value.size() > abs_len && abs_len > 0) {
      value.resize(abs_len);
      value.back() = '+';
    } else if (kind == value_kind::date && value.size() > abs_len) {
      value.resize(abs_len);
    }
    std::string padded = value.size() >= abs_len ? value
                         : right              ? std::string(abs_len - value.size(), ' ') + value
                                              : value + std::string(abs_len - value.size(), ' ');
    return padded + " ";
  };
  if (header) {
    for (std::size_t k = 0; k < fields.size(); ++k) {
      std::string name = fields[k].name;
      if (style == sacct_style::table) name = name.substr(0, static_cast<std::size_t>(std::abs(fields[k].width)));
      out += cell(name, fields[k].width, value_kind::date /* cut, no '+' */, false, k + 1 == fields.size());
    }
    out += "\n";
    if (style == sacct_style::table) {
      for (const auto& f : fields) out += std::string(static_cast<std::size_t>(std::abs(f.width)), '-') + " ";
      out += "\n";
    }
  }
  for (const auto& j : jobs) {
    for (std::size_t k = 0; k < fields.size(); ++k) {
      const sacct_value v = sacct_field_value(fields[k].name, j, now, time_format);
      out += cell(v.text, fields[k].width, v.kind, v.null, k + 1 == fields.size());
    }
    out += "\n";
  }
  return out;
}

// ---------------------------------------------------------------- sinfo

void keep_partitions(std::vector<node_view>& nodes, const std::vector<std::string>& names) {
  std::erase_if(nodes, [&](const node_view& v) {
    return std::find(names.begin(), names.end(), v.partition.name) == names.end();
  });
}

std::string sinfo_state(const node_view& n) {
  switch (n.info.state) {
    case protocol::node_state::down: return "down";
    case protocol::node_state::drain: return n.allocated > 0 ? "drng" : "drain";
    case protocol::node_state::up: break;
  }
  if (n.allocated <= 0) return "idle";
  if (n.allocated >= n.info.nprocs) return "alloc";
  return "mix";
}

std::string sinfo_state_long(const node_view& n) {
  const std::string s = sinfo_state(n);
  if (s == "alloc") return "allocated";
  if (s == "mix") return "mixed";
  if (s == "drain") return "drained";
  if (s == "drng") return "draining";
  return s;
}

namespace {

constexpr std::array<field_code, 16> k_sinfo_codes = {{
    {'P', "Partition", "PARTITION"},
    {'R', "PartitionName", "PARTITION"},
    {'a', "Available", "AVAIL"},
    {'l', "Time", "TIMELIMIT"},
    {'D', "Nodes", "NODES"},
    {'t', "StateCompact", "STATE"},
    {'T', "StateLong", "STATE"},
    {'N', "NodeList", "NODELIST", false},
    {'n', "NodeHost", "HOSTNAMES", false},
    {'c', "CPUs", "CPUS"},
    {'C', "CPUsState", "CPUS(A/I/O/T)"},
    {'m', "Memory", "MEMORY"},
    {'G', "Gres", "GRES"},
    {'F', "NodeAIOT", "NODES(A/I/O/T)"},
    {'A', "NodeAI", "NODES(A/I)"},
    {'s', "Size", "JOB_SIZE"},
}};

constexpr format_grammar k_sinfo_grammar{k_sinfo_codes, "node", true, false};

struct sinfo_group {
  std::vector<const node_view*> nodes;
};

std::string sinfo_value(char code, const sinfo_group& g) {
  std::vector<std::string> names;
  std::int64_t cpus_min = -1, cpus_max = 0, alloc = 0, idle = 0, other = 0, total = 0, mem = -1, gpus = 0;
  std::int64_t nodes_alloc = 0, nodes_idle = 0, nodes_other = 0;
  for (const node_view* n : g.nodes) {
    names.push_back(n->info.name);
    cpus_min = cpus_min < 0 ? n->info.nprocs : std::min(cpus_min, n->info.nprocs);
    cpus_max = std::max(cpus_max, n->info.nprocs);
    total += n->info.nprocs;
    mem = mem < 0 ? n->info.memory_mb : std::min(mem, n->info.memory_mb);
    gpus = std::max(gpus, n->info.gpus);
    if (n->info.state != protocol::node_state::up) {
      other += n->info.nprocs;
      ++nodes_other;
    } else {
      alloc += n->allocated;
      idle += n->info.nprocs - n->allocated;
      if (n->allocated > 0) {
        ++nodes_alloc;
      } else {
        ++nodes_idle;
      }
    }
  }
  const node_view& first = *g.nodes.front();
  const partition_view& part = first.partition;
  switch (code) {
    case 'P': return part.name + (part.is_default ? "*" : "");
    case 'R': return part.name;
    case 'a': return part.state == "INACTIVE" ? "inact" : lower(part.state);
    case 'l': return core::format_partition_time(part.max_time_s);
    case 'D': return std::to_string(g.nodes.size());
    case 't': return sinfo_state(first);
    case 'T': return sinfo_state_long(first);
    case 'N':
    case 'n': return compress_hostlist(names);
    case 'c': return cpus_min == cpus_max ? std::to_string(cpus_max) : std::to_string(cpus_min) + "+";
    case 'C':
      return std::to_string(alloc) + "/" + std::to_string(idle) + "/" + std::to_string(other) + "/" + std::to_string(total);
    case 'm': return std::to_string(std::max<std::int64_t>(mem, 1));
    case 'G': return gpus > 0 ? "gpu:" + std::to_string(gpus) : "(null)";
    case 'F':
      return std::to_string(nodes_alloc) + "/" + std::to_string(nodes_idle) + "/" + std::to_string(nodes_other) + "/" +
             std::to_string(g.nodes.size());
    case 'A': return std::to_string(nodes_alloc) + "/" + std::to_string(nodes_idle);
    case 's': return part.max_nodes > 0 ? "1-" + std::to_string(part.max_nodes) : "1-infinite";
    default: return "";
  }
}

}  // namespace

sinfo_format parse_sinfo_format(std::string_view format) { return parse_short(format, k_sinfo_grammar); }

sinfo_format parse_sinfo_long_format(std::string_view format) { return parse_long(format, k_sinfo_grammar); }

sinfo_format default_sinfo_format(bool node_oriented) {
  if (node_oriented) return parse_sinfo_long_format("nodelist:0 ,nodes:.6 ,partition:.9 ,statecompact:6");
  return parse_sinfo_long_format("partition:9 ,available:.5 ,time:.10 ,nodes:.6 ,statecompact:.6 ,nodelist:0");
}

std::string render_sinfo(const sinfo_format& f, const std::vector<node_view>& nodes, bool header, sinfo_grouping grouping) {
  std::vector<sinfo_group> groups;
  if (grouping == sinfo_grouping::per_node) {
    for (const auto& n : nodes) groups.push_back({{&n}});
  } else if (grouping == sinfo_grouping::all) {
    std::map<std::string, std::size_t> by_partition;
    for (const auto& n : nodes) {
      const auto [it, fresh] = by_partition.emplace(n.partition.name, groups.size());
      if (fresh) groups.emplace_back();
      groups[it->second].nodes.push_back(&n);
    }
  } else {
    std::map<std::string, std::size_t> by_state;
    for (const auto& n : nodes) {
      const std::string key = n.partition.name + '\n' + sinfo_state(n);
      const auto it = by_state.find(key);
      if (it == by_state.end()) {
        by_state[key] = groups.size();
        groups.push_back({{&n}});
      } else {
        groups[it->second].nodes.push_back(&n);
      }
    }
  }
  std::string out;
  auto line = [&](const sinfo_group* g) {
    out += format_line(
        f, k_sinfo_grammar, g != nullptr, [&](char code) { return sinfo_value(code, *g); },
        [&](const format_field& field) {
          int width = field.width;
          // With -N the node names' column is as wide as the widest name.
          if (field.code == 'N' && width == 0 && grouping == sinfo_grouping::per_node) {
            width = 8;
            for (const auto& n : nodes) width = std::max(width, static_cast<int>(n.info.name.size()));
          }
          // The partition column is as wide as the names need (sinfo's
          // "compute size later" for its default format).
          if ((field.code == 'P' || field.code == 'R') && width > 0) {
            width = static_cast<int>(std::string_view("PARTITION").size());
            for (const auto& n : nodes) width = std::max(width, static_cast<int>(n.partition.name.size()) + 1);
            if (nodes.empty()) width = std::max<int>(width, static_cast<int>(k_default_partition.size()) + 1);
          }
          return width;
        });
  };
  if (header) line(nullptr);
  for (const auto& g : groups) line(&g);
  return out;
}

// ---------------------------------------------------------------- JSON

namespace {

nlohmann::json number(std::int64_t v, bool set = true, bool infinite = false) {
  return {{"set", set || infinite}, {"infinite", infinite}, {"number", v}};
}

nlohmann::json unset_number() { return number(0, false, false); }

// A time limit in minutes, or infinite.
nlohmann::json limit_json(const std::optional<std::int64_t>& walltime_s) {
  if (!walltime_s || *walltime_s <= 0) return number(0, false, true);
  return number((*walltime_s + 59) / 60);
}

nlohmann::json meta(const char* command) {
  return {{"plugin", {{"type", ""}, {"name", ""}, {"data_parser", "data_parser/v0.0.40"}, {"accounting_storage", ""}}},
          {"client", {{"source", command}, {"user", ""}, {"group", ""}}},
          {"command", nlohmann::json::array({command, "--json"})},
          {"slurm", {{"version", {{"major", "22"}, {"micro", "0"}, {"minor", "05"}}}, {"release", "22.05.0"}, {"cluster", "aqs"}}}};
}

nlohmann::json exit_code_json(const job_view& j) {
  const bool done = core::is_final(j.info.state);
  std::string status = "PENDING";
  if (done) status = j.info.exit_code.value_or(0) == 0 ? "SUCCESS" : "ERROR";
  return {{"status", nlohmann::json::array({status})},
          {"return_code", done ? number(j.info.exit_code.value_or(0)) : unset_number()},
          {"signal", {{"id", j.signal ? number(*j.signal) : unset_number()}, {"name", ""}}}};
}

std::optional<std::int64_t> opt_time(std::optional<std::time_t> t) {
  if (!t) return std::nullopt;
  return static_cast<std::int64_t>(*t);
}

}  // namespace

std::string squeue_json(const std::vector<job_view>& jobs, std::time_t now) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& j : jobs) {
    const auto& i = j.info;
    a.push_back({
        {"account", ""},
        {"job_id", i.id},
        {"array_job_id", number(i.array_job_id.value_or(0))},
        {"array_task_id", i.array_task_id ? number(*i.array_task_id) : unset_number()},
        {"batch_flag", true},
        {"batch_host", j.hosts.empty() ? "" : j.hosts.front()},
        {"cpus", number(cpus_of(j))},
        {"end_time", number(opt_time(j.end).value_or(0))},
        {"exit_code", exit_code_json(j)},
        {"job_state", nlohmann::json::array({slurm_state(i.state).name})},
        {"name", i.name},
        {"node_count", number(node_count(j))},
        {"nodes", compress_hostlist(j.hosts)},
        {"partition", i.partition.value_or(std::string(k_default_partition))},
        {"state_reason", job_reason(j)},
        {"start_time", number(opt_time(j.start).value_or(0))},
        {"submit_time", number(opt_time(j.submit).value_or(0))},
        {"time_limit", limit_json(i.walltime_s)},
        {"run_time", number(elapsed(j, now))},
        {"user_id", j.uid.value_or(0)},
        {"user_name", i.user},
        {"minimum_cpus", number(i.min_pe)},
        {"maximum_cpus", number(i.max_pe)},
        {"tasks", number(i.min_pe)},
    });
  }
  nlohmann::json doc = {{"jobs", a}, {"last_backfill", number(0)}, {"last_update", number(static_cast<std::int64_t>(now))},
                        {"meta", meta("squeue")}, {"errors", nlohmann::json::array()},
                        {"warnings", nlohmann::json::array()}};
  return doc.dump(2);
}

std::string sacct_json(const std::vector<job_view>& jobs, std::time_t now) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& j : jobs) {
    const auto& i = j.info;
    a.push_back({
        {"account", i.account.value_or("")},
        {"allocation_nodes", j.start ? node_count(j) : 0},
        {"cluster", "aqs"},
        {"exit_code", exit_code_json(j)},
        {"job_id", i.id},
        {"name", i.name},
        {"nodes", j.hosts.empty() ? "None assigned" : compress_hostlist(j.hosts)},
        {"partition", i.partition.value_or(std::string(k_default_partition))},
        {"required", {{"CPUs", i.min_pe}}},
        {"state", {{"current", nlohmann::json::array({slurm_state(i.state).name})}, {"reason", job_reason(j)}}},
        {"steps", nlohmann::json::array()},
        {"time",
         {{"elapsed", elapsed(j, now)},
          {"eligible", opt_time(j.submit).value_or(0)},
          {"end", opt_time(j.end).value_or(0)},
          {"start", opt_time(j.start).value_or(0)},
          {"submission", opt_time(j.submit).value_or(0)},
          {"suspended", 0},
          {"limit", limit_json(i.walltime_s)}}},
        {"user", i.user},
    });
    // Usage (issue 32), as Slurm 22.05's job object has it: CPU used under
    // time.{user,system,total} (left out when not measured) and the
    // allocated TRES.
    nlohmann::json& t = a.back()["time"];
    auto span = [](std::int64_t us) { return nlohmann::json{{"seconds", us / 1'000'000}, {"microseconds", us % 1'000'000}}; };
    if (i.user_cpu_us) t["user"] = span(*i.user_cpu_us);
    if (i.system_cpu_us) t["system"] = span(*i.system_cpu_us);
    if (const auto total = total_cpu_us(j)) t["total"] = span(*total);
    if (j.start) {
      nlohmann::json alloc = nlohmann::json::array();
      auto tres = [&](const char* type, int id, std::int64_t count) {
        alloc.push_back({{"type", type}, {"name", ""}, {"id", id}, {"count", count}});
      };
      tres("cpu", 1, cpus_of(j));
      if (const auto mem = requested_mem_mb(j)) tres("mem", 2, *mem);
      tres("node", 4, node_count(j));
      tres("billing", 5, cpus_of(j));
      a.back()["tres"] = {{"allocated", alloc}, {"requested", nlohmann::json::array()}};
    }
    if (i.max_rss_kb) a.back()["max_rss_kb"] = *i.max_rss_kb;
  }
  nlohmann::json doc = {{"jobs", a}, {"meta", meta("sacct")}, {"errors", nlohmann::json::array()},
                        {"warnings", nlohmann::json::array()}};
  return doc.dump(2);
}

std::string sinfo_json(const std::vector<node_view>& nodes) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& n : nodes) {
    std::string state = upper(sinfo_state_long(n));
    if (state == "ALLOCATED" || state == "MIXED" || state == "IDLE" || state == "DOWN") {
    } else if (state == "DRAINED") {
      state = "IDLE";
    } else if (state == "DRAINING") {
      state = "ALLOCATED";
    }
    nlohmann::json states = nlohmann::json::array({state});
    if (n.info.state == protocol::node_state::drain) states.push_back("DRAIN");
    a.push_back({
        {"node", {{"state", states}}},
        {"nodes", {{"allocated", n.allocated > 0 ? 1 : 0}, {"idle", n.allocated == 0 ? 1 : 0}, {"other", 0},
                   {"total", 1}, {"nodes", nlohmann::json::array({n.info.name})}}},
        {"cpus", {{"allocated", n.allocated}, {"idle", n.info.nprocs - n.allocated}, {"other", 0},
                  {"total", n.info.nprocs}, {"minimum", n.info.nprocs}, {"maximum", n.info.nprocs}}},
        {"memory", {{"minimum", n.info.memory_mb}, {"maximum", n.info.memory_mb}}},
        {"gres", {{"total", n.info.gpus > 0 ? "gpu:" + std::to_string(n.info.gpus) : ""}}},
        {"partition", {{"name", n.partition.name}, {"alternate", ""}}},
    });
  }
  nlohmann::json doc = {{"sinfo", a}, {"meta", meta("sinfo")}, {"errors", nlohmann::json::array()},
                        {"warnings", nlohmann::json::array()}};
  return doc.dump(2);
}

}  // namespace aqs::slurm
