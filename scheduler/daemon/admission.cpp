// admission: partitions, limits and "can it ever fit", one function for submissions and changes.
#include "daemon/admission.hpp"

namespace aqs::daemon {

admission admit(const core::site_config& config, const admission_request& r, const never_fits_check& never_fits) {
  admission out;
  auto chosen = core::choose_partitions(config, r.partition);
  if (config.configured) {
    if (chosen.partitions.empty()) {
      out.error = chosen.error;
      return out;
    }
    core::partition_request pr;
    pr.user = r.who.user;
    pr.groups = r.groups;
    pr.root = r.root;
    pr.walltime_s = r.walltime_s.value_or(0);
    pr.cpus = r.cpus;
    pr.min_nodes = r.min_nodes;
    std::string first_refusal;
    for (const core::partition* p : chosen.partitions) {
      std::optional<std::string> why = core::partition_refusal(*p, pr);
      if (!why && r.walltime_s && *r.walltime_s == 0 && p->max_time_s > 0) {
        // UNLIMITED is above any MaxTime (at submission "none asked" takes
        // the partition's default instead; a change asks for no limit).
        why = "Requested time limit is invalid (missing or exceeds some limit): UNLIMITED asked, MaxTime is " +
              core::format_partition_time(p->max_time_s) + " (partition " + p->name + ")";
      }
      if (why) {
        if (first_refusal.empty()) first_refusal = *why;
        continue;
      }
      out.partitions.push_back(p);
    }
    if (out.partitions.empty()) {
      out.error = first_refusal;
      return out;
    }
  } else {
    out.partitions = std::move(chosen.partitions);
  }
  if (!never_fits) return out;
  std::string why_not;
  for (const core::partition* p : out.partitions) {
    auto why = never_fits(config.configured ? p : nullptr);
    if (!why) return out;
    if (why_not.empty()) why_not = *why;
  }
  if (out.partitions.empty()) {
    if (auto why = never_fits(nullptr)) why_not = *why;
    else return out;
  }
  out.never_fits = why_not;
  out.error = "the job can never run on this cluster: " + why_not;
  return out;
}

admission admit_submission(const core::site_config& config, protocol::job_spec& spec, const submitter& who,
                           const std::vector<std::string>& groups, const never_fits_check& never_fits) {
  admission_request r;
  r.who = who;
  r.groups = groups;
  r.root = who.uid == 0;
  r.partition = spec.geometry ? spec.geometry->partition.value_or("") : "";
  // At submission no limit and 0 mean the same: the partition's default.
  if (spec.walltime_s && *spec.walltime_s > 0) r.walltime_s = *spec.walltime_s;
  r.cpus = static_cast<std::size_t>(spec.min_pe);
  if (spec.geometry) r.min_nodes = static_cast<std::size_t>(spec.geometry->nodes_min.value_or(0));
  admission out = admit(config, r, never_fits);
  if (!out.error.empty() || !config.configured) return out;
  const auto asked = core::choose_partitions(config, r.partition);
  if (out.partitions.size() != asked.partitions.size()) {
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

}  // namespace aqs::daemon
