// exec_path: which file a command name runs, found the way execvp finds it (shared by frun and the node agent).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aqs::process {

// PATH when the environment has none: the node agent's default for jobs, so
// that frun looks where the job will.
inline constexpr std::string_view k_default_exec_path = "/usr/local/bin:/usr/bin:/bin";

// The value of PATH in a "KEY=VALUE" environment (the last one if there are
// several), or nullopt when it has none.
std::optional<std::string> path_variable(const std::vector<std::string>& environment);

// The file that exec of `program` would run in directory `workdir` with
// `path` as PATH (nullopt: k_default_exec_path):
//   - a name with a slash is that file, relative to `workdir`;
//   - else the first PATH entry holding an executable regular file of that
//     name; an empty entry is `workdir`, a relative one is relative to it.
// Relative results are joined to `workdir`, so the answer does not depend on
// the caller's own directory. nullopt when nothing executable is found (an
// empty name, a directory, no execute permission for the caller). Only
// looks at the file system; never throws for what it finds there.
std::optional<std::string> find_executable(std::string_view program, const std::optional<std::string>& path,
                                           std::string_view workdir);

}  // namespace aqs::process
