// job_script: spool checks, and script files written so that nobody else's file or link is ever written through.
#include "job_script.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

#include "unique_fd.hpp"

namespace aqs::node {

namespace {

std::filesystem::path job_file(const std::filesystem::path& spool, std::int64_t job_id, const char* ext) {
  return spool / ("job-" + std::to_string(job_id) + ext);
}

}  // namespace

void prepare_spool(const std::filesystem::path& path) {
  const std::string spool = path.string();
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (::mkdir(spool.c_str(), 0711) != 0 && errno != EEXIST) {
    throw std::runtime_error("cannot create spool directory " + spool + ": " + std::strerror(errno));
  }
  // A root agent writes job scripts here and hands them to their users: a
  // directory someone else prepared (or a symlink to one) would let them
  // redirect those writes onto any file.
  struct stat sb {};
  if (::lstat(spool.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    throw std::runtime_error("spool " + spool + " is not a directory (a symlink?): refusing to use it");
  }
  if (sb.st_uid != ::geteuid()) {
    throw std::runtime_error("spool directory " + spool + " belongs to uid " + std::to_string(sb.st_uid) +
                             ", not to this agent's uid " + std::to_string(::geteuid()) + ": refusing to use it");
  }
  // Jobs run as their users and must be able to execute their own script,
  // but not list or create entries.
  if (::chmod(spool.c_str(), 0711) != 0) {
    throw std::runtime_error("cannot set the mode of spool directory " + spool + ": " + std::strerror(errno));
  }
}

std::filesystem::path script_path(const std::filesystem::path& spool, std::int64_t job_id) {
  return job_file(spool, job_id, ".script");
}

std::filesystem::path mpi_launch_dir(const std::filesystem::path& spool, std::int64_t job_id) {
  return job_file(spool, job_id, ".mpi");
}

bool write_job_script(const std::filesystem::path& path, const std::string& text,
                      const std::optional<file_owner>& owner) {
  // A fresh file, never one that was there (or a link planted in its place).
  ::unlink(path.c_str());
  const unique_fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700));
  if (!fd) return false;
  for (std::size_t off = 0; off < text.size();) {
    const ssize_t n = ::write(fd.get(), text.data() + off, text.size() - off);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return !owner || ::fchown(fd.get(), owner->uid, owner->gid) == 0;
}

std::vector<std::string> script_command(const std::filesystem::path& path, const std::string& text) {
  std::vector<std::string> argv;
  if (text.rfind("#!", 0) != 0) argv.push_back("/bin/sh");
  argv.push_back(path.string());
  return argv;
}

void remove_job_files(const std::filesystem::path& spool, std::int64_t job_id) {
  std::error_code ec;
  std::filesystem::remove(script_path(spool, job_id), ec);
  std::filesystem::remove_all(mpi_launch_dir(spool, job_id), ec);
}

std::vector<std::filesystem::path> stale_job_files(const std::filesystem::path& spool,
                                                   const std::function<bool(std::int64_t)>& running) {
  std::error_code ec;
  std::vector<std::filesystem::path> stale;
  for (const auto& e : std::filesystem::directory_iterator(spool, ec)) {
    const std::string name = e.path().filename().string();
    const auto ext = e.path().extension().string();
    if (name.rfind("job-", 0) != 0 || (ext != ".mpi" && ext != ".script")) continue;
    std::int64_t id = 0;
    try {
      id = std::stoll(e.path().stem().string().substr(4));
    } catch (const std::exception&) {
      continue;
    }
    if (!running(id)) stale.push_back(e.path());
  }
  return stale;
}

}  // namespace aqs::node
