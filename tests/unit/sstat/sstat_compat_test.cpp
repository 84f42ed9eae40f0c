// The user guide's table of Slurm options, its sstat and salloc rows: each
// row's option is given to the command's own option handling, and the
// status the row says (same, ignored, refused) must be what happens.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "cmdline/job_options.hpp"
#include "slurm/slurm_client.hpp"
#include "slurm/slurm_commands.hpp"
#include "slurm/sstat.hpp"

using namespace aqs;

namespace {

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// sstat: "same" when parsed and (for -o) every field measured; "ignored"
// when a field is accepted but printed empty; "refused" when refused.
std::pair<std::string, std::string> try_sstat(const std::vector<std::string>& args) {
  try {
    const auto c = slurm::parse_sstat_command_line(args);
    if (!c.fields.empty()) {
      for (const auto& f : slurm::parse_sstat_fields(c.fields)) {
        if (!slurm::sstat_measures(f.name)) return {"ignored", f.name};
      }
    }
    return {"same", ""};
  } catch (const std::exception& e) {
    return {"refused", e.what()};
  }
}

// salloc: its options go to frun's parser as salloc.cpp gives them.
std::pair<std::string, std::string> try_salloc(std::vector<std::string> args) {
  try {
    auto t = slurm::translate_submit_args(args, false, [](const std::string& o, const std::optional<std::string>& v) {
      return slurm::parser_accepts(cmdline::parse_frun_command_line, o, v, "true");
    });
    if (!t.warnings.empty()) return {"ignored", t.warnings.front()};
    std::vector<std::string> line(t.args.begin(), t.args.begin() + static_cast<std::ptrdiff_t>(t.command_at));
    line.insert(line.end(), {"--no-mpi", "--", "true"});
    const auto cmd = cmdline::parse_frun_command_line(line);
    if (!cmd.warnings.empty()) return {"recorded", cmd.warnings.front()};
    return {"same", ""};
  } catch (const std::exception& e) {
    return {"refused", e.what()};
  }
}

}  // namespace

TEST_CASE("the user guide's sstat and salloc rows say what those commands do with each option") {
  std::ifstream in(std::string(AQS_SOURCE_DIR) + "/docs/user-guide.md");
  REQUIRE(in);
  const std::regex row(R"(\| `(sstat|salloc)` \| `([^`]+)` \| (same|recorded|ignored|refused) \|.*)");
  int sstat_rows = 0, salloc_rows = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    const std::string command = m[1];
    const auto args = split_words(m[2]);
    const auto o = command == "sstat" ? try_sstat(args) : try_salloc(args);
    (command == "sstat" ? sstat_rows : salloc_rows) += 1;
    CAPTURE(line);
    CAPTURE(o.second);
    CHECK(o.first == std::string(m[3]));
    if (o.first == "refused") CHECK(o.second.find('\n') == std::string::npos);
  }
  CHECK(sstat_rows >= 10);
  CHECK(salloc_rows >= 6);
}
