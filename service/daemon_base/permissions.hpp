// permissions: who may do what to a job, as pure functions of the peer that
// asks (tested alone; every handler that acts on a job asks here).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "daemon_base/dispatcher.hpp"

namespace aqs::daemon {

// An administrator: uid 0 on the Unix socket, or a TCP client that proved it
// holds the cluster key.
bool is_admin(const peer_info& p);

// The job's owner or an administrator: who may read a job's details (history,
// output), watch it, cancel or signal it.
bool may_act_on_job(const peer_info& p, std::int32_t owner_uid);

// Whether a peer with role=job may speak for `job` (owned by `owner_uid`):
// over the Unix socket its uid must be the owner's or 0; over TCP its address
// must be one the job runs on (`address_allowed`). nullopt: yes; else the
// refusal's reason.
std::optional<std::string> job_peer_refusal(const peer_info& p, std::int64_t job, std::int32_t owner_uid,
                                            bool address_allowed);

// Submissions come over the Unix socket, where the kernel vouches for the
// user, or over HTTP with a token aqsd issued to that user (a TCP peer holds
// the cluster key but has no user).
bool may_submit(const peer_info& p);

// HTTP tokens are issued and revoked over the Unix socket only: a token
// cannot beget tokens, and a TCP peer has no user to issue one for.
bool may_get_token(const peer_info& p);

}  // namespace aqs::daemon
