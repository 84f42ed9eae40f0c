// time_limit: the commands' names for the Slurm time-limit parser, which lives in aqs::core (the HTTP front reads it too).
#pragma once

#include "core/time_limit.hpp"

namespace aqs::cmdline {
using core::format_duration;
using core::parse_time_limit;
}  // namespace aqs::cmdline
