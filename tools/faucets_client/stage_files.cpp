// stage_files: reading staged inputs and writing fetched outputs, confined
// to one directory.
#include "faucets_client/stage_files.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <set>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace aqs::client {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

bool inside(const fs::path& base, const fs::path& p) {
  const std::string b = base.string(), s = p.string();
  return s == b || (s.size() > b.size() && s.compare(0, b.size(), b) == 0 && (b == "/" || s[b.size()] == '/'));
}

std::string read_file(const fs::path& p, const std::string& shown) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw stage_error("staged path '" + shown + "': cannot read it");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::vector<protocol::staged_file> read_stage_in(const fs::path& base_in, const std::vector<std::string>& paths,
                                                 std::size_t max_bytes) {
  std::error_code ec;
  const fs::path base = fs::canonical(base_in, ec);
  if (ec) throw stage_error("the submit directory " + base_in.string() + ": " + ec.message());
  std::vector<protocol::staged_file> out;
  std::set<std::string> seen;
  std::size_t total = 0;
  auto add = [&](const std::string& rel, const fs::path& real) {
    if (auto why = protocol::stage_path_problem(rel)) throw stage_error(*why);
    if (!seen.insert(rel).second) return;
    struct stat st {};
    if (::stat(real.c_str(), &st) != 0) throw stage_error("staged path '" + rel + "': " + errno_text(errno));
    if (!S_ISREG(st.st_mode)) throw stage_error("staged path '" + rel + "' is not a regular file");
    total += static_cast<std::size_t>(st.st_size);
    if (total > max_bytes) {
      throw stage_error("staged files are over the limit of " + std::to_string(max_bytes) + " bytes");
    }
    if (out.size() >= protocol::k_max_stage_files) {
      throw stage_error("more than " + std::to_string(protocol::k_max_stage_files) + " staged files");
    }
    out.push_back(protocol::staged_file{rel, static_cast<std::uint32_t>(st.st_mode & 0777), read_file(real, rel)});
  };
  // Where `rel` (under base) really is: refused when a symlink leads out.
  auto resolve = [&](const std::string& rel) {
    std::error_code e;
    const fs::path real = fs::canonical(base / rel, e);
    if (e) throw stage_error("staged path '" + rel + "': " + e.message());
    if (!inside(base, real) || real == base) {
      throw stage_error("staged path '" + rel + "' leads out of the submit directory (a symlink to " + real.string() +
                        ")");
    }
    return real;
  };
  for (std::string p : paths) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    if (auto why = protocol::stage_path_problem(p)) throw stage_error(*why);
    const fs::path real = resolve(p);
    if (!fs::is_directory(real, ec)) {
      add(p, real);
      continue;
    }
    std::vector<std::string> under;
    for (auto it = fs::recursive_directory_iterator(real, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_directory() && !it->is_symlink()) continue;
      under.push_back(p + "/" + fs::relative(it->path(), real).string());
    }
    if (ec) throw stage_error("staged path '" + p + "': " + ec.message());
    std::sort(under.begin(), under.end());
    for (const auto& rel : under) {
      const fs::path r = resolve(rel);
      if (fs::is_directory(r, ec)) throw stage_error("staged path '" + rel + "' is a symlink to a directory: name it");
      add(rel, r);
    }
  }
  return out;
}

void write_outputs(const fs::path& base, const std::vector<protocol::staged_file>& files) {
  const int root = ::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) throw stage_error("cannot open " + base.string() + ": " + errno_text(errno));
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } root_guard{root};
  // Everything checked before anything is written.
  for (const auto& f : files) {
    if (auto why = protocol::stage_path_problem(f.path)) throw stage_error("output refused: " + *why);
    std::size_t from = 0;
    for (;;) {
      const std::size_t slash = f.path.find('/', from);
      const std::string so_far = f.path.substr(0, slash);
      struct stat st {};
      if (::fstatat(root, so_far.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) break;  // not there yet: made below
      if (S_ISLNK(st.st_mode)) {
        throw stage_error("output '" + f.path + "' refused: '" + so_far + "' here is a symlink (nothing written)");
      }
      if (slash == std::string::npos) {
        if (!S_ISREG(st.st_mode)) throw stage_error("output '" + f.path + "' refused: not a regular file here");
        break;
      }
      if (!S_ISDIR(st.st_mode)) throw stage_error("output '" + f.path + "' refused: '" + so_far + "' is not a directory");
      from = slash + 1;
    }
  }
  for (const auto& f : files) {
    int dir = ::fcntl(root, F_DUPFD_CLOEXEC, 0);
    std::size_t from = 0;
    for (std::size_t slash = f.path.find('/'); slash != std::string::npos; slash = f.path.find('/', from)) {
      const std::string part = f.path.substr(from, slash - from);
      if (::mkdirat(dir, part.c_str(), 0755) != 0 && errno != EEXIST) {
        ::close(dir);
        throw stage_error("output '" + f.path + "': " + errno_text(errno));
      }
      const int next = ::openat(dir, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      ::close(dir);
      if (next < 0) throw stage_error("output '" + f.path + "': " + errno_text(errno));
      dir = next;
      from = slash + 1;
    }
    const std::string name = f.path.substr(from);
    const int fd = ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, f.mode & 0777);
    ::close(dir);
    if (fd < 0) throw stage_error("output '" + f.path + "': " + errno_text(errno));
    std::size_t done = 0;
    while (done < f.data.size()) {
      const ssize_t n = ::write(fd, f.data.data() + done, f.data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int e = errno;
        ::close(fd);
        throw stage_error("output '" + f.path + "': " + errno_text(e));
      }
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
  }
}

}  // namespace aqs::client
