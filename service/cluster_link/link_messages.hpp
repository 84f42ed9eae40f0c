// link_messages: what faucetsd and a cluster's aqsd say to each other
// (docs/faucets.md has the table): field readers that name the field in
// their errors, and the cluster's report.
//
// Opening: server -> challenge {nonce}; cluster -> hello {protocol, cluster,
// auth = HMAC-SHA256(cluster key, nonce)}; server -> welcome {} or error
// {message} and close. Then, in any order:
//   cluster -> report {cluster_report}            (at once, then every second and on changes)
//   server  -> follow {jobs: [{fid, job_id}]}     (the jobs it placed there: report them and
//              let them run; every other copy the cluster holds of a server job is
//              reported too, with its attempt, and waits for release or cancel)
//   cluster -> synced {}                          (after those reports: jobs may be placed here)
//   server  -> release {fid, job_id}              (that copy is the job's placement now)
//   server  -> forward {fid, attempt, user, local_user, submit}  (submit: aqsd's submit
//              message; the copy's submit token is faucets:CLUSTER:FID.ATTEMPT)
//   cluster -> forwarded {fid, job_id} | refused {fid, error}
//   server  -> estimate {qid, min_pe, max_pe, adaptive, walltime_s, gpus}
//   cluster -> estimate_reply {qid, start_in_s (null: never), completion_in_s?, price?}
//              (a bid: when it would be done here and the price per processor-second)
//   server  -> cancel {fid, job_id, local_user}
//   cluster -> job_update {fid, job_id, state, nprocs, exit_code, start_time, end_time, attempt?,
//              proc_seconds? (at the end: processor-seconds it held, the integral of its maps)}
//   server  -> ping {t, pad}; cluster -> pong {t, bytes}   (latency, bandwidth)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aqs::faucets {

inline constexpr std::int64_t k_link_protocol = 1;

// Reads one field of a message; throws link_error "forward.fid must be an
// integer in 1..N" naming the message type and field.
std::int64_t int_field(const nlohmann::json& m, const char* key, std::int64_t lo, std::int64_t hi);
std::optional<std::int64_t> opt_int_field(const nlohmann::json& m, const char* key, std::int64_t lo, std::int64_t hi);
double number_field(const nlohmann::json& m, const char* key, double lo, double hi);
std::string string_field(const nlohmann::json& m, const char* key, std::size_t max_len = 256);
std::optional<std::string> opt_string_field(const nlohmann::json& m, const char* key, std::size_t max_len = 256);

// What a cluster tells the server about itself.
struct cluster_report {
  std::int64_t procs_total = 0, procs_free = 0;
  std::int64_t gpus_total = 0, gpus_free = 0;
  std::int64_t shrinkable = 0;  // processors adaptive jobs hold above their minimum
  std::int64_t running_jobs = 0, pending_jobs = 0, pending_procs = 0;
  std::map<std::string, std::int64_t> pending_by_partition;
  std::int64_t max_job_procs = 0, max_job_gpus = 0;  // the largest job it could ever run
  double speed = 1.0;
  std::vector<std::string> datasets;
  std::int64_t nodes_up = 0;
  double price = 0;  // what it asks now, credits per processor-second (its rate scaled by its load)
  friend bool operator==(const cluster_report&, const cluster_report&) = default;
};
nlohmann::json to_json(const cluster_report& r);       // with "type": "report"
cluster_report parse_report(const nlohmann::json& m);  // throws link_error

// A job's state as the cluster reports it.
struct job_update {
  std::int64_t fid = 0, job_id = 0;
  std::string state;  // PENDING, RUNNING, ... (core/job_state spellings)
  std::int64_t nprocs = 0;
  std::optional<std::int64_t> exit_code;
  std::optional<std::string> start_time, end_time;  // ISO 8601, as aqsd lists them
  // Which forward made this copy (reported for copies the server did not
  // list in its follow); unset: not said.
  std::optional<std::int64_t> attempt;
  // At the end (a final state): the processor-seconds the job held here,
  // the integral of its processor maps over time (what the ledger charges).
  std::optional<double> proc_seconds;
};
nlohmann::json to_json(const job_update& u);  // with "type": "job_update"
job_update parse_job_update(const nlohmann::json& m);

}  // namespace aqs::faucets
