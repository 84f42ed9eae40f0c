// staged_files: the files a job sent through a Faucets server takes with it
// (fsub -M --stage-in) and brings back (fjobs -M --fetch), as every hop
// carries them: the client's POST, faucetsd's store and its forward to a
// cluster, the cluster's outputs message. One path rule, checked on every
// hop (nobody trusts the hop before it): a staged path is relative to the
// job's directory, has no "..", "." or empty part, no NUL or control
// character, and is at most k_max_stage_path bytes. Symlinks are handled
// where files are opened (never followed out of the job's directory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace aqs::protocol {

// The total bytes a job may stage in (or bring back) unless the admin says
// otherwise (faucetsd --stage-max-bytes, aqsd --faucets-stage-max-bytes).
// Base64 grows it by a third: 8 MiB fits in one 16 MiB link frame.
inline constexpr std::size_t k_default_stage_max_bytes = std::size_t{8} << 20;
// The most any admin may set: what still fits in one frame.
inline constexpr std::size_t k_max_stage_bytes = std::size_t{11} << 20;
inline constexpr std::size_t k_max_stage_files = 1000;
inline constexpr std::size_t k_max_stage_path = 1024;

struct staged_file {
  std::string path;           // relative to the job's directory
  std::uint32_t mode = 0644;  // permission bits only (0..0777)
  std::string data;           // the bytes
  friend bool operator==(const staged_file&, const staged_file&) = default;
};

// Why `path` may not be staged (one line naming it), or nullopt.
std::optional<std::string> stage_path_problem(std::string_view path);

// The wire form: [{"path": P, "mode": M, "data": BASE64}, ...].
nlohmann::json to_json(const std::vector<staged_file>& files);
// Reads the wire form; throws std::invalid_argument with one line (a bad
// path named, a total over `max_bytes`, more than k_max_stage_files files,
// one path twice, bad base64).
std::vector<staged_file> parse_staged_files(const nlohmann::json& j, std::size_t max_bytes);
// The bytes of all files.
std::size_t staged_bytes(const std::vector<staged_file>& files);

}  // namespace aqs::protocol
