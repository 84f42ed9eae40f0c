// job_environment: what a launched job or step starts with: its user, directory, umask, cpus and variables.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "job_process.hpp"
#include "protocol/messages.hpp"

namespace aqs::node {

// What this node tells every job, besides what the launch says.
struct node_environment {
  std::string node_name;                    // AQS_NODENAME
  std::optional<std::string> socket_path;   // AQS_SOCKET: where the job's shim (and fsub in a job) finds aqsd
  std::optional<std::string> server;        // AQS_SERVER: the same over TCP
  std::string rsh_agent;                    // aqs-rsh, mpirun's launch agent for other hosts ("": none)
  std::vector<std::string> mpi_interfaces;  // OpenMPI's TCP traffic only on these (empty: any)
};

// The launch_spec of `l` without its command and output: as its user when
// the agent runs as root (else as the agent's), in its working directory
// with its umask, pinned to its local cpus, and with the job's own variables
// followed by AQS's (AQS_JOB_ID, AQS_PROCS, ..., AQS_JOB_TOKEN), which
// win over the job's, and with the Slurm names' directory (links srun ->
// aqs-srun, ..., in the spool, owned by the agent's user, mode 0755) first
// on its PATH, so that a Slurm script calls AQS whatever else the node has
// installed; if that directory cannot be made, `warn` gets why. A launch that places processors gets its MPI launch
// files written into `mpi_dir` and mpirun's variables; if they cannot be
// written, `warn` gets why and the job's mpirun keeps OpenMPI's defaults.
launch_spec job_environment(const protocol::launch& l, const node_environment& node, bool as_root,
                            const std::filesystem::path& mpi_dir, const std::function<void(const std::string&)>& warn);

}  // namespace aqs::node
