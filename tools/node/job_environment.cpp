// job_environment: AQS's variables for a job, and the MPI placement that lets its plain `mpirun ./app` use its cpus.
#include "job_environment.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

#include "aqs/mpi_adapter/launch.hpp"
#include "core/geometry.hpp"
#include "core/hostlist.hpp"

namespace aqs::node {

namespace {

using variables = std::vector<std::pair<std::string, std::string>>;

// The Slurm commands a job finds under Slurm's names (aqs-<name>).
constexpr std::array<std::string_view, 9> k_slurm_names = {"srun",  "sbatch", "squeue", "scancel", "scontrol",
                                                           "sacct", "salloc", "sstat",  "sinfo"};

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

// The job's nodes in map order, their processors and their tasks (Slurm's
// layout: geometry.hpp), from the launch's "node2:0-3,node3:0-1".
struct job_layout {
  std::vector<std::string> nodes;
  std::vector<std::size_t> procs;
  std::vector<std::size_t> tasks;
  std::size_t ntasks = 0;
  std::size_t cpus_per_task = 1;
};

std::size_t count_ranges(std::string_view ranges) {
  std::size_t n = 0;
  const auto dash = ranges.find('-');
  if (dash == std::string_view::npos) return 1;
  try {
    n = std::stoul(std::string(ranges.substr(dash + 1))) - std::stoul(std::string(ranges.substr(0, dash))) + 1;
  } catch (const std::exception&) {
    n = 1;
  }
  return n;
}

job_layout layout_of(const protocol::launch& l) {
  job_layout out;
  std::string_view rest(l.nodelist);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const auto colon = item.rfind(':');
    if (colon == std::string_view::npos) continue;
    const std::string name(item.substr(0, colon));
    const std::size_t n = count_ranges(item.substr(colon + 1));
    if (!out.nodes.empty() && out.nodes.back() == name) {
      out.procs.back() += n;
    } else {
      out.nodes.push_back(name);
      out.procs.push_back(n);
    }
  }
  const auto& g = l.job.geometry;
  if (g && !l.job.adaptive) {
    out.cpus_per_task = static_cast<std::size_t>(g->cpus_per_task);
    out.ntasks = static_cast<std::size_t>(g->ntasks);
    out.tasks = core::task_layout(out.procs, out.cpus_per_task, out.ntasks,
                                  static_cast<std::size_t>(g->ntasks_per_node.value_or(0)));
  } else if (g && g->cpus_per_task > 1) {
    // An adaptive job with -c: aqsd grants it whole ranks of cpus_per_task
    // processors on one node, so each node's share is its tasks.
    out.cpus_per_task = static_cast<std::size_t>(g->cpus_per_task);
    for (const std::size_t n : out.procs) out.tasks.push_back(n / out.cpus_per_task);
    out.ntasks = static_cast<std::size_t>(l.nprocs) / out.cpus_per_task;
  } else {
    out.tasks = out.procs;
    out.ntasks = static_cast<std::size_t>(l.nprocs);
  }
  return out;
}

// The processors of each rank when a rank is not one processor: per node,
// its first tasks * cpus_per_task processors in map order, cpus_per_task each.
std::vector<std::vector<std::size_t>> rank_processors(const job_layout& lay) {
  std::vector<std::vector<std::size_t>> ranks;
  bool plain = lay.cpus_per_task == 1;
  for (std::size_t k = 0; k < lay.procs.size(); ++k) plain = plain && lay.tasks[k] == lay.procs[k];
  if (plain) return ranks;
  std::size_t base = 0;
  for (std::size_t k = 0; k < lay.procs.size(); ++k) {
    for (std::size_t t = 0; t < lay.tasks[k]; ++t) {
      std::vector<std::size_t> r;
      for (std::size_t c = 0; c < lay.cpus_per_task; ++c) r.push_back(base + t * lay.cpus_per_task + c);
      ranks.push_back(std::move(r));
    }
    base += lay.procs[k];
  }
  return ranks;
}

// Slurm's variables, as sbatch gives them to a batch script (the names
// scripts and workflow tools read), from the launch and its geometry.
variables slurm_variables(const protocol::launch& l, const node_environment& node, const job_layout& lay) {
  const std::string id = std::to_string(l.job_id);
  const std::string hosts = core::compress_hostlist(lay.nodes);  // sorted, as Slurm's
  const std::string nnodes = std::to_string(lay.nodes.size());
  std::string submit_dir = l.job.workdir;
  for (const auto& kv : l.job.environment) {
    if (kv.starts_with("PWD=")) submit_dir = kv.substr(4);
  }
  std::size_t here = 0;
  for (std::size_t k = 0; k < lay.nodes.size(); ++k) {
    if (lay.nodes[k] == node.node_name) here = lay.procs[k];
  }
  variables v = {{"SLURM_JOB_ID", id},
                 {"SLURM_JOBID", id},
                 {"SLURM_JOB_NAME", l.job.name},
                 {"SLURM_JOB_USER", l.user},
                 {"SLURM_JOB_UID", std::to_string(l.uid)},
                 {"SLURM_JOB_GID", std::to_string(l.gid)},
                 {"SLURM_NTASKS", std::to_string(lay.ntasks)},
                 {"SLURM_NPROCS", std::to_string(lay.ntasks)},
                 {"SLURM_JOB_NODELIST", hosts},
                 {"SLURM_NODELIST", hosts},
                 {"SLURM_NNODES", nnodes},
                 {"SLURM_JOB_NUM_NODES", nnodes},
                 {"SLURM_TASKS_PER_NODE", core::tasks_per_node_text(lay.tasks)},
                 {"SLURM_JOB_CPUS_PER_NODE", core::tasks_per_node_text(lay.procs)},
                 {"SLURM_CPUS_ON_NODE", std::to_string(here)},
                 {"SLURM_SUBMIT_DIR", submit_dir},
                 {"SLURM_NODEID", "0"},
                 {"SLURM_PROCID", "0"},
                 {"SLURM_LOCALID", "0"},
                 {"SLURMD_NODENAME", node.node_name},
                 {"SLURM_CLUSTER_NAME", "aqs"},
                 // squeue's name of a job without -p (slurm_format.hpp's
                 // k_default_partition), so the two agree.
                 {"SLURM_JOB_PARTITION", l.job.geometry ? l.job.geometry->partition.value_or("main") : "main"}};
  if (const auto& g = l.job.geometry) {
    if (g->partition) v.back().second = *g->partition;
    if (g->cpus_per_task > 1) {
      v.emplace_back("SLURM_CPUS_PER_TASK", std::to_string(g->cpus_per_task));
    }
    if (g->ntasks_per_node) v.emplace_back("SLURM_NTASKS_PER_NODE", std::to_string(*g->ntasks_per_node));
    if (g->mem_per_node_mb) v.emplace_back("SLURM_MEM_PER_NODE", std::to_string(*g->mem_per_node_mb));
    if (g->mem_per_cpu_mb) v.emplace_back("SLURM_MEM_PER_CPU", std::to_string(*g->mem_per_cpu_mb));
    if (g->gpus_per_node) v.emplace_back("SLURM_GPUS_ON_NODE", std::to_string(*g->gpus_per_node));
    if (g->array_task_id) {
      const std::string array_id = std::to_string(g->array_job_id.value_or(l.job_id));
      v.emplace_back("SLURM_ARRAY_JOB_ID", array_id);
      v.emplace_back("SLURM_ARRAY_TASK_ID", std::to_string(*g->array_task_id));
      v.emplace_back("AQS_ARRAY_JOB_ID", array_id);
      v.emplace_back("AQS_ARRAY_TASK_ID", std::to_string(*g->array_task_id));
      if (g->array_task_count) v.emplace_back("SLURM_ARRAY_TASK_COUNT", std::to_string(*g->array_task_count));
    }
    for (const auto& r : g->recorded) {
      if (r.starts_with("account=")) v.emplace_back("SLURM_JOB_ACCOUNT", r.substr(8));
      if (r.starts_with("qos=")) v.emplace_back("SLURM_JOB_QOS", r.substr(4));
    }
  }
  // OpenMPI must not take these for a Slurm allocation it should launch
  // into with srun: AQS's hostfile, rankfile and aqs-rsh do that.
  v.emplace_back("OMPI_MCA_ras", "^slurm");
  v.emplace_back("OMPI_MCA_plm", "^slurm");
  v.emplace_back("OMPI_MCA_ess", "^slurm");
  return v;
}

// The job's plain `mpirun ./app` starts one rank per processor of its map
// on that processor's host (aqs::mpi_adapter's hostfile and variables;
// daemons on other hosts through aqs-rsh). A rigid job's rankfile binds
// each rank to its cpu; an adaptive job's shim pins its ranks itself and
// spawns more on the processors it gains, on any host.
variables mpi_placement(const protocol::launch& l, const node_environment& node, const std::filesystem::path& mpi_dir,
                        const job_layout& lay, const std::function<void(const std::string&)>& warn) {
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
      // An adaptive job with -c too: its mpirun starts one rank per C
      // processors (the hostfile's slots), which its shim then pins.
      a.ranks = rank_processors(lay);
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

// Where the aqs- Slurm commands are: beside this program (an installation),
// else the configured bin directory, else the build tree aqs-node was built
// in. "" when none of them has aqs-srun.
std::filesystem::path aqs_commands_dir() {
  std::vector<std::filesystem::path> candidates;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(self.parent_path());
#ifdef AQS_INSTALL_BINDIR
  candidates.emplace_back(AQS_INSTALL_BINDIR);
#endif
#ifdef AQS_SLURM_BUILD_DIR
  candidates.emplace_back(AQS_SLURM_BUILD_DIR);
#endif
  for (const auto& dir : candidates) {
    if (::access((dir / "aqs-srun").c_str(), X_OK) == 0) return dir;
  }
  return {};
}

// Makes `dir` hold links srun -> .../aqs-srun, ... for every Slurm name that
// has an aqs- command in `bin`: a directory of this agent's user (root's
// when it runs as root), 0755, that no job's user can change, since it comes
// first on every job's PATH. Returns why not, or "".
std::string make_slurm_names(const std::filesystem::path& dir, const std::filesystem::path& bin) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return "cannot create " + dir.string() + ": " + std::strerror(errno);
  struct stat sb {};
  if (::lstat(dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != ::geteuid()) {
    return dir.string() + " is not a directory of this agent's user: not using it";
  }
  if ((sb.st_mode & 07777) != 0755 && ::chmod(dir.c_str(), 0755) != 0) {
    return "cannot set the mode of " + dir.string() + ": " + std::strerror(errno);
  }
  for (const auto& name : k_slurm_names) {
    const auto target = bin / ("aqs-" + std::string(name));
    const auto link = dir / std::string(name);
    std::error_code ec;
    const bool have = ::access(target.c_str(), X_OK) == 0;
    if (std::filesystem::is_symlink(link, ec) && have && std::filesystem::read_symlink(link, ec) == target && !ec) continue;
    ::unlink(link.c_str());
    if (have && ::symlink(target.c_str(), link.c_str()) != 0) {
      return "cannot create " + link.string() + ": " + std::strerror(errno);
    }
  }
  return {};
}

// PATH=DIR:REST, DIR once.
std::string path_with_first(const std::string& dir, std::string_view path) {
  std::string out = dir;
  while (!path.empty()) {
    const auto colon = path.find(':');
    const std::string_view item = path.substr(0, colon);
    path = colon == std::string_view::npos ? std::string_view() : path.substr(colon + 1);
    if (item == dir) continue;
    out += ':';
    out += item;
  }
  return out;
}

std::vector<std::string> job_variables(const protocol::launch& l, const node_environment& node,
                                       const std::filesystem::path& mpi_dir,
                                       const std::function<void(const std::string&)>& warn,
                                       const std::filesystem::path& slurm_names_dir) {
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
  const job_layout lay = layout_of(l);
  // The shim's processors per rank: it runs and pins one rank per C
  // processors of a node, and grows and shrinks by whole ranks.
  if (l.job.adaptive && lay.cpus_per_task > 1) {
    extra.emplace_back("AQS_CPUS_PER_TASK", std::to_string(lay.cpus_per_task));
  }
  if (l.uid == 0) {
    extra.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
    extra.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  }
  for (auto& kv : slurm_variables(l, node, lay)) extra.push_back(std::move(kv));
  for (auto& kv : mpi_placement(l, node, mpi_dir, lay, warn)) extra.push_back(std::move(kv));
  // The job's own variables may be another job's (fsub run inside a job):
  // that job's token and placement never pass on, even where this launch
  // sets none, and AQS's variables win over the job's.
  std::vector<std::string> env;
  for (const auto& kv : l.job.environment) {
    const std::string key = kv.substr(0, kv.find('='));
    bool shadowed =
        key == "AQS_JOB_TOKEN" || key == "AQS_CPUS" || key == "AQS_HOSTS" || key == "AQS_CPUS_PER_TASK";
    for (const auto& [k, v] : extra) shadowed = shadowed || k == key;
    for (const auto& [k, v] : ours) shadowed = shadowed || k == key;
    if (!shadowed) env.push_back(kv);
  }
  for (const auto& [k, v] : ours) env.push_back(k + "=" + v);
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  if (l.job_token) env.push_back("AQS_JOB_TOKEN=" + *l.job_token);
  // Slurm's names are AQS's inside every job, whatever else the node has
  // installed (a site moving from Slurm keeps Slurm's client): the agent's
  // directory of links comes first on the job's PATH.
  if (!slurm_names_dir.empty()) {
    bool found = false;
    for (auto& kv : env) {
      if (!kv.starts_with("PATH=")) continue;
      kv = "PATH=" + path_with_first(slurm_names_dir.string(), std::string_view(kv).substr(5));
      found = true;
    }
    if (!found) env.push_back("PATH=" + slurm_names_dir.string() + ":/usr/local/bin:/usr/bin:/bin");
  }
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
  std::filesystem::path names;
  if (!mpi_dir.empty()) {
    // The spool's slurm-bin (mpi_dir is the spool's job-N.mpi).
    const auto bin = aqs_commands_dir();
    const auto dir = mpi_dir.parent_path() / "slurm-bin";
    static bool warned = false;  // once per agent, not once per job
    if (bin.empty()) {
      if (warn && !std::exchange(warned, true)) warn("no aqs-srun beside aqs-node or in the bin directory: jobs get no Slurm names on their PATH");
    } else if (const std::string why = make_slurm_names(dir, bin); !why.empty()) {
      if (warn && !std::exchange(warned, true)) warn(why + " (jobs get no Slurm names on their PATH)");
    } else {
      names = dir;
    }
  }
  spec.env = job_variables(l, node, mpi_dir, warn, names);
  return spec;
}

}  // namespace aqs::node
