// partition_gate: partition names, states, users and limits checked at submission.
#include "daemon/partition_gate.hpp"

#include "daemon/admission.hpp"

#include <grp.h>

#include <algorithm>

namespace aqs::daemon {

partition_admission admit_to_partitions(const core::site_config& config, protocol::job_spec& spec,
                                        const submitter& who, const std::vector<std::string>& groups) {
  // The partition half of the admission checks (admission.hpp), which
  // every submission and change of a job passes.
  admission a = admit_submission(config, spec, who, groups, nullptr);
  return {std::move(a.error), std::move(a.partitions)};
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
