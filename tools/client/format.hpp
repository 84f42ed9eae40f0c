// format: what fjobs and fnodes print for people (tables) and for scripts
// (one JSON array).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/replies.hpp"
#include "protocol/results.hpp"

namespace aqs::client {

// Seconds since the epoch of an ISO 8601 UTC time as aqsd writes it
// ("2026-11-22T14:26:00.123Z"); nullopt if it is not one.
std::optional<double> parse_iso_time(const std::string& text);

// fjobs: one line per job under a header:
//   JOBID NAME USER STATE NPROCS MIN-MAX TIME NODES
// TIME is the run time so far (RUNNING...), or in all (finished), Slurm's
// format (M:SS, H:MM:SS, D-HH:MM:SS); "-" if it never ran. NODES is the
// compact map ("node2:0-3,node3:0-1"); for a finished job its exit code.
// `now` is the current time in seconds since the epoch.
// Pending tasks of one job array in a row are one line ("123_[4-9]") unless
// `expand_arrays`; other tasks show as "123_4".
// Rows as columns two spaces apart, each as wide as its widest cell, trailing
// blanks trimmed: the commands' tables.
std::string render_table(const std::vector<std::vector<std::string>>& rows);

std::string format_jobs_table(const std::vector<protocol::job_info>& jobs, double now, bool expand_arrays = false);
// fnodes: NODE STATE PROCS NPROCS JOBS MEMORY
std::string format_nodes_table(const std::vector<protocol::node_info>& nodes);
// fjobs --history: one line per event of a job_history reply's "events":
//   TIME FROM TO PROCS REASON
// (PROCS: the processor map after the event, "-" if none).
std::string format_history_table(const std::vector<protocol::job_history_event>& events);
// The JSON arrays of fjobs --json and fnodes --json (one line each).
std::string jobs_json(const std::vector<protocol::job_info>& jobs);
std::string nodes_json(const std::vector<protocol::node_info>& nodes);

}  // namespace aqs::client
