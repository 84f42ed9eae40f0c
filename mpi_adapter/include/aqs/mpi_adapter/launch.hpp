// launch: what OpenMPI 4.1's plain `mpirun ./app` needs to start one rank per
// allocated processor, bound to its cpu, on its host (hostfile, rankfile, environment).
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace aqs::mpi_adapter {

// One processor of a job's map: where its rank runs.
struct processor {
  std::string host;  // the node's host name, as mpirun on the first node reaches it
  int cpu = 0;       // Linux cpu number on that host (what sched_setaffinity takes)
  friend bool operator==(const processor&, const processor&) = default;
};

// A job's allocation as mpirun must see it.
struct allocation {
  // In map order: rank i runs on procs[i]. The same (host, cpu) may appear
  // more than once when a node advertises more processors than it has cpus.
  std::vector<processor> procs;
  bool as_root = false;                     // the job runs as uid 0
  std::vector<std::string> tcp_interfaces;  // interfaces (or CIDR nets) for MPI and OpenMPI's own traffic; empty: any
  std::string launch_agent;                 // absolute path of aqs-rsh; required when procs span several hosts
  // An adaptive job: its runtime shim pins every rank itself and starts new
  // ranks (MPI_Comm_spawn) on processors it gains. mpirun gets the hosts and
  // their slots (ranks fill them in map order), no rankfile, no binding, and
  // leave to exceed the slots.
  bool adaptive = false;
  // An adaptive job's other hosts, where it may grow: in the hostfile with
  // no slots, so that mpirun starts its daemon on each at launch and a later
  // spawn finds it there (OpenMPI 4.1 cannot add a host at a spawn: the
  // "add-host" info key leaves the new ranks unreachable).
  std::vector<std::string> spare_hosts;
  // A job's ranks when they are not one per processor (Slurm's tasks with
  // several cpus each, or fewer tasks than processors on a whole node):
  // rank i runs on the processors procs[k] for k in ranks[i], all on one
  // host, bound to all their cpus (an adaptive job's -c: its hostfile gives
  // each host one slot per rank, and its shim pins each rank to its cpus).
  // Empty: rank i on procs[i].
  std::vector<std::vector<std::size_t>> ranks;
};

// An allocation that mpirun could not be told about. what() is one line
// naming the offending processor, host, interface or path.
class allocation_error : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

// The environment that makes mpirun use the launch files, in a fixed order.
using environment = std::vector<std::pair<std::string, std::string>>;

// Where write_launch_files put the files (absolute paths).
struct launch_files {
  std::filesystem::path hostfile;
  std::filesystem::path rankfile;  // empty for an adaptive job
  friend bool operator==(const launch_files&, const launch_files&) = default;
};

// The processors of a job from the node agent's proc_hosts and proc_cpus
// (entry i of each describes processor i of the map). Throws allocation_error
// when the two lists differ in length.
std::vector<processor> make_processors(const std::vector<std::string>& hosts, const std::vector<int>& cpus);

// Throws allocation_error when `a` has no processors; a host name that is
// empty, longer than 255 characters, does not start with a letter or digit,
// or has a character other than letters, digits, '.', '-', '_' (whitespace,
// '=', '#', '@', '+', ':' and control characters all mean something in
// hostfiles, rankfiles or to the launch agent); two hosts that mpirun would
// take for one (it drops everything after the first '.' of a name that is
// not an IPv4 address); a negative cpu; an empty interface or one with a
// character other than letters, digits, '.', '-', '_', '/', ':'; a launch
// agent path that is not absolute or has a character other than letters,
// digits, '/', '.', '-', '_', '+' (mpirun splits plm_rsh_agent at spaces and
// ':'); no launch agent while the processors and spare hosts span several
// hosts; spare hosts for a rigid job, or a spare host that is not a valid
// host name or also holds processors; or, for an adaptive job, a host that
// comes back in map order after another host (its ranks fill each host's
// slots in turn, so rank i would not be on the host of processor i).
void validate(const allocation& a);

// The interface part of validate(): throws allocation_error for an empty
// entry or one with a character other than letters, digits, '.', '-', '_',
// '/', ':' (what a node agent checks once, at its start).
void validate_interfaces(const std::vector<std::string>& interfaces);

// "host slots=N" per host, hosts in order of first appearance, N its number
// of ranks (of processors when `ranks` is empty); then "host slots=0" per spare host. Throws allocation_error
// as validate().
std::string hostfile_text(const allocation& a);

// "rank i=host slot=cpu" per processor (or "slot=cpu,cpu" per rank of
// `ranks`), i in map order; the slots are
// physical (OS) cpu numbers, which launch_environment() tells mpirun. Throws
// allocation_error as validate().
std::string rankfile_text(const allocation& a);

// Writes hostfile_text() and rankfile_text() to `dir`/hostfile and
// `dir`/rankfile, only the hostfile for an adaptive job (creating `dir` if
// needed; the job's own directory, readable
// by the job's user: the files are written 0644, replacing what was there,
// never through a symbolic link). Throws allocation_error as validate(),
// std::filesystem::filesystem_error when `dir` cannot be created, and
// std::system_error naming the file when a file cannot be written.
launch_files write_launch_files(const std::filesystem::path& dir, const allocation& a);

// The variables to add to the job's environment so that mpirun without -np
// or --hostfile starts exactly the ranks of the rankfile, each bound to just
// its cpu (see README.md for each variable and why). Throws allocation_error
// as validate().
environment launch_environment(const allocation& a, const launch_files& files);

// What an adaptive job's mpirun needs whatever its hosts: no binding (the
// shim pins each rank) and leave to start more ranks than slots (spawns).
// Part of launch_environment() for adaptive jobs; on its own for a job whose
// launch files could not be made.
environment adaptive_placement();

}  // namespace aqs::mpi_adapter
