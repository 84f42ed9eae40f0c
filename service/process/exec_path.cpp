// exec_path: execvp's search, done ahead of exec so that its answer can be inspected or reported.
#include "process/exec_path.hpp"

#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include "core/text_util.hpp"

namespace aqs::process {

namespace {

// execvp skips what it cannot run (a directory of that name, a file without
// execute permission) and tries the next entry.
bool executable_file(const std::string& file) {
  struct stat st {};
  return ::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(file.c_str(), X_OK) == 0;
}

// Not lexically normalised: "link/.." must mean what the kernel makes of it.
// An absolute dir or name replaces what comes before it, as for exec.
std::string joined(std::string_view workdir, std::string_view dir, std::string_view name) {
  return (std::filesystem::path(workdir) / std::filesystem::path(dir) / std::filesystem::path(name)).string();
}

}  // namespace

std::optional<std::string> path_variable(const std::vector<std::string>& environment) {
  std::optional<std::string> out;
  for (const auto& kv : environment) {
    if (kv.starts_with("PATH=")) out = kv.substr(5);
  }
  return out;
}

std::optional<std::string> find_executable(std::string_view program, const std::optional<std::string>& path,
                                           std::string_view workdir) {
  if (program.empty()) return std::nullopt;
  if (program.find('/') != std::string_view::npos) {
    std::string file = joined(workdir, "", program);
    if (executable_file(file)) return file;
    return std::nullopt;
  }
  for (const auto dir : core::split(path ? std::string_view(*path) : k_default_exec_path, ':')) {
    std::string file = joined(workdir, dir, program);
    if (executable_file(file)) return file;
  }
  return std::nullopt;
}

}  // namespace aqs::process
