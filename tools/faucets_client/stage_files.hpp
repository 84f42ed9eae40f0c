// stage_files: the client's side of staged files (fsub -M --stage-in,
// fjobs -M --fetch): reading the named files under the submit directory,
// and writing a job's outputs back under the current directory. The path
// rule is protocol::stage_path_problem's; here also no symlink may lead
// out of the directory (reading) or be written through (writing).
#pragma once

#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "protocol/staged_files.hpp"

namespace aqs::client {

class stage_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// The files `paths` name (relative to `base`; a directory: every file in
// it), with paths relative to `base`. Throws stage_error (one line) for a
// path the rule refuses, one that leads out of `base` through a symlink,
// something not a file or directory, or a total over `max_bytes`.
std::vector<protocol::staged_file> read_stage_in(const std::filesystem::path& base,
                                                 const std::vector<std::string>& paths, std::size_t max_bytes);

// Writes `files` under `base` (replacing files of the same name). Every
// path is checked first, nothing written if one is refused: a path the
// rule refuses, or one whose place under `base` is a symlink or has one
// on the way. Throws stage_error.
void write_outputs(const std::filesystem::path& base, const std::vector<protocol::staged_file>& files);

}  // namespace aqs::client
