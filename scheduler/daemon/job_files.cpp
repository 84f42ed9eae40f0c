// job_files: staged files in a forwarded job's directory, written and read
// as the job's user (setfsuid on this thread), never following a symlink.
#include "daemon/job_files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <dirent.h>
#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

namespace aqs::daemon {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

class fd_guard {
public:
  explicit fd_guard(int fd = -1) noexcept : fd_(fd) {}
  ~fd_guard() {
    if (fd_ >= 0) ::close(fd_);
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const noexcept { return fd_; }
  void reset(int fd) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_;
};

// This thread's file-system identity is `o`'s while it lives (aqsd as
// root); aqsd not root may act only for its own user.
class as_owner {
public:
  explicit as_owner(stage_owner o) {
    if (::geteuid() != 0) {
      if (o.uid != ::geteuid()) {
        throw stage_error("aqsd does not run as root: it stages files only for its own user (uid " +
                          std::to_string(::geteuid()) + ")");
      }
      return;
    }
    if (o.uid == 0) throw stage_error("staged files are never written as root");
    old_gid_ = ::setfsgid(o.gid);
    old_uid_ = ::setfsuid(o.uid);
    if (::setfsuid(o.uid) != static_cast<int>(o.uid) || ::setfsgid(o.gid) != static_cast<int>(o.gid)) {
      restore();
      throw stage_error("cannot act as uid " + std::to_string(o.uid));
    }
    switched_ = true;
  }
  ~as_owner() {
    if (switched_) restore();
  }
  as_owner(const as_owner&) = delete;
  as_owner& operator=(const as_owner&) = delete;

private:
  void restore() noexcept {
    ::setfsuid(static_cast<uid_t>(old_uid_));
    ::setfsgid(static_cast<gid_t>(old_gid_));
  }
  int old_uid_ = 0, old_gid_ = 0;
  bool switched_ = false;
};

void write_all(int fd, const std::string& data, const std::string& path) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw stage_error("staged file '" + path + "': " + errno_text(errno));
    done += static_cast<std::size_t>(n);
  }
}

