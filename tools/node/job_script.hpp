// job_script: the spool directory and what a launch leaves in it per job (the script, the MPI launch files).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace aqs::node {

// Creates the spool directory (and its parents) if it is missing and sets
// its mode to 0711. Throws std::runtime_error if it cannot, or if it exists
// but is not a directory of this process's user.
void prepare_spool(const std::filesystem::path& spool);

// The spool keeps each cluster's jobs apart: `spool/cluster-ID/` holds the
// records of the jobs the agent started for cluster ID (the id aqsd taught
// it at registration), `spool/cluster` names the cluster it served last,
// and `spool/agent.lock` is held (a POSIX record lock) by the agent that
// uses the spool, and names it and its cluster. Job records at the top of
// the spool were left by an agent older than cluster ids: nobody adopts them.
std::filesystem::path cluster_spool(const std::filesystem::path& spool, const std::string& cluster_id);
// The cluster id `spool/cluster` names, if it is there and well formed.
std::optional<std::string> spool_cluster(const std::filesystem::path& spool);
// Records `cluster_id` in `spool/cluster` (atomically). False if it cannot.
bool set_spool_cluster(const std::filesystem::path& spool, const std::string& cluster_id);
// The job ids of the step records (`job-N.step`) in `dir`, ascending.
std::vector<std::int64_t> job_records(const std::filesystem::path& dir);

// The agent's hold on its spool: while it lives no other agent (of this
// cluster or of another) can use the same directory. Not inherited by the
// job steps the agent forks (a POSIX lock belongs to the process), so it
// ends with the agent.
class spool_lock {
public:
  // Throws std::runtime_error with one line if the lock file cannot be
  // opened, or if another process holds it: "spool DIR is held by aqs-node
  // pid P of cluster C ...".
  explicit spool_lock(const std::filesystem::path& spool);
  ~spool_lock();
  spool_lock(const spool_lock&) = delete;
  spool_lock& operator=(const spool_lock&) = delete;
  // Writes this agent's pid and its cluster ("" until it registers) into the lock file.
  void describe(const std::string& cluster_id);

private:
  std::filesystem::path path_;
  int fd_ = -1;
};

std::filesystem::path script_path(const std::filesystem::path& spool, std::int64_t job_id);
// The directory of the job's hostfile and rankfile (aqs::mpi_adapter).
std::filesystem::path mpi_launch_dir(const std::filesystem::path& spool, std::int64_t job_id);

struct file_owner {
  uid_t uid = 0;
  gid_t gid = 0;
};

// Writes `text` to a fresh file at `path` (mode 0700, the job's user must
// run it), owned by `owner` if given. False if any step fails.
bool write_job_script(const std::filesystem::path& path, const std::string& text,
                      const std::optional<file_owner>& owner);

// The command that runs the script at `path`: a script without a shebang
// runs with /bin/sh, as sbatch scripts do.
std::vector<std::string> script_command(const std::filesystem::path& path, const std::string& text);

// The job's script and MPI launch files, whether or not they are there.
void remove_job_files(const std::filesystem::path& spool, std::int64_t job_id);

// Scripts and MPI launch files in the spool of jobs for which `running`
// says false.
std::vector<std::filesystem::path> stale_job_files(const std::filesystem::path& spool,
                                                   const std::function<bool(std::int64_t)>& running);

}  // namespace aqs::node
