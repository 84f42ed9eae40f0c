// results: the job and node objects inside list_jobs/list_nodes/job_history replies (and fjobs/fnodes --json).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/job_state.hpp"
#include "protocol/latency.hpp"

namespace aqs::protocol {

// One job as listed. These fields are the contract of `fjobs --json` (see
// the design brief); more may be added, never removed.
struct job_info {
  std::int64_t id = 0;
  std::string name;
  std::string user;
  core::job_state state = core::job_state::pending;
  bool adaptive = false;
  std::int64_t min_pe = 1;
  std::int64_t max_pe = 1;
  std::string procs;       // the map as 0/1 text; "" when it holds no processors
  std::int64_t nprocs = 0; // number of 1s in procs
  std::string nodes;       // compact form "node2:0-3,node3:0-1"; "" when none
  std::optional<std::string> submit_time;  // ISO 8601, null when unknown
  std::optional<std::string> start_time;
  std::optional<std::string> end_time;
  std::optional<std::int64_t> exit_code;
  std::optional<std::int64_t> walltime_s;  // null: no limit
  // A job array's task: the array's id (its first task's job id) and the index.
  std::optional<std::int64_t> array_job_id;
  std::optional<std::int64_t> array_task_id;
  std::optional<std::string> partition;  // as asked (-p); null: the default
  // Why a PENDING job waits (Slurm's words): Dependency, JobArrayTaskLimit,
  // Resources (the next to start), Priority (behind others); null otherwise.
  std::optional<std::string> reason;
  // An adaptive job's preferred size in processors (--pref), when it gave one.
  std::optional<std::int64_t> pref_pe;
  // Usage (issue 32), only in answers to list_jobs with `usage` (left out
  // otherwise, and each one when unknown): the account charged; the
  // processor-time it held in milliseconds (for an adaptive job the integral
  // of its maps, suspended time excluded: its usage record); its memory
  // request (--mem / --mem-per-cpu, MB); and, shown to its owner and root
  // only, what its agents measured: CPU time used (user, system; summed over
  // its nodes), the peak resident memory of its largest process (KiB, the
  // largest over its nodes) and how many nodes reported.
  std::optional<std::string> account;
  std::optional<std::int64_t> alloc_cpu_ms;
  std::optional<std::int64_t> mem_per_node_mb;
  std::optional<std::int64_t> mem_per_cpu_mb;
  std::optional<std::int64_t> user_cpu_us;
  std::optional<std::int64_t> system_cpu_us;
  std::optional<std::int64_t> max_rss_kb;
  std::optional<std::int64_t> measured_nodes;
  friend bool operator==(const job_info&, const job_info&) = default;
};

// Node states shown by fnodes.
enum class node_state : unsigned char { up, down, drain };
std::string_view to_string(node_state s) noexcept;  // "UP", "DOWN", "DRAIN"
std::optional<node_state> parse_node_state(std::string_view text) noexcept;

// One node as listed (the contract of `fnodes --json`).
struct node_info {
  std::string name;
  node_state state = node_state::up;
  std::int64_t first_proc = 0;
  std::int64_t nprocs = 0;
  std::string procs;                // global numbers as a range list, "8-15"
  std::vector<std::int64_t> jobs;   // jobs holding any of its processors
  std::int64_t memory_mb = 0;
  std::int64_t gpus = 0;
  // The configured partitions it is in; empty (left out) without any.
  std::vector<std::string> partitions;
  // Round trips from this node to others, as its agent last measured them
  // (fnodes --latency), by node name; empty (left out) when none.
  std::vector<latency_sample> latency{};
  // How its agent contains jobs (cgroup v1/v2, or "none (why)"), as it
  // said at registration; empty (left out): not known.
  std::string containment{};
  friend bool operator==(const node_info&, const node_info&) = default;
};

nlohmann::json to_json(const job_info& j);
nlohmann::json to_json(const node_info& n);

// Appends to_json(j).dump() to `out`, byte for byte the same, without
// building the JSON object: listing 100,000 jobs costs a few milliseconds
// this way instead of a second. Text is copied as it is (nlohmann would
// refuse invalid UTF-8; the store holds none).
void append_json(std::string& out, const job_info& j);

// Validate one object from a reply (unknown fields ignored, null = absent
// for the optional ones). Throw protocol_error(bad_request) naming the field
// ("jobs[3].state") for anything else; `where` is the prefix used in those
// names. Never throw anything else for bad input.
job_info parse_job_info(const nlohmann::json& j, const std::string& where = "");
node_info parse_node_info(const nlohmann::json& j, const std::string& where = "");

// The "jobs" / "nodes" arrays of list_jobs / list_nodes replies (the `result`
// of an ok). Throw as above.
std::vector<job_info> parse_job_list(const nlohmann::json& result);
std::vector<node_info> parse_node_list(const nlohmann::json& result);

}  // namespace aqs::protocol
