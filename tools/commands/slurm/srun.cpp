// aqs-srun: Slurm's srun over AQS. It runs the command the way frun does (an
// interactive job: waits for processors, streams the output, exits with the
// job's code) by handing frun the translated command line: Slurm options that
// change nothing AQS does (--cpu-bind, --mpi=TYPE, --label, --pty, ...) are
// dropped with a warning. Inside a running job (SLURM_JOB_ID or AQS_JOB_ID
// set) srun should start a step in the job's allocation: it does whatever
// frun does there (a step once frun has them; until then a job of its own).
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "client/job_options.hpp"
#include "client/slurm_client.hpp"

using namespace aqs;

namespace {

bool frun_knows(const std::string& spelled, const std::optional<std::string>& value) {
  return slurm::parser_accepts(cmdline::parse_frun_command_line, spelled, value, "true");
}

// frun beside this program (its real file: a symlink "srun" in another
// directory still finds it), else frun on the PATH.
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

}  // namespace

int main(int argc, char** argv) {
  const std::string name = slurm::command_name(argv[0], "srun");
  return slurm::run_slurm(name, [&] {
    const std::vector<std::string> raw(argv + 1, argv + argc);
    for (const auto& a : raw) {
      if (a == "--help" || a == "-h" || a == "--usage") {
        std::fputs(slurm::srun_usage().c_str(), stdout);
        return 0;
      }
      if (a == "-V" || a == "--version") {
        std::printf("%s\n", slurm::k_version_line);
        return 0;
      }
      if (a == "--" || !a.starts_with("-")) break;
    }
    // srun's --mpi takes a plugin name; frun's --mpi is a flag: always Slurm's.
    const slurm::translated_args t = slurm::translate_submit_args(raw, true, [](const std::string& o, const auto& v) {
      if (o == "--mpi") return false;
      return frun_knows(o, v);
    });
    for (const auto& w : t.warnings) std::fprintf(stderr, "%s: warning: %s\n", name.c_str(), w.c_str());
    // Checked here so that errors say "srun:".
    (void)cmdline::parse_frun_command_line(t.args);
    const std::string frun = find_frun();
    std::vector<std::string> words{"frun"};
    words.insert(words.end(), t.args.begin(), t.args.end());
    std::vector<char*> exec_argv;
    for (auto& w : words) exec_argv.push_back(w.data());
    exec_argv.push_back(nullptr);
    std::fflush(stderr);
    if (frun.find('/') != std::string::npos) {
      ::execv(frun.c_str(), exec_argv.data());
    } else {
      ::execvp(frun.c_str(), exec_argv.data());
    }
    throw slurm::command_error("cannot run " + frun + ": " + std::strerror(errno));
  });
}
