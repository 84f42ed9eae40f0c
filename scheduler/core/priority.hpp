// priority: Slurm's multifactor job priority (age, fair share, job size,
// partition and QOS, each a factor in [0, 1] times its weight) as a pure
// function of a snapshot, and how aqs.conf spells the weights. The result
// goes into job_request::priority (scheduler::set_priority), which every
// policy already orders the queue by: EASY reserves for the highest,
// equipartition admits the highest first and shrinks the lowest first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.hpp"

namespace aqs::core {

class scheduler;

// The weights (Slurm's PriorityWeight*; 0 leaves a factor out) and the
// factors' settings. All weights 0 (the default): every job keeps its base
// priority, so the queue is exactly what it was without accounting.
struct priority_weights {
  std::uint32_t age = 0;
  std::uint32_t fairshare = 0;
  std::uint32_t job_size = 0;
  std::uint32_t partition = 0;
  std::uint32_t qos = 0;
  double max_age_s = 7 * 86400.0;  // PriorityMaxAge: the age factor reaches 1 here
  double half_life_s = 7 * 86400.0;  // PriorityDecayHalfLife of past usage (0: no decay)
  bool favor_small = false;        // PriorityFavorSmall: small jobs get the larger size factor
  bool all_zero() const noexcept { return age == 0 && fairshare == 0 && job_size == 0 && partition == 0 && qos == 0; }
};

// Largest sum of weights accepted: the priority must fit job_request::priority.
inline constexpr std::uint64_t k_max_priority_weight_sum = 1'000'000'000;

// Sets one aqs.conf key (case-insensitive, Slurm's names): PriorityWeightAge,
// PriorityWeightFairshare, PriorityWeightJobSize, PriorityWeightPartition,
// PriorityWeightQOS (whole numbers), PriorityMaxAge, PriorityDecayHalfLife
// (Slurm's time forms; minutes alone), PriorityFavorSmall (YES/NO). Returns
// nullopt when the key is not one of these, else "" or the one-line reason
// ("PriorityWeightAge must be a whole number from 0 to 1000000000, not 'x'").
// Nothing changes when refused; the weights' sum is checked too.
std::optional<std::string> set_priority_setting(priority_weights& w, std::string_view key, std::string_view value);

// What one queued job brings to the computation.
struct priority_input {
  job_id id = 0;
  double submit_time = 0;       // the age counts from here (Slurm: eligible time)
  std::size_t size = 1;         // processors asked (min_pe: what it needs to start)
  int base = 0;                 // the job's own priority (fsub --priority, an admin's setting)
  double fairshare = 1;         // its association's factor (fairshare.hpp), [0, 1]
  std::uint32_t partition_priority = 0;  // its partition's PriorityJobFactor
  std::uint32_t qos_priority = 0;        // its QOS's Priority
};

// A queued job's input from its request: its submit time, its min_pe and
// `fairshare`; base, partition and QOS priorities left 0.
priority_input priority_input_of(job_id id, const job_request& req, double fairshare);

// The normalisers: the cluster's processors and the largest partition and
// QOS priorities (a factor is its priority over the largest; 0 when that is 0).
struct priority_context {
  std::size_t cluster_procs = 1;
  std::uint32_t max_partition_priority = 0;
  std::uint32_t max_qos_priority = 0;
};

struct priority_factors {
  double age = 0, fairshare = 0, job_size = 0, partition = 0, qos = 0;
};

struct job_priority {
  job_id id = 0;
  priority_factors factors;
  // base + the weighted factors, rounded, clamped to int: what sprio's
  // PRIORITY column shows and job_request::priority gets.
  int value = 0;
};

// Each factor in [0, 1]: age = min(1, (now - submit) / max_age) (0 for a
// job from the future, 1 when max_age is 0); job size = size / cluster
// processors (with favor_small, 1 - that + 1/cluster); partition and QOS
// over the largest; fair share as given (clamped).
priority_factors factors_of(const priority_input& in, const priority_context& ctx, const priority_weights& w,
                            double now);
// base + sum of weight * factor. With all weights 0: base, exactly.
int priority_value(const priority_factors& f, const priority_weights& w, int base);
// Every job's factors and priority, in input order. O(jobs).
std::vector<job_priority> compute_priorities(const std::vector<priority_input>& jobs, const priority_context& ctx,
                                             const priority_weights& w, double now);
// Gives each job its priority (scheduler::set_priority); unknown ids (jobs
// gone since the snapshot) are skipped. Returns how many changed.
std::size_t apply_priorities(scheduler& s, const std::vector<job_priority>& p);

}  // namespace aqs::core
