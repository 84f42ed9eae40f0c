// begin_time: Slurm's --begin forms, read to Unix seconds against `now`
// (the caller's clock), in local time as Slurm reads them.
#pragma once

#include <cstdint>
#include <string_view>

namespace aqs::core {

// Slurm's sbatch --begin forms:
//   now[+COUNT[seconds|minutes|hours|days|weeks]]   (COUNT alone: seconds)
//   HH:MM[:SS] [AM|PM]     today, or tomorrow when that time has passed
//   midnight, noon, fika (15:00), teatime (16:00), today, tomorrow
//   YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY], MMDD[YY]
// A time in the past is returned as it is (the job is eligible at once,
// as in Slurm). Throws usage_error naming the text and the forms.
std::int64_t parse_begin_time(std::string_view text, std::int64_t now);

}  // namespace aqs::core
