// submit: a submission that is acknowledged exactly once, through a lost
// reply: sent again with the same submit_token until aqsd answers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "client/client_connection.hpp"
#include "cmdline/job_options.hpp"
#include "protocol/messages.hpp"

namespace aqs::client {

struct submit_retry {
  // Sends in all, the first included.
  int attempts = 6;
  // Wait before the second send, doubled each time up to max_delay.
  std::chrono::milliseconds first_delay{100};
  std::chrono::milliseconds max_delay{2000};
  // How long one send waits for aqsd's answer. A send that aqsd took but
  // did not answer in time is not sent again (it is still being worked on;
  // aqsd answers a resend of it only once it is done anyway).
  std::chrono::milliseconds answer_within{std::chrono::minutes(5)};
  // Called before each send again (fsub says so on stderr); may be empty.
  std::function<void(int attempt, const std::string& why)> on_retry;
  // Called with each warning aqsd sends with the job id; may be empty.
  std::function<void(const std::string& warning)> on_warning;
};

// Whether a failed submission may be sent again with its token: the reply
// was lost (no error code: the connection broke, or could not be made
// again; a timeout on a connection that holds is not retried) or aqsd failed inside (`internal`: its database was
// unavailable). aqsd's refusals (bad_request, permission_denied, ...) are
// final.
bool retryable(const client_error& e) noexcept;

// Submits `request` over a new connection to `socket_path` and returns the
// job id. Gives the job a random submit_token first if it has none. A
// retryable failure after the request was sent is retried with the same
// token, on a new connection: aqsd's store returns the job that token made,
// so a job is made once and reported once however often it is sent.
// Throws client_error: at once when aqsd cannot be reached at all (nothing
// was sent) or refuses the job, else the last failure once the attempts are
// spent.
std::int64_t submit(const std::string& socket_path, protocol::submit request, const submit_retry& retry = {});

// fsub/sbatch --test-only: sends `request` checked as a submission but not
// stored, and prints when it would start, on stdout: "Job would start at
// TIME (in S s) on N processors" (with `json`, the reply), or for sbatch
// Slurm's line on stderr, "sbatch: Job 0 to start at TIME using N
// processors". A job that could not start as things stand: "... would not
// start: ..." and status 1. Errors as submit's.
int test_submit(const std::string& socket_path, protocol::submit request, bool json, bool slurm_style);

// What fsub and frun pass with a job: this process's current directory,
// environment and umask, and a fresh submit_token.
cmdline::submit_context this_process_context();

// The retries fsub and sbatch submit with: each send again and each
// warning said on stderr as "NAME: ...".
submit_retry retry_told_as(const std::string& name);

// Prints a submitted job's id as asked: {"job_id":N} with --json, N with
// --parsable, else "`submitted` N" ("Submitted job", "Submitted batch job").
void print_job_id(std::int64_t id, bool json, bool parsable, const char* submitted);

// The batch script at `path` (fsub's and sbatch's SCRIPT argument), as
// bytes; nullopt when it cannot be read or is a directory.
std::optional<std::string> read_script(const std::string& path);

}  // namespace aqs::client
