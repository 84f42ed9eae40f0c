// aqs-salloc: Slurm's salloc over AQS. `salloc [OPTIONS] COMMAND [ARGS...]`
// gets an allocation (frun's options: -n, -N, -c, -t, ...) and runs COMMAND
// once in it, on its first node, where srun starts steps over the
// allocation; its output comes here and salloc exits with COMMAND's code.
// Without a command, the user's shell runs here with the allocation's
// SLURM_* variables, and srun in it starts steps in the allocation
// (client/salloc_session.hpp); `aqs-salloc --aqs-hold` is that
// allocation's own process, not for users.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "cmdline/job_options.hpp"
#include "slurm/salloc_session.hpp"
#include "slurm/slurm_client.hpp"

using namespace aqs;

namespace {

std::string find_frun() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const auto& dir : {self.parent_path(), self.parent_path().parent_path()}) {
      const auto candidate = dir / "frun";
      if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
  }
  return "frun";
}

std::string salloc_usage() {
  return "Usage: salloc [OPTIONS] COMMAND [ARGS...]   (AQS's Slurm-compatible salloc)\n"
         "Gets an allocation (fsub's and frun's options: -n, -N, -c, --ntasks-per-node, -t, -J, -p, ...)\n"
         "and runs COMMAND once in it, on its first node, where `srun` starts steps over the\n"
         "allocation; COMMAND's output comes here and salloc exits with its code.\n"
         "Without a command: your shell ($SHELL) runs here with the allocation's SLURM_* variables,\n"
         "`srun` in it starts steps in the allocation, and the allocation ends with the shell.\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = slurm::command_name(argv[0], "salloc");
  if (argc == 2 && std::string(argv[1]) == slurm::k_holder_argument) {
    // The allocation's own process, inside the job (salloc_session.hpp).
    return slurm::run_slurm("salloc", [&] {
      std::error_code ec;
      const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
      return slurm::run_allocation_holder((self.parent_path() / "aqs-srun").string());
    });
  }
  return slurm::run_slurm(name, [&] {
    const std::vector<std::string> raw(argv + 1, argv + argc);
    for (const auto& a : raw) {
      if (a == "--help" || a == "-h" || a == "--usage") {
        std::fputs(salloc_usage().c_str(), stdout);
        return 0;
      }
      if (a == "-V" || a == "--version") {
        std::printf("%s\n", slurm::k_version_line);
        return 0;
      }
      if (a == "--" || !a.starts_with("-")) break;
    }
    const slurm::salloc_command_line cmd = slurm::parse_salloc_args(raw);
    for (const auto& w : cmd.warnings) std::fprintf(stderr, "%s: warning: %s\n", name.c_str(), w.c_str());
    if (cmd.command.empty()) {
      std::error_code ec;
      const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
      if (ec) throw slurm::command_error("cannot find my own program (/proc/self/exe): " + ec.message());
      return slurm::run_interactive_salloc(cmd.options, self.string());
    }
    const std::vector<std::string> line = cmd.frun_line();
    std::vector<std::string> words{"salloc"};  // frun names itself salloc
    words.insert(words.end(), line.begin(), line.end());
    std::vector<char*> exec_argv;
    for (auto& w : words) exec_argv.push_back(w.data());
    exec_argv.push_back(nullptr);
    std::fflush(stderr);
    const std::string frun = find_frun();
    if (frun.find('/') != std::string::npos) {
      ::execv(frun.c_str(), exec_argv.data());
    } else {
      ::execvp(frun.c_str(), exec_argv.data());
    }
    throw slurm::command_error("cannot run " + frun + ": " + std::strerror(errno));
  });
}
