// job_step: frun (and srun) run inside a job start a step in the job's own
// allocation, as srun does inside an sbatch job, instead of a new job.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cmdline/job_options.hpp"

namespace aqs::cmdline {

// Whether this process runs inside an AQS job whose node agent placed it
// (AQS_JOB_ID and AQS_CPUS in `environment`, "KEY=VALUE" entries).
bool inside_a_job(const std::vector<std::string>& environment);

// The command that runs `cmd` as a step of the surrounding job: mpirun
// (found on the job's PATH) over the job's allocation, which the agent's
// hostfile and rankfile variables describe: one copy per task of the job on
// its host and cpus, MPI program or not, like srun; `-n N` runs only the
// first N tasks. Throws usage_error when there is no mpirun, for
// --adaptive, or for -n above the job's tasks.
std::vector<std::string> step_argv(const frun_command_line& cmd, const std::vector<std::string>& environment,
                                   const std::string& cwd);

}  // namespace aqs::cmdline
