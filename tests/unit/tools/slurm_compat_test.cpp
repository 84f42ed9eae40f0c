// The compatibility table of the user guide ("Slurm options in AQS") is kept
// true: every row's option is given to sbatch's, srun's or salloc's own
// command-line path (Slurm's option table, then fsub's or frun's parser) and must do what
// the row says: same (acted on), recorded (kept, one warning), ignored
// (dropped, one warning) or refused (one line naming the option once).
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "cmdline/job_options.hpp"
#include "slurm/salloc_session.hpp"
#include "slurm/slurm_client.hpp"
#include "slurm/slurm_commands.hpp"
#include "slurm/srun_step.hpp"

using namespace aqs;

namespace {

struct outcome {
  std::string status;  // same, recorded, ignored, refused
  std::string detail;  // the warning or the error
};

bool fsub_knows(const std::string& spelled, const std::optional<std::string>& value) {
  return slurm::parser_accepts(cmdline::parse_fsub_command_line, spelled, value, "--wrap=true");
}
bool frun_knows(const std::string& spelled, const std::optional<std::string>& value) {
  if (spelled == "--mpi") return false;
  return slurm::parser_accepts(cmdline::parse_frun_command_line, spelled, value, "true");
}

// What sbatch and srun do with `args` before they talk to aqsd.
outcome try_option(const std::string& command, std::vector<std::string> args) {
  try {
    if (command == "sbatch") {
      args.emplace_back("--wrap=true");
      auto t = slurm::translate_submit_args(args, false, fsub_knows);
      if (!t.warnings.empty()) return {"ignored", t.warnings.front()};
      (void)slurm::take_flag(t.args, {"-W", "--wait"});
      const auto cmd = cmdline::parse_fsub_command_line(t.args);
      if (!cmd.warnings.empty()) return {"recorded", cmd.warnings.front()};
      return {"same", ""};
    }
    args.emplace_back("true");
    if (command == "salloc") {
      const auto cmd = slurm::parse_salloc_args(args);
      if (!cmd.warnings.empty()) return {"ignored", cmd.warnings.front()};
      const auto line = cmdline::parse_frun_command_line(cmd.frun_line());
      if (!line.warnings.empty()) return {"recorded", line.warnings.front()};
      return {"same", ""};
    }
    const auto t = slurm::translate_submit_args(args, true, frun_knows);
    if (!t.warnings.empty()) return {"ignored", t.warnings.front()};
    const std::span<const std::string> all(t.args);
    const auto tasks = slurm::split_task_options(all.first(t.command_at));
    std::vector<std::string> line = tasks.rest;
    line.insert(line.end(), t.args.begin() + static_cast<std::ptrdiff_t>(t.command_at), t.args.end());
    const auto cmd = cmdline::parse_frun_command_line(line);
    if (!cmd.warnings.empty()) return {"recorded", cmd.warnings.front()};
    return {"same", ""};
  } catch (const std::exception& e) {
    return {"refused", e.what()};
  }
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

TEST_CASE("the user guide's table of Slurm options says what sbatch, srun and salloc do with each") {
  std::ifstream in(std::string(AQS_SOURCE_DIR) + "/docs/user-guide.md");
  REQUIRE(in);
  const std::regex row(R"(\| `(sbatch|srun|salloc)` \| `([^`]+)` \| (same|recorded|ignored|refused) \|.*)");
  int rows = 0, refused = 0, salloc_rows = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    ++rows;
    if (m[1] == "salloc") ++salloc_rows;
    const std::string command = m[1];
    const std::string arg = m[2];
    const outcome o = try_option(command, split_words(arg));
    CAPTURE(line);
    CAPTURE(o.detail);
    CHECK(o.status == std::string(m[3]));
    if (o.status == "refused") {
      ++refused;
      // One line, naming the option once.
      std::string name = split_words(arg).front();
      name = name.substr(0, name.find('='));
      CHECK(o.detail.find('\n') == std::string::npos);
      const auto first = o.detail.find(name);
      CHECK(first != std::string::npos);
      CHECK(o.detail.find("(" + name + ")", first + 1) == std::string::npos);
    }
  }
  CHECK(rows >= 40);
  CHECK(salloc_rows >= 8);
  CHECK(refused >= 5);
}
