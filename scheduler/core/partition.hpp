// partition: named sets of nodes with limits, the configuration file they are
// declared in (aqs.conf), and the checks a submission to one must pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aqs::core {

// As Slurm's: UP runs and takes jobs; DRAIN runs what is queued but takes no
// new jobs; DOWN takes jobs but starts none; INACTIVE neither takes nor starts.
enum class partition_state : unsigned char { up, drain, down, inactive };
std::string_view to_string(partition_state s) noexcept;  // "UP", "DRAIN", "DOWN", "INACTIVE"

struct partition {
  std::string name;
  bool all_nodes = false;          // Nodes=ALL: every node, also those registering later
  std::vector<std::string> nodes;  // Nodes=node[01-04]: the names, expanded
  bool is_default = false;         // jobs without -p go here
  std::int64_t max_time_s = 0;     // MaxTime; 0: unlimited
  std::int64_t default_time_s = 0; // DefaultTime: a job's limit when it gave none; 0: MaxTime
  std::size_t max_nodes = 0;       // MaxNodes per job; 0: unlimited
  std::size_t max_cpus_per_job = 0;  // MaxCPUsPerJob (an AQS key); 0: unlimited
  std::vector<std::string> allow_users;   // AllowUsers (an AQS key); empty: everyone
  std::vector<std::string> allow_groups;  // AllowGroups; empty: everyone
  partition_state state = partition_state::up;
  // Policy=NAME (an AQS key): the strategy that schedules this partition;
  // empty: the daemon's --policy.
  std::string policy;
  std::size_t line = 0;  // where it was declared (0: implicit)

  bool has_node(const std::string& name) const;
  bool takes_jobs() const noexcept { return state == partition_state::up || state == partition_state::down; }
  bool starts_jobs() const noexcept { return state == partition_state::up || state == partition_state::drain; }
};

// The partitions of a site. With no configuration file there is one,
// implicit: "main", every node, default, no limits.
struct site_config {
  std::vector<partition> partitions;
  bool configured = false;  // false: the implicit partition only

  // The default partition (there is always one).
  const partition& default_partition() const;
  const partition* find(std::string_view name) const;
  // "debug, batch, gpu": for error messages.
  std::string names() const;
};

inline constexpr std::string_view k_implicit_partition = "main";  // what sinfo and squeue showed before partitions
site_config implicit_config();

// A configuration file that cannot be used: what() is one line,
// "FILE:LINE: what is wrong".
class config_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Reads the text of a configuration file (`file` names it in errors). The
// format, one partition per line, Slurm's slurm.conf syntax:
//
//   # comment to the end of the line
//   PartitionName=debug Nodes=node[01-02] Default=YES MaxTime=30:00 MaxNodes=1
//   PartitionName=batch Nodes=node[03-08] MaxTime=2-00:00:00 DefaultTime=1:00:00
//   PartitionName=gpu   Nodes=gpu[1-2] AllowGroups=gpu,admin State=UP
//
// Keys are case-insensitive, values are not (except YES/NO, UP/DOWN/...,
// UNLIMITED/INFINITE, ALL). Known keys: PartitionName, Nodes (a host list or
// ALL), Default (YES/NO), MaxTime and DefaultTime (Slurm's time forms:
// M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or UNLIMITED), MaxNodes, MaxCPUsPerJob
// (a number or UNLIMITED), AllowUsers and AllowGroups (comma lists, ALL for
// everyone), State (UP, DOWN, DRAIN, INACTIVE). "PartitionName=DEFAULT"
// sets defaults for the lines after it, as in Slurm. Without Default=YES the
// first partition is the default. A file without partitions is the
// implicit configuration. Throws config_error for an unknown key, a bad
// value, a duplicate name or node list, a second default, a NodeName line
// (nodes register themselves here) or anything else that is not this.
site_config parse_config(std::string_view text, std::string_view file);

// Slurm's time forms to seconds (0 for UNLIMITED/INFINITE); nullopt when
// the text is none of them.
std::optional<std::int64_t> parse_duration(std::string_view text);
// "1-00:00:00", "1:00:00", "30:00", "infinite" (sinfo's TIMELIMIT).
std::string format_partition_time(std::int64_t seconds);

// What a submission is checked against.
struct partition_request {
  std::string user;
  std::vector<std::string> groups;  // the submitter's groups, by name
  bool root = false;                // root may use any partition
  std::int64_t walltime_s = 0;      // 0: none asked (DefaultTime applies)
  std::size_t min_nodes = 0;        // 0: not asked
  std::size_t cpus = 0;             // processors (a rigid job's count, an adaptive job's minimum)
};

// Why this partition refuses the job at submission (Slurm's words first),
// or nullopt when it takes it. A DOWN partition takes jobs (they wait with
// reason PartitionDown); DRAIN and INACTIVE refuse them.
std::optional<std::string> partition_refusal(const partition& p, const partition_request& r);

// The partitions a job asked for (-p "a,b"; empty: the default), or the
// one-line error: "invalid partition name specified: 'x' (partitions: a, b)".
// With the implicit configuration every name is the one partition (scripts
// from other sites run; the client warns).
struct partition_choice {
  std::vector<const partition*> partitions;
  std::string error;  // set when partitions is empty
};
partition_choice choose_partitions(const site_config& c, std::string_view asked);

}  // namespace aqs::core
