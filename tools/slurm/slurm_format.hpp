// slurm_format: what the Slurm-compatible commands (aqs-squeue, aqs-sacct,
// aqs-sinfo, ...) print, in Slurm's own words and layouts (Slurm 22.05 and
// later): state names and codes, times, host lists, and the field tables of
// squeue -o/-O, sacct --format and sinfo -o. Pure: the caller passes the jobs,
// the nodes, the clock and a user-id lookup.
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/hostlist.hpp"
#include "core/job_state.hpp"
#include "protocol/replies.hpp"
#include "protocol/results.hpp"

namespace aqs::slurm {

// The partition every job and node is in while AQS has no partitions of its
// own to report (sinfo marks it as the default: "main*").
inline constexpr std::string_view k_default_partition = "main";
// How long squeue shows a finished job (Slurm's MinJobAge default), and how
// long a command waits for aqsd's answer (client::connection's timeout):
// what scontrol show config reports.
inline constexpr std::int64_t k_min_job_age_s = 300;
inline constexpr std::int64_t k_message_timeout_s = 60;

// A job state as Slurm names it: "PENDING"/"PD", "RUNNING"/"R",
// "COMPLETED"/"CD", "CANCELLED"/"CA", "TIMEOUT"/"TO", "NODE_FAIL"/"NF",
// "OUT_OF_MEMORY"/"OOM", ... AQS's RESIZING is a running job whose processors
// change: RUNNING/R (tools that poll squeue know no other word for it).
struct state_names {
  std::string name;     // squeue %T, sacct State
  std::string compact;  // squeue %t
};
state_names slurm_state(core::job_state s);
// The AQS states a Slurm state word selects (squeue -t, sacct -s, scancel -t):
// long or compact names in any case ("pd", "RUNNING", "CG", "ALL"). Words
// with no AQS equivalent (COMPLETING, CONFIGURING, PREEMPTED, BOOT_FAIL,
// DEADLINE, ...) select nothing; nullopt for a word Slurm does not know.
std::optional<std::vector<core::job_state>> parse_state_word(std::string_view word);

// Slurm's durations. squeue TIME: "M:SS", "H:MM:SS", "D-HH:MM:SS"
// ("INVALID" below 0 or beyond a year). sacct Elapsed: "HH:MM:SS",
// "D-HH:MM:SS".
std::string squeue_secs(std::int64_t secs);
std::string sacct_secs(std::int64_t secs);
// Time limits in seconds (nullopt: none). squeue %l: "UNLIMITED" or as
// squeue_secs; sacct Timelimit: "UNLIMITED" or as sacct_secs; sinfo: "infinite".
std::string squeue_limit(std::optional<std::int64_t> secs);
std::string sacct_limit(std::optional<std::int64_t> secs);
// A moment as Slurm prints it: local time "%FT%T" ("2026-05-04T13:02:11"), or
// $SLURM_TIME_FORMAT (a strftime pattern) when `time_format` is given;
// "Unknown" for none.
std::string slurm_time(std::optional<std::time_t> t, const char* time_format = nullptr);

// Host lists: "node1,node2,node3,node7" -> "node[1-3,7]" and Slurm's order
// of host names are the core's (core/hostlist.hpp), shared with aqsd's
// configuration reader.
using core::compress_hostlist;
using core::host_order;
// The host names of a job's compact map "node2:0-3,node3:0-1", in order.
std::vector<std::string> job_hosts(const std::string& nodes);
// How many processors of host `host` the map holds.
std::int64_t procs_on_host(const std::string& nodes, const std::string& host);

// One job with everything the formats read, made once per listing.
struct job_view {
  protocol::job_info info;
  std::optional<std::time_t> submit, start, end;
  std::vector<std::string> hosts;
  std::optional<std::int64_t> uid;  // of info.user; nullopt: unknown
  // Who cancelled it (uid), for sacct's "CANCELLED by UID"; nullopt: unknown.
  std::optional<std::int64_t> cancelled_by;
  // The signal that ended it (from its history), for ExitCode "N:S".
  std::optional<std::int64_t> signal;
  // The integral of the maps it held (processor-seconds), from its history
  // (map_integral), where that was read; CPUTime's fallback when the job
  // has no usage record (a user without accounts).
  std::optional<double> map_seconds;
};
// A lookup from user name to uid (getpwnam in the commands, a table in tests).
using uid_lookup = std::function<std::optional<std::int64_t>(const std::string&)>;
job_view make_view(const protocol::job_info& j, const uid_lookup& uid_of);

// Seconds the job has run: 0 if it never started; up to `now` if it runs.
std::int64_t elapsed(const job_view& j, std::time_t now);
// Processors: held now, else asked for (min).
std::int64_t cpus_of(const job_view& j);
// Nodes: held now, else 1 (what Slurm shows for a pending job asking none).
std::int64_t node_count(const job_view& j);

// ---- squeue and sinfo formats ----

// One field of an -o/-O format (squeue's and sinfo's are one grammar, each
// over its own table of fields): what to print, how wide, which side, and
// the literal text that follows it (Slurm's "suffix").
struct format_field {
  char code = 0;          // the -o letter ('i', 'T', ...); 0 for a literal
  int width = 0;          // 0: as wide as the value
  bool right = false;
  std::string suffix;
};
struct field_format {
  std::string prefix;  // text before the first field
  std::vector<format_field> fields;
  std::vector<std::string> errors;  // "Invalid job format specification: x"
};

// Why a job is where it is, in Slurm's words (squeue %r, sacct Reason,
// scontrol's Reason=): a pending job's reason from aqsd (Dependency,
// JobArrayTaskLimit, Resources, Priority), why an ended one ended
// (OutOfMemory, NonZeroExitCode, TimeLimit, NodeDown), else "None".
std::string job_reason(const job_view& j);

// ---- squeue ----

using squeue_format = field_format;
// -o "%.18i %.9P %.8j" (Slurm's short letters, %[.][width]letter, text between
// fields kept). Unknown letters are printed literally and reported in errors,
// as squeue does.
squeue_format parse_squeue_format(std::string_view format);
// -O "JobID:.18 ,Name:20,State" (long names, case-insensitive; width 20 left
// when none given).
squeue_format parse_squeue_long_format(std::string_view format);
// squeue's default: JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON).
squeue_format default_squeue_format();
// The text squeue prints: the header line unless `header` is false, then one
// line per job.
std::string render_squeue(const squeue_format& f, const std::vector<job_view>& jobs, bool header, std::time_t now,
                          const char* time_format = nullptr);

// ---- sacct ----

struct sacct_field {
  std::string name;  // as Slurm spells it ("JobID")
  int width = 0;     // negative: left-justified
};
// "JobID,JobName%30,State" -> fields. Names match Slurm's by unique
// case-insensitive prefix as sacct does ("jobid" -> JobID). Throws
// std::invalid_argument("Invalid field requested: \"X\"") for an unknown name.
std::vector<sacct_field> parse_sacct_fields(std::string_view list);
// sacct's default fields: JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode.
std::vector<sacct_field> default_sacct_fields();
enum class sacct_style { table, parsable /* -p: "a|b|" */, parsable2 /* -P: "a|b" */ };
std::string render_sacct(const std::vector<sacct_field>& fields, const std::vector<job_view>& jobs, bool header,
                         sacct_style style, std::time_t now, const std::string& delimiter = "|",
                         const char* time_format = nullptr);
// ---- usage (issue 32): what sacct and fjobs --efficiency print of a job's
// usage (job_info's usage fields, from list_jobs with `usage`) ----

// sacct's TotalCPU, UserCPU and SystemCPU (Slurm's _elapsed_time):
// "D-HH:MM:SS" from a day, "HH:MM:SS" from an hour, else "MM:SS.mmm", or
// "00:MM:SS" when the milliseconds are 0.
std::string sacct_cpu_time(std::int64_t micros);
// A number in `unit` (0 bytes, 1 K, 2 M, ...) as Slurm's convert_num_unit
// prints it with CONVERT_NUM_UNIT_EXACT (sacct's default): divided by 1024
// while it is a multiple of 512, then the unit's letter ("1234K", "100M",
// "2.50G"; "0" for 0).
std::string slurm_exact_units(double num, int unit);
// sacct MaxRSS: the peak in KiB as Slurm prints its bytes ("3543568K", "100M").
std::string sacct_memory(std::int64_t kb);
// What the job asked for in memory, MB in total over its nodes (--mem per
// node times nodes, --mem-per-cpu times processors); nullopt: none asked.
std::optional<std::int64_t> requested_mem_mb(const job_view& j);
// Processor-seconds it held: its usage record's (the integral of its maps;
// finished jobs) when known, else for a finished adaptive job the integral
// of its maps from its history (map_seconds), else elapsed times processors.
double alloc_cpu_seconds(const job_view& j, std::time_t now);
// The integral of the maps a job held over its history (processor-seconds):
// each RUNNING event's map (a RESIZING one's old map: held until the job
// acknowledges) until the next event; nothing while PENDING, SUSPENDED or
// ended. Nullopt when a time does not parse or it never ran.
std::optional<double> map_integral(const std::vector<protocol::job_history_event>& events);
// CPU it used (user + system), microseconds; nullopt: not measured.
std::optional<std::int64_t> total_cpu_us(const job_view& j);
// sacct AllocTRES, as Slurm orders and prints it:
// "billing=4,cpu=4,mem=16G,node=1" (mem left out when none was asked);
// "" for a job that never started.
std::string alloc_tres(const job_view& j);

// fjobs --efficiency (like seff): the text for one job, and its JSON.
// A job that has not ended gets one line saying so.
// `hidden`: the caller may not see what was measured (another user's
// job): said so instead of "(not measured)".
std::string efficiency_text(const job_view& j, std::time_t now, bool hidden = false);
std::string efficiency_json(const job_view& j, std::time_t now, bool hidden = false);

// sacct's State: "COMPLETED", "CANCELLED by 1000", ...
std::string sacct_state(const job_view& j);
// ExitCode "N:S".
std::string sacct_exit_code(const job_view& j);

// ---- sinfo ----

// A partition as sinfo shows it: without partitions configured, the one of
// every node (k_default_partition).
struct partition_view {
  std::string name{k_default_partition};
  bool is_default = true;
  std::string state = "UP";       // UP, DOWN, DRAIN, INACTIVE
  std::int64_t max_time_s = 0;    // 0: infinite
  std::int64_t max_nodes = 0;     // 0: infinite
};
// A node as sinfo sees it, in one of its partitions (a node in two
// partitions is two views): its state word with what it holds.
struct node_view {
  protocol::node_info info;
  std::int64_t allocated = 0;  // processors held by running jobs
  partition_view partition;
};
// sinfo -p a,b: keeps the views of these partitions only (none for a name
// that is no partition: Slurm's sinfo then prints its header alone).
void keep_partitions(std::vector<node_view>& nodes, const std::vector<std::string>& names);
// "idle", "mix", "alloc", "down", "drain", "drng" (draining with jobs).
std::string sinfo_state(const node_view& n);
// sinfo's long state: "idle", "mixed", "allocated", "down", "drained", "draining".
std::string sinfo_state_long(const node_view& n);
// -o "%P %.5a %#P" (squeue's grammar; '#' is taken and ignored) and -O
// "Partition:.12,NodeList" (an unknown name is reported and left out).
using sinfo_format = field_format;
sinfo_format parse_sinfo_format(std::string_view format);
sinfo_format parse_sinfo_long_format(std::string_view format);
// Default: PARTITION AVAIL TIMELIMIT NODES STATE NODELIST; with `node_oriented`
// (-N): NODELIST NODES PARTITION STATE.
sinfo_format default_sinfo_format(bool node_oriented);
// One line per group of a partition's nodes sharing a state, per node (-N),
// or per partition (-s); partitions in the order of the views.
enum class sinfo_grouping { by_state, per_node, all };
std::string render_sinfo(const sinfo_format& f, const std::vector<node_view>& nodes, bool header, sinfo_grouping g);

// ---- JSON (--json) ----
// squeue --json: {"jobs": [...], "meta": ..., "errors": [], "warnings": []}
// with Slurm's field names (job_id, job_state, name, user_name, ...).
std::string squeue_json(const std::vector<job_view>& jobs, std::time_t now);
// sacct --json: {"jobs": [{"job_id", "name", "state": {"current": [...]}, ...}]}.
std::string sacct_json(const std::vector<job_view>& jobs, std::time_t now);
// sinfo --json: {"sinfo": [{"node": {"state": [...]}, "nodes": {...}, ...}]}.
std::string sinfo_json(const std::vector<node_view>& nodes);

}  // namespace aqs::slurm
