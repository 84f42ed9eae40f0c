// job_files: a forwarded job's own directory on this cluster (fsub -M
// --stage-in): its staged inputs written there as the job's local user
// before it is submitted (the directory becomes its working directory),
// and, when the Faucets server asks after the job's end, the files found
// there read back as that user, then the directory removed.
//
// Where: ROOT/f<FID>.<ATTEMPT>, ROOT (aqsd --faucets-stage-dir, default
// STATE_DIR/faucets-stage) owned by aqsd's user, mode 0711: users reach
// their own job's directory but list nobody's. Each job's directory is
// owned by its local user, mode 0700. Files are created with the thread's
// file-system uid and gid set to the user's (setfsuid), so the kernel
// checks every open as that user and the files are theirs; every path
// component is opened with O_NOFOLLOW below the job's directory, so a
// symlink (the user's own, made while the job ran) never leads out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/types.h>

#include "protocol/staged_files.hpp"

namespace aqs::daemon {

class stage_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct stage_owner {
  uid_t uid = 0;
  gid_t gid = 0;
};

// ROOT/f<fid>.<attempt>.
std::filesystem::path stage_dir_of(const std::filesystem::path& root, std::int64_t fid, std::int64_t attempt);

// Writes `files` into the job's directory as `owner` and returns it. The
// directory is made whole under a temporary name and renamed, so a forward
// that comes twice finds it complete (and keeps it). Throws stage_error
// (one line) for a path the rule refuses (protocol::stage_path_problem),
// a user it may not write as (aqsd not root and `owner` not aqsd's user,
// or root), or any failure; then nothing is left behind.
std::filesystem::path stage_in(const std::filesystem::path& root, std::int64_t fid, std::int64_t attempt,
                               stage_owner owner, const std::vector<protocol::staged_file>& files);

// The regular files under `dir`, read as `owner` (symlinks and other
// kinds are left out, never followed), paths relative to `dir`, sorted.
// Throws stage_error when they total more than `max_bytes` or more than
// protocol::k_max_stage_files, or `dir` cannot be read.
std::vector<protocol::staged_file> collect_outputs(const std::filesystem::path& dir, stage_owner owner,
                                                   std::size_t max_bytes);

// Removes the job's directory: its contents as `owner`, the directory
// itself as aqsd. Best effort; returns why not, or "".
std::string remove_stage_dir(const std::filesystem::path& dir, stage_owner owner);

}  // namespace aqs::daemon
