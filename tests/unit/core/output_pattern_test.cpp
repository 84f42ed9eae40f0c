// Unit tests of output file pattern expansion.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/output_pattern.hpp"

using namespace aqs::core;

namespace {

// CHECKs that each pattern expands, with `v`, to its expected name.
void check_expansions(const pattern_values& v, const std::vector<std::pair<std::string, std::string>>& want) {
  for (const auto& [pattern, name] : want) {
    CAPTURE(pattern);
    CHECK(expand_output_pattern(pattern, v) == name);
  }
}

}  // namespace

TEST_CASE("%j, %x and %u expand to job id, job name and user") {
  const pattern_values v{42, "heat", "alice", "node3", 0, -1};
  check_expansions(v, {{std::string(k_default_output_pattern), "aqs-42.out"}, {"%x-%j.%u.log", "heat-42.alice.log"},
                       {"/scratch/%u/%x/%j/out", "/scratch/alice/heat/42/out"}, {"plain.txt", "plain.txt"}});
}

TEST_CASE("%% is a literal percent sign and unknown specifiers stay as written") {
  const pattern_values v{7, "n", "u", "node0", 0, -1};
  check_expansions(v, {{"100%%-%j", "100%-7"}, {"%%j", "%j"}, {"%t-%s-%j", "%t-%s-7"}, {"end%", "end%"},
                       {"end%12", "end%12"}, {"%", "%"}});
}

TEST_CASE("a width between % and the letter zero-pads the value, as in Slurm") {
  const pattern_values v{42, "ab", "u", "n", 0, -1};
  check_expansions(v, {{"job%6j.out", "job000042.out"}, {"%1j", "42"}, {"%4x", "00ab"}});
  CHECK(expand_output_pattern("%999j", v).size() == 64);
  CHECK(expand_output_pattern("%3%", v) == "%3%");
}

TEST_CASE("%N is the node, %J the job id, %A and %a an array's id and task (Slurm's values outside arrays)") {
  pattern_values v{42, "heat", "alice", "node3", 0, -1};
  check_expansions(v, {{"%x.o%j.%N", "heat.o42.node3"}, {"%J", "42"}, {"%A_%a", "42_4294967294"}});
  v.array_job_id = 40;
  v.array_task_id = 2;
  CHECK(expand_output_pattern("slurm-%A_%a.out", v) == "slurm-40_2.out");
  CHECK(expand_output_pattern("%3a", v) == "002");
}
