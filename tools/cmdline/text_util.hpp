// text_util: the commands' names for core's string helpers (core/text_util.hpp).
#pragma once

#include "core/text_util.hpp"

namespace aqs::cmdline {
using core::ascii_lower;
using core::ascii_upper;
using core::split;
}  // namespace aqs::cmdline
