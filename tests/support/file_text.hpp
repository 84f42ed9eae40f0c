// file_text: a whole file as a string (empty if it cannot be read), a file
// written whole, and the last line of a text, for tests that check what a
// job or a command wrote.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace aqs::test {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `text` to `p` (replacing it) and gives it `mode`.
inline void write_file(const std::filesystem::path& p, const std::string& text, mode_t mode = 0644) {
  std::ofstream(p) << text;
  ::chmod(p.c_str(), mode);
}

// The last line of `text`, trailing newlines dropped (a command that prints
// what matters last, such as ftoken's token).
inline std::string last_line(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text.substr(text.rfind('\n') + 1);
}

}  // namespace aqs::test
