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
