// job_environment: AQS's variables for a job, and the MPI placement that lets its plain `mpirun ./app` use its cpus.
#include "job_environment.hpp"

#include <cstdint>
#include <utility>

#include "aqs/mpi_adapter/launch.hpp"

namespace aqs::node {

namespace {

using variables = std::vector<std::pair<std::string, std::string>>;

// AQS_CPUS: "3,0,1" (one node-local cpu per processor of the job's map).
std::string join_numbers(const std::vector<std::int64_t>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out;
}

// AQS_HOSTS: the host of every processor, runs written once: "a*4,b*2".
std::string join_hosts(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j < v.size() && v[j] == v[i]) ++j;
    if (!out.empty()) out += ',';
    out += v[i] + "*" + std::to_string(j - i);
    i = j;
  }
  return out;
}

// The job's plain `mpirun ./app` starts one rank per processor of its map
// on that processor's host (aqs::mpi_adapter's hostfile and variables;
// daemons on other hosts through aqs-rsh). A rigid job's rankfile binds
// each rank to its cpu; an adaptive job's shim pins its ranks itself and
// spawns more on the processors it gains, on any host.
variables mpi_placement(const protocol::launch& l, const node_environment& node, const std::filesystem::path& mpi_dir,
                        const std::function<void(const std::string&)>& warn) {
  bool placed = false;
  variables out;
  if (!l.proc_cpus.empty() && l.proc_cpus.size() == l.proc_hosts.size()) {
    try {
      mpi_adapter::allocation a;
      a.procs = mpi_adapter::make_processors(l.proc_hosts, std::vector<int>(l.proc_cpus.begin(), l.proc_cpus.end()));
      a.launch_agent = node.rsh_agent;
      a.tcp_interfaces = node.mpi_interfaces;
      a.adaptive = l.job.adaptive;
      a.spare_hosts = l.spare_hosts;
      const auto files = mpi_adapter::write_launch_files(mpi_dir, a);
      for (auto& kv : mpi_adapter::launch_environment(a, files)) out.push_back(std::move(kv));
      placed = true;
    } catch (const std::exception& e) {
      if (warn) {
        warn("job " + std::to_string(l.job_id) + ": no MPI launch files (its mpirun keeps OpenMPI's defaults): " +
             e.what());
      }
    }
  }
  // The shim still pins and spawns: mpirun must neither bind nor refuse to
  // start more ranks than it has slots.
  if (l.job.adaptive && !placed) {
    for (auto& kv : mpi_adapter::adaptive_placement()) out.push_back(std::move(kv));
  }
  return out;
}

std::vector<std::string> job_variables(const protocol::launch& l, const node_environment& node,
                                       const std::filesystem::path& mpi_dir,
                                       const std::function<void(const std::string&)>& warn) {
  const variables ours = {{"AQS_JOB_ID", std::to_string(l.job_id)}, {"AQS_JOB_NAME", l.job.name},
                          {"AQS_PROCS", l.procs},                    {"AQS_NPROCS", std::to_string(l.nprocs)},
                          {"AQS_NODELIST", l.nodelist},              {"AQS_NODENAME", node.node_name}};
  variables extra;
  if (node.socket_path) extra.emplace_back("AQS_SOCKET", *node.socket_path);
  if (node.server) extra.emplace_back("AQS_SERVER", *node.server);
  if (!l.proc_cpus.empty()) {
    extra.emplace_back("AQS_CPUS", join_numbers(l.proc_cpus));
    extra.emplace_back("AQS_HOSTS", join_hosts(l.proc_hosts));
  }
  if (l.uid == 0) {
    extra.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
    extra.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  }
  for (auto& kv : mpi_placement(l, node, mpi_dir, warn)) extra.push_back(std::move(kv));
  // The job's own variables may be another job's (fsub run inside a job):
  // that job's token and placement never pass on, even where this launch
  // sets none, and AQS's variables win over the job's.
  std::vector<std::string> env;
  for (const auto& kv : l.job.environment) {
    const std::string key = kv.substr(0, kv.find('='));
    bool shadowed = key == "AQS_JOB_TOKEN" || key == "AQS_CPUS" || key == "AQS_HOSTS";
    for (const auto& [k, v] : extra) shadowed = shadowed || k == key;
    for (const auto& [k, v] : ours) shadowed = shadowed || k == key;
    if (!shadowed) env.push_back(kv);
  }
  for (const auto& [k, v] : ours) env.push_back(k + "=" + v);
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  if (l.job_token) env.push_back("AQS_JOB_TOKEN=" + *l.job_token);
  return env;
}

}  // namespace

launch_spec job_environment(const protocol::launch& l, const node_environment& node, bool as_root,
                            const std::filesystem::path& mpi_dir, const std::function<void(const std::string&)>& warn) {
  launch_spec spec;
  if (as_root) {
    spec.uid = static_cast<uid_t>(l.uid);
    spec.gid = static_cast<gid_t>(l.gid);
  }
  spec.workdir = l.job.workdir;
  // The submitter's (old clients send none: the traditional 0022).
  spec.umask = static_cast<mode_t>(l.job.umask.value_or(022) & 0777);
  for (auto c : l.local_cpus) spec.cpus.push_back(static_cast<int>(c));
  spec.env = job_variables(l, node, mpi_dir, warn);
  return spec;
}

}  // namespace aqs::node
