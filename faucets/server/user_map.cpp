// user_map: the admin's user table, parsed and asked.
#include "server/user_map.hpp"

#include "cluster_link/word_table.hpp"

namespace aqs::faucets {

user_map user_map::parse(const std::string& text, const std::string& origin) {
  user_map m;
  for (auto& row : parse_word_table(text, origin, 3, "SERVER_USER CLUSTER LOCAL_USER")) {
    m.rules_.push_back(rule{std::move(row[0]), std::move(row[1]), std::move(row[2])});
  }
  return m;
}

user_map user_map::load(const std::filesystem::path& file) { return parse(read_text_file(file, "user table"), file.string()); }

std::optional<std::string> user_map::local_user(const std::string& user, const std::string& cluster) const {
  for (const auto& r : rules_) {
    if (!r.matches(user, cluster)) continue;
    std::string local = r.local_of(user);
    if (local == "root") continue;  // never through the server
    return local;
  }
  return std::nullopt;
}

bool user_map::maps_to_root(const std::string& user, const std::string& cluster) const {
  for (const auto& r : rules_) {
    if (r.matches(user, cluster) && r.local_of(user) == "root") return true;
  }
  return false;
}

}  // namespace aqs::faucets
