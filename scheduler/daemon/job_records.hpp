// job_records: conversions between the wire's job objects, the store's
// records and the core's requests.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/map_display.hpp"
#include "core/job.hpp"
#include "daemon_base/unix_user.hpp"  // user_name_of, in aqs::service since faucetsd needs it too
#include "protocol/messages.hpp"
#include "protocol/results.hpp"
#include "store/records.hpp"

namespace aqs::daemon {

// Who submitted: from SO_PEERCRED, never from the request.
struct submitter {
  std::string user;
  std::int32_t uid = 0;
  std::int32_t gid = 0;
};

// The run-time estimate the core plans with when a job gave no limit: long
// enough that EASY never counts on it ending.
inline constexpr double k_unlimited_walltime_s = 365.0 * 24 * 3600;

// The core's shape of a job geometry, and a stored geometry (JSON text,
// empty for none) read back; throws protocol_error for a malformed one.
core::job_shape shape_of(const protocol::job_geometry& g);
std::optional<protocol::job_geometry> geometry_of(const std::string& json_text);

// The store's key for a client's submit token: scoped to the submitting
// uid ("u<uid>:<token>"), so that a token can only ever find its own user's
// job again, never another's that happens to use the same token. Empty
// stays empty (the store makes one up).
std::string scoped_submit_token(std::int64_t uid, const std::string& token);

store::job_submission to_store_request(const protocol::job_spec& spec, const submitter& who);
// The launchable job as it was submitted (script, argv, files, environment).
protocol::job_spec to_spec(const store::job_record& r);

// The value of a kept Slurm option ("account=chem" gives "chem" for
// "account"; the last one when given twice), "" when there is none.
std::string recorded_option(const std::optional<protocol::job_geometry>& g, std::string_view key);

// -w/--nodelist and -x/--exclude (kept as "nodelist=HOSTLIST" and
// "exclude=HOSTLIST"), expanded into the request.
void set_named_nodes(core::job_request& r, const std::optional<protocol::job_geometry>& g);

// What the core schedules: from a new submission and from a stored job.
// An adaptive job's preferred size, speedup model and resize cost from its
// geometry (issue 34); a rigid job's are left unset.
void set_malleability(core::job_request& r, const protocol::job_geometry& g);
core::job_request to_core_request(std::int64_t id, const protocol::job_spec& spec, const std::string& user,
                                  double submit_time);
core::job_request to_core_request(const store::job_summary& s);

double to_seconds(store::time_point t) noexcept;
// ISO 8601 in UTC with milliseconds: "2026-11-22T14:26:00.123Z".
std::string iso8601(store::time_point t);

// A processor map of the store (text of any length) over a cluster of n
// processors: shorter maps (written before nodes registered) are extended,
// bits beyond n are dropped.
core::processor_set map_over(const core::processor_set& procs, std::size_t n);

// One job as list_jobs and fjobs --json show it; `nodes` names its processors.
protocol::job_info to_job_info(const store::job_summary& s, std::span<const core::node_span> nodes);
// Issue 32: adds a listed job's usage to `j` (list_jobs with `usage`): its
// memory request from its geometry, its account and allocated
// processor-time from `u` (may be null: none recorded), and what was
// measured only when `measured_visible` (the caller owns it or is root).
void add_usage(protocol::job_info& j, const store::job_summary& s, const store::job_usage* u, bool measured_visible);

}  // namespace aqs::daemon
