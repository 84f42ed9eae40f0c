// job_script: spool checks, and script files written so that nobody else's file or link is ever written through.
#include "job_script.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
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

namespace {

bool is_cluster_id(const std::string& s) {
  if (s.size() != 32) return false;
  for (const char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string read_small_file(int fd) {
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// "pid P" / "cluster C" lines of a lock file.
std::string line_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + " ", 0) == 0) return line.substr(key.size() + 1);
  }
  return {};
}

}  // namespace

std::filesystem::path cluster_spool(const std::filesystem::path& spool, const std::string& cluster_id) {
  if (!is_cluster_id(cluster_id)) throw std::invalid_argument("not a cluster id: '" + cluster_id + "'");
  return spool / ("cluster-" + cluster_id);
}

std::optional<std::string> spool_cluster(const std::filesystem::path& spool) {
  std::ifstream in(spool / "cluster");
  std::string id;
  if (!(in >> id) || !is_cluster_id(id)) return std::nullopt;
  return id;
}

bool set_spool_cluster(const std::filesystem::path& spool, const std::string& cluster_id) {
  const auto tmp = spool / "cluster.tmp";
  ::unlink(tmp.c_str());
  {
    const unique_fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd) return false;
    const std::string text = cluster_id + "\n";
    if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) return false;
  }
  return ::rename(tmp.c_str(), (spool / "cluster").c_str()) == 0;
}

std::vector<std::int64_t> job_records(const std::filesystem::path& dir) {
  std::vector<std::int64_t> ids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("job-", 0) != 0 || e.path().extension() != ".step") continue;
    try {
      ids.push_back(std::stoll(e.path().stem().string().substr(4)));
    } catch (const std::exception&) {
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

spool_lock::spool_lock(const std::filesystem::path& spool) : path_(spool / "agent.lock") {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open " + path_.string() + ": " + std::strerror(errno));
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (::fcntl(fd_, F_SETLK, &fl) != 0) {
    const int err = errno;
    struct flock holder {};
    holder.l_type = F_WRLCK;
    holder.l_whence = SEEK_SET;
    const bool known = ::fcntl(fd_, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK;
    const std::string text = read_small_file(fd_);
    ::close(fd_);
    fd_ = -1;
    if (err != EAGAIN && err != EACCES) {
      throw std::runtime_error("cannot lock " + path_.string() + ": " + std::strerror(err));
    }
    std::string cluster = line_value(text, "cluster");
    if (!is_cluster_id(cluster)) cluster = "not yet known";
    throw std::runtime_error("spool " + spool.string() + " is held by another aqs-node (pid " +
                             (known ? std::to_string(holder.l_pid) : std::string("unknown")) + ", cluster " + cluster +
                             "): give each agent a --spool of its own");
  }
  describe("");
}

spool_lock::~spool_lock() {
  if (fd_ >= 0) ::close(fd_);
}

void spool_lock::describe(const std::string& cluster_id) {
  if (fd_ < 0) return;
  const std::string text = "pid " + std::to_string(::getpid()) + "\ncluster " + cluster_id + "\n";
  if (::ftruncate(fd_, 0) != 0) return;
  (void)!::pwrite(fd_, text.data(), text.size(), 0);
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
