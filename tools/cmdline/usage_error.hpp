// usage_error: the commands' name for core::usage_error, a mistake in what the user typed, reported as one line.
#pragma once

#include "core/usage_error.hpp"

namespace aqs::cmdline {
using core::usage_error;
}  // namespace aqs::cmdline
