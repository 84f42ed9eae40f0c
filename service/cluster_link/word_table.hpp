// word_table: the admins' small tables of the Faucets server and its
// clusters (clusters and their keys, who runs as whom): lines of words.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace aqs::faucets {

// The lines of `text` with `words` whitespace-separated words each; '#'
// starts a comment, blank lines are skipped. Throws std::runtime_error
// "ORIGIN:LINE: expected \"FORMAT\"" for a line with another count.
std::vector<std::vector<std::string>> parse_word_table(const std::string& text, const std::string& origin,
                                                       std::size_t words, const std::string& format);
// The whole file; throws std::runtime_error "cannot read the WHAT PATH".
std::string read_text_file(const std::filesystem::path& path, const std::string& what);

// A cluster's key: the first line of the file, at least 16 characters.
// Throws std::runtime_error naming the file.
std::string read_key_file(const std::filesystem::path& path);

}  // namespace aqs::faucets
