// time_limit: Slurm's -t/--time formats, parsed to seconds, and the display form.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace aqs::core {

// The longest time limit a job may ask for (~10 years): what the parsers
// accept; protocol::k_max_walltime_s, what the wire accepts, is asserted
// equal to it (protocol/messages.cpp).
inline constexpr std::int64_t k_max_walltime_s = std::int64_t{3660} * 24 * 3600;

// Parses a time limit in Slurm's formats and returns seconds, 0 meaning no
// limit:
//   "M"          minutes             "D-H"        days-hours
//   "M:S"        minutes:seconds     "D-H:M"      days-hours:minutes
//   "H:M:S"      hours:minutes:secs  "D-H:M:S"    days-hours:minutes:seconds
//   "UNLIMITED", "INFINITE" (any case) and "0": no limit (as in Slurm).
// Fields are decimal digits only. The leading field may be any size (so
// "90" and "90:00" are 90 minutes, "48:00:00" is two days); a field after a
// ':' must be below 60 and hours after "D-" below 24. Unlike Slurm, which
// rounds up to whole minutes, the result keeps seconds: AQS enforces limits
// to the second. Throws usage_error naming the text and the accepted forms
// for anything else (empty, signs, blanks, too many fields, overflow past
// k_max_walltime_s).
std::int64_t parse_time_limit(std::string_view text);

// "D-HH:MM:SS" when a day or more, else "HH:MM:SS" (Slurm's squeue form);
// 0 or negative prints "UNLIMITED".
std::string format_duration(std::int64_t seconds);

}  // namespace aqs::core
