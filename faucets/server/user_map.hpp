// user_map: the admin's table of which server user runs as which local
// account on which cluster: "SERVER_USER CLUSTER LOCAL_USER" per line, "*"
// for any cluster, "*" as local user for the same name. Never root.
// Rule: read-only once loaded (faucetsd_main loads it; the job_router reads it).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace aqs::faucets {

class user_map {
public:
  // Throws std::runtime_error naming `origin` and the line.
  static user_map parse(const std::string& text, const std::string& origin);
  static user_map load(const std::filesystem::path& file);
  std::optional<std::string> local_user(const std::string& user, const std::string& cluster) const;
  // Whether a rule that matches maps `user` to root on `cluster` (so that
  // local_user refuses it: faucetsd never runs a job as root).
  bool maps_to_root(const std::string& user, const std::string& cluster) const;

private:
  struct rule {
    std::string user, cluster, local;
    bool matches(const std::string& u, const std::string& c) const {
      return (user == "*" || user == u) && (cluster == "*" || cluster == c);
    }
    std::string local_of(const std::string& u) const { return local == "*" ? u : local; }
  };
  std::vector<rule> rules_;
};

}  // namespace aqs::faucets
