// permissions: the rules, one function each.
#include "daemon_base/permissions.hpp"

namespace aqs::daemon {

bool is_admin(const peer_info& p) { return p.via == transport::tcp || (p.uid && *p.uid == 0); }

bool may_act_on_job(const peer_info& p, std::int32_t owner_uid) {
  return is_admin(p) || (p.uid && static_cast<std::int32_t>(*p.uid) == owner_uid);
}

std::optional<std::string> job_peer_refusal(const peer_info& p, std::int64_t job, std::int32_t owner_uid,
                                            bool address_allowed) {
  if (p.via == transport::unix_socket && !(p.uid && (*p.uid == 0 || static_cast<std::int32_t>(*p.uid) == owner_uid))) {
    return "job " + std::to_string(job) + " belongs to another user";
  }
  // Over TCP the token alone is not enough: it must be used from a host the
  // job runs on (or, adaptive, may grow onto).
  if (p.via == transport::tcp && !address_allowed) {
    return "job " + std::to_string(job) + " does not run on " + p.address;
  }
  return std::nullopt;
}

bool may_submit(const peer_info& p) {
  return (p.via == transport::unix_socket || p.via == transport::http) && p.uid.has_value();
}

bool may_get_token(const peer_info& p) { return p.via == transport::unix_socket && p.uid.has_value(); }

}  // namespace aqs::daemon
