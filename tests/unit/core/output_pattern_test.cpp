// Unit tests of output file pattern expansion.
#include <doctest/doctest.h>

#include "core/output_pattern.hpp"

using namespace aqs::core;

TEST_CASE("%j, %x and %u expand to job id, job name and user") {
  const pattern_values v{42, "heat", "alice", "node3", 0, -1};
  CHECK(expand_output_pattern(k_default_output_pattern, v) == "aqs-42.out");
  CHECK(expand_output_pattern("%x-%j.%u.log", v) == "heat-42.alice.log");
  CHECK(expand_output_pattern("/scratch/%u/%x/%j/out", v) == "/scratch/alice/heat/42/out");
  CHECK(expand_output_pattern("plain.txt", v) == "plain.txt");
}

TEST_CASE("%% is a literal percent sign and unknown specifiers stay as written") {
  const pattern_values v{7, "n", "u", "node0", 0, -1};
  CHECK(expand_output_pattern("100%%-%j", v) == "100%-7");
  CHECK(expand_output_pattern("%%j", v) == "%j");
  CHECK(expand_output_pattern("%t-%s-%j", v) == "%t-%s-7");
  CHECK(expand_output_pattern("end%", v) == "end%");
  CHECK(expand_output_pattern("end%12", v) == "end%12");
  CHECK(expand_output_pattern("%", v) == "%");
}

TEST_CASE("a width between % and the letter zero-pads the value, as in Slurm") {
  const pattern_values v{42, "ab", "u", "n", 0, -1};
  CHECK(expand_output_pattern("job%6j.out", v) == "job000042.out");
  CHECK(expand_output_pattern("%1j", v) == "42");
  CHECK(expand_output_pattern("%4x", v) == "00ab");
  CHECK(expand_output_pattern("%999j", v).size() == 64);
  CHECK(expand_output_pattern("%3%", v) == "%3%");
}

TEST_CASE("%N is the node, %J the job id, %A and %a an array's id and task (Slurm's values outside arrays)") {
  pattern_values v{42, "heat", "alice", "node3", 0, -1};
  CHECK(expand_output_pattern("%x.o%j.%N", v) == "heat.o42.node3");
  CHECK(expand_output_pattern("%J", v) == "42");
  CHECK(expand_output_pattern("%A_%a", v) == "42_4294967294");
  v.array_job_id = 40;
  v.array_task_id = 2;
  CHECK(expand_output_pattern("slurm-%A_%a.out", v) == "slurm-40_2.out");
  CHECK(expand_output_pattern("%3a", v) == "002");
}
