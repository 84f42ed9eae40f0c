// broker: faucetsd's choice of a cluster for a job, by a named policy over what the clusters last reported.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aqs::faucets {

// What a cluster last reported, plus server-side measures.
struct cluster_view {
  std::string name;
  bool up = true;
  std::int64_t procs_total = 0, procs_free = 0, gpus_total = 0, gpus_free = 0;
  std::int64_t shrinkable = 0;  // processors running adaptive jobs could give up (sum of (nprocs - min_pe))
  std::int64_t pending_jobs = 0, pending_procs = 0;  // queue: count and sum of min_pe
  std::map<std::string, std::int64_t> pending_by_partition;
  std::int64_t max_job_procs = 0;  // largest job it could ever run
  std::int64_t max_job_gpus = 0;
  double speed = 1.0;  // per-processor speed score, 1.0 = reference
  std::vector<std::string> datasets;
  double latency_s = 0;  // measured round trip server<->cluster
  std::optional<double> start_in_s;  // the cluster's own answer "when would this job start here", seconds from now
  // The cluster's bid (contract policy; every estimate_reply carries one):
  // when the job would be done there (start_in_s + walltime_s / speed, as
  // the cluster computes it), seconds from now, and the price it asks,
  // credits per processor-second (its configured rate scaled by its load).
  std::optional<double> completion_in_s;
  std::optional<double> price;
};

// A user's QoS contract (docs/faucets.md "Contracts"): the job is worth
// `value` credits if done within `deadline_in_s` seconds from now; after
// that its worth falls linearly to 0 over `decay_s` seconds (0: at once).
// It may run only where the price is at most `max_price` credits per
// processor-second. best_effort: when no cluster can finish it by the
// deadline, run it where it earns the most anyway; else it is refused.
struct contract_terms {
  double deadline_in_s = 0;
  double max_price = 0;
  double value = 0;
  double decay_s = 0;
  bool best_effort = false;
};
// What the job is worth to its user if it completes `completion_in_s`
// seconds from now: value by the deadline, then the linear decay, never < 0.
double contract_value(const contract_terms& c, double completion_in_s);

// What a job asks for, as far as choosing a cluster goes.
struct job_ask {
  std::int64_t min_pe = 1, max_pe = 1;
  bool adaptive = false;
  double walltime_s = 3600;  // the job's time limit (estimate)
  std::int64_t gpus = 0;     // total GPUs
  std::vector<std::string> datasets;  // names of data sets the job reads
  std::optional<contract_terms> contract;  // the contract policy's terms, when the user gave some
};

// The cluster chosen and why (one line, shown in the job's history).
struct choice {
  std::string cluster;
  std::string reason;
  // The contract policy refuses a job no cluster can take on its terms:
  // cluster is empty and reason says why (one line). The job then fails.
  bool refused = false;
};

// A policy. choose() only ever returns a cluster can_ever_run() accepts;
// among equals it is deterministic (ties end with the cluster's name), except
// for "random", whose draws follow the seed make_broker() was given.
class broker {
public:
  virtual ~broker() = default;
  virtual std::string_view name() const noexcept = 0;
  // earliest-start: true; the server then asks every eligible cluster for start_in_s first.
  virtual bool needs_start_estimates() const noexcept { return false; }
  // nullopt: no up cluster could ever run it.
  virtual std::optional<choice> choose(const job_ask& job, std::span<const cluster_view> clusters) = 0;
};

// The seed make_broker() uses when given none: the library has no source of
// entropy of its own (it is pure), so a server wanting different random
// draws on each start passes one (e.g. from std::random_device).
inline constexpr std::uint64_t default_broker_seed = 0x9e3779b97f4a7c15ULL;

// The policies, by name: random (uniform over eligible clusters), fastest-cpu
// (highest speed; tie: most free processors), fastest-queue (least
// pending_procs per procs_total; tie: most procs_free + shrinkable), data
// (most of the job's data sets held; tie: as fastest-queue), earliest-start
// (least expected completion start_in_s + walltime_s / speed; clusters with
// no estimate last; tie: start_in_s, then name), contract (the bid within
// the job's max_price that earns the most contract_value at its
// completion_in_s; tie: lowest price, then earliest completion, then name;
// no bid meets the deadline: refused, or with best_effort the most value
// (tie: earliest completion); no bid within the price: refused; a job
// without a contract is placed as earliest-start places it). Throws
// std::invalid_argument("unknown broker policy 'x' (known: random, fastest-cpu,
// fastest-queue, data, earliest-start, contract)").
std::unique_ptr<broker> make_broker(std::string_view name, std::uint64_t seed = default_broker_seed);
// The known names, in the order above.
std::vector<std::string_view> broker_names();
// Whether the cluster could ever run the job: up, max_job_procs >= min_pe,
// and max_job_gpus >= gpus.
bool can_ever_run(const job_ask& job, const cluster_view& cluster);

}  // namespace aqs::faucets
