// partition_gate: what a submission must pass for the partitions it names
// (aqs.conf): known names, each partition's state, users and limits, and the
// default time limit a job without one takes.
#pragma once

#include <string>
#include <vector>

#include "core/partition.hpp"
#include "daemon/job_records.hpp"
#include "protocol/messages.hpp"

namespace aqs::daemon {

struct partition_admission {
  std::string error;  // non-empty: refused, one line, said to the submitter
  std::vector<const core::partition*> partitions;  // those that take the job, in the order asked
};

// Checks `spec` against the partitions it asks for (-p "a,b"; none: the
// default) for a submitter in `groups` (names). A job refused by every
// partition asked is refused with the first refusal; one refused only by
// some runs in the others, and `spec`'s partition then names those only.
// A job without a time limit takes its partition's DefaultTime (else its
// MaxTime), as in Slurm. With the implicit configuration nothing is checked
// or changed (any -p was accepted with a warning by the client).
partition_admission admit_to_partitions(const core::site_config& config, protocol::job_spec& spec,
                                        const submitter& who, const std::vector<std::string>& groups);

// The names of the groups a user is in (primary `gid` included); empty if
// the user is unknown to the system.
std::vector<std::string> group_names_of(const std::string& user, std::int32_t gid);

}  // namespace aqs::daemon
