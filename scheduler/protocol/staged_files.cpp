// staged_files: the path rule and the wire form of staged files.
#include "protocol/staged_files.hpp"

#include <set>
#include <stdexcept>

#include "protocol/base64.hpp"

namespace aqs::protocol {

namespace {

std::string shown(std::string_view p) {
  std::string s;
  for (const char c : p.substr(0, 200)) s += static_cast<unsigned char>(c) < 0x20 ? '?' : c;
  if (p.size() > 200) s += "...";
  return s;
}

}  // namespace

std::optional<std::string> stage_path_problem(std::string_view path) {
  const std::string what = "staged path '" + shown(path) + "'";
  if (path.empty()) return std::string("a staged path is empty");
  if (path.size() > k_max_stage_path) {
    return what + " is longer than " + std::to_string(k_max_stage_path) + " bytes";
  }
  for (const char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return what + " contains a control character";
  }
  if (path.front() == '/') return what + " is absolute: staged paths are relative to the job's directory";
  std::size_t from = 0;
  while (from <= path.size()) {
    const std::size_t slash = path.find('/', from);
    const std::string_view part = path.substr(from, slash == std::string_view::npos ? std::string_view::npos : slash - from);
    if (part == "..") return what + " contains '..': staged paths stay inside the job's directory";
    if (part == ".") return what + " contains '.': name each file plainly";
    if (part.empty()) return what + " has an empty part ('//' or a trailing '/')";
    if (slash == std::string_view::npos) break;
    from = slash + 1;
  }
  return std::nullopt;
}

nlohmann::json to_json(const std::vector<staged_file>& files) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& f : files) a.push_back({{"path", f.path}, {"mode", f.mode}, {"data", base64_encode(f.data)}});
  return a;
}

std::size_t staged_bytes(const std::vector<staged_file>& files) {
  std::size_t n = 0;
  for (const auto& f : files) n += f.data.size();
  return n;
}

std::vector<staged_file> parse_staged_files(const nlohmann::json& j, std::size_t max_bytes) {
  if (!j.is_array()) throw std::invalid_argument("staged files must be an array of {path, mode, data}");
  if (j.size() > k_max_stage_files) {
    throw std::invalid_argument("more than " + std::to_string(k_max_stage_files) + " staged files");
  }
  std::vector<staged_file> out;
  std::set<std::string> seen;
  std::size_t total = 0;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("path") || !e["path"].is_string() || !e.contains("data") ||
        !e["data"].is_string()) {
      throw std::invalid_argument("a staged file must be {\"path\": TEXT, \"mode\": N, \"data\": BASE64}");
    }
    staged_file f;
    f.path = e["path"].get<std::string>();
    if (auto why = stage_path_problem(f.path)) throw std::invalid_argument(*why);
    if (!seen.insert(f.path).second) throw std::invalid_argument("staged path '" + shown(f.path) + "' is given twice");
    if (e.contains("mode")) {
      if (!e["mode"].is_number_unsigned() || e["mode"].get<std::uint64_t>() > 0777) {
        throw std::invalid_argument("staged file '" + shown(f.path) + "': mode must be 0..0777");
      }
      f.mode = e["mode"].get<std::uint32_t>();
    }
    const auto& text = e["data"].get_ref<const std::string&>();
    // Bound before decoding: base64 of max_bytes is at most 4/3 of it.
    if ((text.size() / 4) * 3 > max_bytes - std::min(max_bytes, total)) {
      throw std::invalid_argument("staged files are over the limit of " + std::to_string(max_bytes) + " bytes");
    }
    auto data = base64_decode(text);
    if (!data) throw std::invalid_argument("staged file '" + shown(f.path) + "': data is not base64");
    f.data = std::move(*data);
    total += f.data.size();
    if (total > max_bytes) {
      throw std::invalid_argument("staged files are over the limit of " + std::to_string(max_bytes) + " bytes");
    }
    out.push_back(std::move(f));
  }
  // A file and a directory of the same name cannot both be.
  for (const auto& f : out) {
    for (std::size_t s = f.path.find('/'); s != std::string::npos; s = f.path.find('/', s + 1)) {
      if (seen.contains(f.path.substr(0, s))) {
        throw std::invalid_argument("staged path '" + shown(f.path.substr(0, s)) + "' is both a file and a directory");
      }
    }
  }
  return out;
}

}  // namespace aqs::protocol