// Writes one file below the directory `base` (a path the rule accepted),
// every component opened without following a symlink.
void write_below(int base, const protocol::staged_file& f) {
  fd_guard dir(::fcntl(base, F_DUPFD_CLOEXEC, 0));
  std::size_t from = 0;
  for (std::size_t slash = f.path.find('/'); slash != std::string::npos; slash = f.path.find('/', from)) {
    const std::string part = f.path.substr(from, slash - from);
    if (::mkdirat(dir.get(), part.c_str(), 0755) != 0 && errno != EEXIST) {
      throw stage_error("staged file '" + f.path + "': cannot make '" + part + "': " + errno_text(errno));
    }
    const int next = ::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) throw stage_error("staged file '" + f.path + "': '" + part + "' is not a directory of the job's");
    dir.reset(next);
    from = slash + 1;
  }
  const std::string name = f.path.substr(from);
  fd_guard out(::openat(dir.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (out.get() < 0) throw stage_error("staged file '" + f.path + "': " + errno_text(errno));
  write_all(out.get(), f.data, f.path);
  if (::fchmod(out.get(), f.mode & 0777) != 0) throw stage_error("staged file '" + f.path + "': " + errno_text(errno));
}

struct walk {
  std::size_t max_bytes = 0, total = 0;
  std::vector<protocol::staged_file> files;
};

void read_below(int dirfd, const std::string& prefix, int depth, walk& w) {
  if (depth > 32) return;
  const int again = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (again < 0) throw stage_error("cannot read the job's directory: " + errno_text(errno));
  DIR* d = ::fdopendir(again);
  if (d == nullptr) {
    ::close(again);
    throw stage_error("cannot read the job's directory: " + errno_text(errno));
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  for (const auto& n : names) {
    const std::string rel = prefix.empty() ? n : prefix + "/" + n;
    if (protocol::stage_path_problem(rel)) continue;  // a name no hop would take: left there
    struct stat st {};
    if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      fd_guard sub(::openat(dirfd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.get() >= 0) read_below(sub.get(), rel, depth + 1, w);
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;  // symlinks, fifos, sockets: never followed, never sent
    fd_guard in(::openat(dirfd, n.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (in.get() < 0) continue;  // not readable by its owner: not an output
    struct stat st2 {};
    if (::fstat(in.get(), &st2) != 0 || !S_ISREG(st2.st_mode)) continue;
    if (w.files.size() + 1 > protocol::k_max_stage_files) {
      throw stage_error("the job's directory holds more than " + std::to_string(protocol::k_max_stage_files) + " files");
    }
    protocol::staged_file f;
    f.path = rel;
    f.mode = st2.st_mode & 0777;
    char buf[65536];
    for (;;) {
      const ssize_t got = ::read(in.get(), buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw stage_error("output '" + rel + "': " + errno_text(errno));
      if (got == 0) break;
      w.total += static_cast<std::size_t>(got);
      if (w.total > w.max_bytes) {
        throw stage_error("the job's outputs are over the limit of " + std::to_string(w.max_bytes) +
                          " bytes; they stay in its directory on the cluster");
      }
      f.data.append(buf, static_cast<std::size_t>(got));
    }
    w.files.push_back(std::move(f));
  }
}

}  // namespace

fs::path stage_dir_of(const fs::path& root, std::int64_t fid, std::int64_t attempt) {
  return root / ("f" + std::to_string(fid) + "." + std::to_string(attempt));
}

fs::path stage_in(const fs::path& root, std::int64_t fid, std::int64_t attempt, stage_owner owner,
                  const std::vector<protocol::staged_file>& files) {
  for (const auto& f : files) {
    if (auto why = protocol::stage_path_problem(f.path)) throw stage_error(*why);
  }
  if (owner.uid == 0) throw stage_error("staged files are never written as root");
  if (::geteuid() != 0 && owner.uid != ::geteuid()) {
    throw stage_error("aqsd does not run as root: it stages files only for its own user");
  }
  std::error_code ec;
  if (!fs::exists(root, ec)) {
    fs::create_directories(root, ec);
    if (ec) throw stage_error("cannot make the stage directory " + root.string() + ": " + ec.message());
    ::chmod(root.c_str(), 0711);
  }
  struct stat rs {};
  if (::lstat(root.c_str(), &rs) != 0 || !S_ISDIR(rs.st_mode) || rs.st_uid != ::geteuid()) {
    throw stage_error("the stage directory " + root.string() + " is not a directory of aqsd's own");
  }
  const fs::path final_dir = stage_dir_of(root, fid, attempt);
  struct stat fst {};
  if (::lstat(final_dir.c_str(), &fst) == 0) {
    if (S_ISDIR(fst.st_mode) && fst.st_uid == owner.uid) return final_dir;  // this forward came before
    throw stage_error("the job's directory " + final_dir.string() + " exists and is not the user's");
  }
  const fs::path part = root / ("." + final_dir.filename().string() + ".part");
  if (::lstat(part.c_str(), &fst) == 0) remove_stage_dir(part, owner);
  if (::mkdir(part.c_str(), 0700) != 0) throw stage_error("cannot make " + part.string() + ": " + errno_text(errno));
  try {
    if (::geteuid() == 0 && ::lchown(part.c_str(), owner.uid, owner.gid) != 0) {
      throw stage_error("cannot give " + part.string() + " to uid " + std::to_string(owner.uid) + ": " +
                        errno_text(errno));
    }
    fd_guard base(::open(part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (base.get() < 0) throw stage_error("cannot open " + part.string() + ": " + errno_text(errno));
    {
      as_owner as(owner);
      for (const auto& f : files) write_below(base.get(), f);
    }
    if (::rename(part.c_str(), final_dir.c_str()) != 0) {
      throw stage_error("cannot rename " + part.string() + ": " + errno_text(errno));
    }
  } catch (...) {
    remove_stage_dir(part, owner);
    throw;
  }
  return final_dir;
}

std::vector<protocol::staged_file> collect_outputs(const fs::path& dir, stage_owner owner, std::size_t max_bytes) {
  as_owner as(owner);
  fd_guard base(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (base.get() < 0) throw stage_error("cannot open the job's directory " + dir.string() + ": " + errno_text(errno));
  struct stat st {};
  if (::fstat(base.get(), &st) != 0 || st.st_uid != owner.uid) {
    throw stage_error("the job's directory " + dir.string() + " is not the user's");
  }
  walk w;
  w.max_bytes = max_bytes;
  read_below(base.get(), "", 0, w);
  std::sort(w.files.begin(), w.files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return std::move(w.files);
}

std::string remove_stage_dir(const fs::path& dir, stage_owner owner) {
  std::error_code ec;
  try {
    as_owner as(owner);
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      std::error_code e2;
      fs::remove_all(it->path(), e2);
      if (e2 && !ec) ec = e2;
    }
  } catch (const stage_error& e) {
    return e.what();
  }
  if (ec) return dir.string() + ": " + ec.message();
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return dir.string() + ": " + errno_text(errno);
  return "";
}

}  // namespace aqs::daemon
