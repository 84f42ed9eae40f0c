// job_link: a connection to aqsd that speaks for a job (protocol role
// "job"): over the local Unix socket (the uid speaks) or TCP (answering the
// challenge with the job's token). The runtime shim's control channel and
// aqs-rsh both start this way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/framing.hpp"

namespace aqs::runtime {

// Where a job reaches aqsd and proves which job it speaks for; from the
// environment the node agent gives every job.
struct control_address {
  std::string socket_path;  // $AQS_SOCKET: local Unix socket (identity = uid), or
  std::string server;       // $AQS_SERVER: "HOST:PORT" (TCP, HMAC with the token)
  std::string token;        // $AQS_JOB_TOKEN
  std::int64_t job_id = 0;  // $AQS_JOB_ID
};

// The address from the environment; nullopt when this process does not run
// as an AQS job (no AQS_JOB_ID, or neither AQS_SOCKET nor AQS_SERVER).
std::optional<control_address> control_address_from_env();

// A connection after a successful hello.
struct job_link {
  int fd = -1;
  protocol::frame_decoder decoder;  // the stream goes on from here
  std::vector<std::string> early;   // frames that arrived with the hello's reply
};

// Connects (the Unix socket when there is one, else TCP) and says hello as
// job `where.job_id` with request id `hello_id`; `launcher`: as aqs-rsh,
// which asks for remote processes and is sent no maps; `map_epoch`: the
// shim's newest map seen (0: none), so that an aqsd restarted meanwhile
// numbers the next one above it. Throws std::runtime_error with a one-line
// reason naming the address when aqsd cannot be reached, refuses, or does
// not answer within 30 s.
job_link connect_job(const control_address& where, bool launcher, std::int64_t hello_id, std::int64_t map_epoch = 0);

// Writes all of `frame` to `fd`. Throws std::runtime_error when the
// connection is gone.
void send_all(int fd, const std::string& frame);

}  // namespace aqs::runtime
