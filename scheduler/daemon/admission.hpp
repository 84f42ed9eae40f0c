// admission: the one set of checks every job passes to be queued or changed:
// at fsub/sbatch/REST submission, and at fctl update, PATCH /api/v1/jobs/ID,
// aqs-scontrol update and a running job's own range request. Its partitions'
// states, users and limits (MaxTime, MaxNodes, MaxCPUsPerJob), then whether
// its nodes could ever hold it; the refusals are the same one-line words on
// every path.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/partition.hpp"
#include "daemon/job_records.hpp"
#include "protocol/messages.hpp"

namespace aqs::daemon {

// What is checked: the job as it would be after the submission or change.
struct admission_request {
  submitter who;                     // the job's owner
  std::vector<std::string> groups;   // their groups, by name (group_names_of)
  bool root = false;                 // the owner or the one asking is root: any partition's users
  std::string partition;             // "a,b" as asked or as admitted; "": the default
  // The time limit: nullopt none asked (a partition's DefaultTime applies at
  // submission), 0 UNLIMITED (refused by a partition with a MaxTime), else seconds.
  std::optional<std::int64_t> walltime_s;
  std::size_t cpus = 0;              // a rigid job's count, an adaptive job's minimum
  std::size_t min_nodes = 0;         // 0: not asked
};

struct admission {
  std::string error;                               // non-empty: refused, one line
  std::string never_fits;                          // when refused as never fitting: the nodes' reason alone
  std::vector<const core::partition*> partitions;  // those that take the job, in the order asked
};

// Whether the nodes (of partition `p`; null: of the cluster without
// partitions) could ever hold the job, and why not.
using never_fits_check = std::function<std::optional<std::string>(const core::partition* p)>;

// The checks: the partitions asked (with the implicit configuration only
// `never_fits`), each one's state, users and limits, then whether any that
// takes the job could hold it ("the job can never run on this cluster: ...").
// A job refused by every partition asked is refused with the first refusal.
admission admit(const core::site_config& config, const admission_request& r, const never_fits_check& never_fits);

// At submission: admit() for `spec`, then what admission changes in it: a
// job taken by only some of the partitions it asked names those only, and a
// job without a time limit takes its partition's DefaultTime (else MaxTime).
// `groups`: the submitter's (group_names_of; needed only with partitions).
admission admit_submission(const core::site_config& config, protocol::job_spec& spec, const submitter& who,
                           const std::vector<std::string>& groups, const never_fits_check& never_fits);

}  // namespace aqs::daemon
