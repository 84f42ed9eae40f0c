// partition_samples: the partitions the admission and partition_gate tests
// check submissions against, as aqs.conf would give them, and their user.
#pragma once

#include <string>

#include "core/partition.hpp"
#include "daemon/job_records.hpp"

namespace aqs::test {

// debug (the default: 30 minutes at most, 10 by default, one node) on n1-n2,
// batch on n3-n4 (two hours at most; `batch_limits`: more of its settings),
// vip on n4 for alice only; `more`: further partition lines.
inline core::site_config sample_partitions(const std::string& batch_limits = "", const std::string& more = "") {
  return core::parse_config(
      "PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=30:00 DefaultTime=10:00 MaxNodes=1\n"
      "PartitionName=batch Nodes=n[3-4] MaxTime=2:00:00" +
          (batch_limits.empty() ? "" : " " + batch_limits) + "\n" + more +
          "PartitionName=vip Nodes=n4 AllowUsers=alice\n",
      "aqs.conf");
}

inline const daemon::submitter sample_bob{"bob", 1000, 1000};

}  // namespace aqs::test
