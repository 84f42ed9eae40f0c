// word_table: lines of words, with comments.
#include "cluster_link/word_table.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace aqs::faucets {

std::vector<std::vector<std::string>> parse_word_table(const std::string& text, const std::string& origin,
                                                       std::size_t words, const std::string& format) {
  std::vector<std::vector<std::string>> out;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream split(line);
    std::vector<std::string> row;
    for (std::string w; split >> w;) row.push_back(w);
    if (row.empty()) continue;
    if (row.size() != words) {
      throw std::runtime_error(origin + ":" + std::to_string(number) + ": expected \"" + format + "\"");
    }
    out.push_back(std::move(row));
  }
  return out;
}

std::string read_text_file(const std::filesystem::path& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the " + what + " " + path.string());
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::string read_key_file(const std::filesystem::path& path) {
  std::istringstream in(read_text_file(path, "key file"));
  std::string key;
  std::getline(in, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.size() < 16) throw std::runtime_error("the key in " + path.string() + " is shorter than 16 characters");
  return key;
}

}  // namespace aqs::faucets
