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
};

// Replaces %j (job id), %x (job name), %u (user name) and %% (a literal %).
// As in Slurm, digits between % and the letter zero-pad the value to that
// width ("%6j" -> "000042"; widths above 64 are clamped to 64). Any other
// sequence, including a trailing lone %, is kept literally, so Slurm patterns
// using specifiers AQS lacks (%N, %A) still give a usable name. Never throws
// except std::bad_alloc.
std::string expand_output_pattern(std::string_view pattern, const pattern_values& values);

}  // namespace aqs::core
