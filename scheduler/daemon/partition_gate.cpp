// partition_gate: partition names, states, users and limits checked at submission.
#include "daemon/partition_gate.hpp"

#include <grp.h>

#include <algorithm>

namespace aqs::daemon {

partition_admission admit_to_partitions(const core::site_config& config, protocol::job_spec& spec,
                                        const submitter& who, const std::vector<std::string>& groups) {
  partition_admission out;
  const std::string asked = spec.geometry ? spec.geometry->partition.value_or("") : "";
  auto chosen = core::choose_partitions(config, asked);
  if (!config.configured) {
    out.partitions = std::move(chosen.partitions);
    return out;
  }
  if (chosen.partitions.empty()) {
    out.error = chosen.error;
    return out;
  }
  core::partition_request r;
  r.user = who.user;
  r.groups = groups;
  r.root = who.uid == 0;
  r.walltime_s = spec.walltime_s.value_or(0);
  r.cpus = static_cast<std::size_t>(spec.min_pe);
  if (spec.geometry) r.min_nodes = static_cast<std::size_t>(spec.geometry->nodes_min.value_or(0));
  std::string first_refusal;
  for (const core::partition* p : chosen.partitions) {
    if (auto why = core::partition_refusal(*p, r)) {
      if (first_refusal.empty()) first_refusal = *why;
      continue;
    }
    out.partitions.push_back(p);
  }
  if (out.partitions.empty()) {
    out.error = first_refusal;
    return out;
  }
  if (out.partitions.size() != chosen.partitions.size()) {
    std::string names;
    for (const core::partition* p : out.partitions) names += (names.empty() ? "" : ",") + p->name;
    spec.geometry->partition = names;  // several were asked, so there is a geometry
  }
  if (!spec.walltime_s) {
    const core::partition& p = *out.partitions.front();
    const std::int64_t t = p.default_time_s > 0 ? p.default_time_s : p.max_time_s;
    if (t > 0) spec.walltime_s = t;
  }
  return out;
}

std::vector<std::string> group_names_of(const std::string& user, std::int32_t gid) {
  std::vector<std::string> out;
  int n = 64;
  std::vector<gid_t> gids(static_cast<std::size_t>(n));
  if (::getgrouplist(user.c_str(), static_cast<gid_t>(gid), gids.data(), &n) < 0) {
    gids.resize(static_cast<std::size_t>(n));
    if (::getgrouplist(user.c_str(), static_cast<gid_t>(gid), gids.data(), &n) < 0) n = 0;
  }
  gids.resize(static_cast<std::size_t>(std::max(n, 0)));
  if (std::find(gids.begin(), gids.end(), static_cast<gid_t>(gid)) == gids.end()) gids.push_back(static_cast<gid_t>(gid));
  std::vector<char> buf(16384);
  for (gid_t g : gids) {
    group gr{};
    group* found = nullptr;
    if (::getgrgid_r(g, &gr, buf.data(), buf.size(), &found) == 0 && found != nullptr) out.emplace_back(found->gr_name);
  }
  return out;
}

}  // namespace aqs::daemon
