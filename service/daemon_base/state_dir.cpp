// state_dir: creating the state directory and the cluster key safely.
#include "daemon_base/state_dir.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "protocol/auth.hpp"

namespace aqs::daemon {

namespace fs = std::filesystem;

void state_dir::prepare() const {
  std::error_code ec;
  if (!fs::exists(root, ec)) {
    fs::create_directories(root, ec);
    if (ec) throw state_dir_error("cannot create state directory " + root.string() + ": " + ec.message());
    ::chmod(root.c_str(), 0755);
  }
  if (!fs::is_directory(root, ec)) throw state_dir_error("state directory " + root.string() + " is not a directory");
}

void state_dir::write_file(const fs::path& path, const std::string& text, unsigned mode) {
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) throw state_dir_error("cannot write " + tmp.string() + ": " + std::strerror(errno));
  std::size_t off = 0;
  bool ok = true;
  while (ok && off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    ok = n > 0;
    if (ok) off += static_cast<std::size_t>(n);
  }
  ok = ok && ::fchmod(fd, mode) == 0 && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw state_dir_error("cannot write " + path.string() + ": " + std::strerror(errno));
  }
}

std::string state_dir::load_or_create_key() const {
  const fs::path path = key_file();
  struct stat sb {};
  if (::lstat(path.c_str(), &sb) != 0) {
    if (errno != ENOENT) throw state_dir_error("cannot read " + path.string() + ": " + std::strerror(errno));
    write_file(path, protocol::make_nonce() + "\n", 0600);
    if (::lstat(path.c_str(), &sb) != 0) throw state_dir_error("cannot create " + path.string());
  }
  if (!S_ISREG(sb.st_mode)) throw state_dir_error(path.string() + " is not a regular file");
  if ((sb.st_mode & 077) != 0) {
    std::ostringstream mode;
    mode << std::oct << (sb.st_mode & 0777);
    throw state_dir_error(path.string() + " is open to other users (mode 0" + mode.str() + "): chmod 600 it");
  }
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string key = ss.str();
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  if (key.empty()) throw state_dir_error(path.string() + " is empty");
  return key;
}

}  // namespace aqs::daemon
