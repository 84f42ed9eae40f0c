// exec_path: the commands' names for the execvp-like PATH search, which lives in aqs::service (process/exec_path.hpp) so that the node agent needs no command library.
#pragma once

#include "process/exec_path.hpp"

namespace aqs::cmdline {
using process::find_executable;
using process::k_default_exec_path;
using process::path_variable;
}  // namespace aqs::cmdline
