// output_pattern: expanding -o/-e file name patterns (%j, %x, %u) as the node agent opens them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace aqs::core {

// The default when neither -o nor a directive gives one (stderr then goes
// into the same file, as with sbatch).
inline constexpr std::string_view k_default_output_pattern = "aqs-%j.out";

struct pattern_values {
  std::int64_t job_id = 0;
  std::string_view job_name;
  std::string_view user;
  std::string_view node;  // %N: the node the batch script runs on
  // %A and %a: an array job's id and task; outside arrays %A is the job id
  // and %a Slurm's "no task" value, 4294967294.
  std::int64_t array_job_id = 0;
  std::int64_t array_task_id = -1;
};

// Replaces %j and %J (job id), %x (job name), %u (user name), %N (node),
// %A and %a (array job and task) and %% (a literal %).
// As in Slurm, digits between % and the letter zero-pad the value to that
// width ("%6j" -> "000042"; widths above 64 are clamped to 64). Any other
// sequence, including a trailing lone %, is kept literally, so Slurm patterns
// using specifiers AQS lacks (%s, %t) still give a usable name. Never throws
// except std::bad_alloc.
std::string expand_output_pattern(std::string_view pattern, const pattern_values& values);

}  // namespace aqs::core
