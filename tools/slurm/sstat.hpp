// sstat: Slurm's sstat over AQS: the status of a running job's steps (CPU
// time, resident and virtual memory, tasks) as each node's agent measures
// them, in sstat's fields and layouts (Slurm 22.05). The parts that need no
// socket are pure (parsing, aggregation, output); fetch_step_stats() asks
// the agents.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/stat_socket.hpp"
#include "slurm/slurm_format.hpp"

namespace aqs::slurm {

// sstat's command line. Throws cmdline::usage_error (getopt's words) for an
// unknown option or a missing value, slurm::usage_error for a bad job id.
struct sstat_request {
  std::int64_t job_id = 0;
  std::optional<std::string> step;  // "0", "batch"; none: the job's first normal step (all with -a)
};
struct sstat_command_line {
  std::vector<sstat_request> jobs;
  std::string fields;               // -o/--format/--fields, joined with ','; "" = the default
  bool header = true;               // -n/--noheader
  sacct_style style = sacct_style::table;  // -p / -P
  bool all_steps = false;           // -a/--allsteps
  bool pid_format = false;          // -i/--pidformat
  bool no_convert = false;          // --noconvert
  bool help = false, help_format = false, version = false;
};
sstat_command_line parse_sstat_command_line(std::span<const std::string> args);
std::string sstat_usage();
// What -e/--helpformat prints: every field name, as sstat lays them out.
std::string sstat_field_list();

// One field to print: its Slurm name and width (negative: left-aligned).
struct sstat_field {
  std::string name;
  int width = 10;
};
// "MaxRSS,AveCPU%20" -> fields, matched by case-insensitive prefix in
// sstat's table order. Throws std::invalid_argument("Invalid field
// requested: \"X\"").
std::vector<sstat_field> parse_sstat_fields(std::string_view list);
std::vector<sstat_field> default_sstat_fields(bool pid_format);
// Whether AQS measures a field (JobID, NTasks, Nodelist, Pids, the RSS,
// VMSize and CPU fields); the others (pages, disk, energy, frequencies,
// TRES) are accepted and printed empty.
bool sstat_measures(std::string_view field);

// What one agent said about one task of a step.
struct task_stat {
  std::int64_t task = 0;  // the task's number in its step (SLURM_PROCID)
  std::string node;
  std::uint64_t rss_kb = 0, max_rss_kb = 0, vsize_kb = 0, max_vsize_kb = 0, cpu_ms = 0;
  std::vector<std::int64_t> pids;
};
// One step of a job, all its nodes' tasks.
struct step_stat {
  std::int64_t job_id = 0;
  std::string step;  // "batch", "0", ...
  std::vector<task_stat> tasks;
};
// Reads an agent's reply line (job_stats.hpp) into `steps` (merging steps
// of the same name). Returns "" or the agent's error code
// ("permission_denied", "not_found", ...); throws std::runtime_error for a
// reply that is not one.
std::string merge_agent_reply(std::string_view line, std::int64_t job_id, std::vector<step_stat>& steps);

// The steps of `all` that a request selects, Slurm's way: a named step; or
// without -a the first normal step (batch and extern are left out); with
// -a every step.
std::vector<step_stat> select_steps(const std::vector<step_stat>& all, const std::optional<std::string>& step,
                                    bool all_steps);

// The table (header unless `header` is false, then one line per step).
std::string render_sstat_header(const std::vector<sstat_field>& fields, sacct_style style);
std::string render_sstat_row(const std::vector<sstat_field>& fields, const step_stat& s, sacct_style style,
                             bool no_convert);
// Slurm's memory as sstat prints it: bytes converted by 1024 while >= 1024
// ("50M", "1.18M", "0"); with `no_convert` the number of bytes... as
// Slurm's --noconvert, in K.
std::string sstat_memory(std::uint64_t kb, bool no_convert);
// Slurm's CPU times: "00:MM:SS", "HH:MM:SS", "D-HH:MM:SS".
std::string sstat_cpu_time(std::uint64_t seconds);


// Asks the agent of each node (on this machine) about the job: returns
// the steps, and in `errors` one entry per node that did not answer or
// refused ("node1: permission_denied ..."). `trusted_uid`: besides root,
// the uid the agents may run as (aqsd's socket's owner); a socket held
// by anyone else is not believed.
std::vector<step_stat> fetch_step_stats(const std::string& aqsd_socket, std::int64_t job_id,
                                        const std::vector<std::string>& nodes, std::int64_t trusted_uid,
                                        std::vector<std::string>& errors, bool& refused);

}  // namespace aqs::slurm
