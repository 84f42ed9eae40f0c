// replies: the typed results of ok replies, encoded into an ok and read back from one with validation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/job_state.hpp"
#include "protocol/errors.hpp"
#include "protocol/messages.hpp"
#include "protocol/results.hpp"

namespace aqs::protocol {

// Each reply below is what an ok to one request holds beside "type" and
// "id" (docs/protocol.md). Requests not listed here are answered with an
// empty ok {}. make_ok(id, reply) is the ok the server sends; read_reply<R>
// reads a received ok as R, throwing protocol_error(bad_request) naming the
// field ("failed[0].code") for anything else; unknown members are ignored.

// To hello.
struct hello_reply {
  std::int64_t protocol = k_protocol_version;
  std::string server = "aqsd";
  friend bool operator==(const hello_reply&, const hello_reply&) = default;
};

// To submit: the job's id (the same one again when a submit_token repeats).
struct submit_reply {
  std::int64_t job_id = 0;
  // What the submitter should know but did not stop the job ("partition
  // 'gpu' is not configured here: ..."); left out when none.
  std::vector<std::string> warnings;
  friend bool operator==(const submit_reply&, const submit_reply&) = default;
};

// To cancel: the jobs cancelled (or signalled), and those that could not be,
// with why.
struct cancel_failure {
  std::int64_t job_id = 0;
  error_code code = error_code::internal;
  std::string message;
  friend bool operator==(const cancel_failure&, const cancel_failure&) = default;
};
struct cancel_reply {
  std::vector<std::int64_t> cancelled;
  std::vector<cancel_failure> failed;
  friend bool operator==(const cancel_reply&, const cancel_reply&) = default;
};

// To list_jobs: one page (see list_jobs). The server sends the jobs as text
// written by append_json, so a page of 10,000 jobs costs no JSON objects.
struct list_jobs_reply {
  std::vector<job_info> jobs;
  bool more = false;
  friend bool operator==(const list_jobs_reply&, const list_jobs_reply&) = default;
};

// To list_nodes: each node as listed, and whether its agent is connected now
// (not part of fnodes --json).
struct listed_node : node_info {
  bool connected = false;
  // Its processors held by jobs (reserved ones of a resize included); left
  // out when none.
  std::int64_t alloc = 0;
  friend bool operator==(const listed_node&, const listed_node&) = default;
};
// A partition as list_nodes shows it (sinfo): configured ones only; an
// empty list means the implicit partition of every node.
struct partition_info {
  std::string name;
  std::string state = "UP";          // UP, DOWN, DRAIN, INACTIVE
  bool is_default = false;           // wire: "default"
  std::string nodes;                 // as configured: a host list, or "ALL"
  std::int64_t max_time_s = 0;       // 0: unlimited
  std::int64_t default_time_s = 0;   // 0: MaxTime
  std::int64_t max_nodes = 0;        // 0: unlimited
  std::int64_t max_cpus_per_job = 0; // 0: unlimited
  // Its live jobs: pending ones that may run in it (a job asking for
  // "a,b" counts in both), and those running (or resizing) in it.
  std::int64_t jobs_pending = 0;
  std::int64_t jobs_running = 0;
  friend bool operator==(const partition_info&, const partition_info&) = default;
};
struct list_nodes_reply {
  std::vector<listed_node> nodes;
  std::vector<partition_info> partitions;
  // The cluster's live jobs, pending and running (or resizing): the
  // implicit partition's when none is configured.
  std::int64_t jobs_pending = 0;
  std::int64_t jobs_running = 0;
  friend bool operator==(const list_nodes_reply&, const list_nodes_reply&) = default;
};

// To job_history: the job as listed and its state changes, oldest first.
struct job_history_event {
  std::string time;                          // ISO 8601
  std::optional<core::job_state> old_state;  // unset (null) for the first event
  core::job_state new_state = core::job_state::pending;
  std::string old_procs;                     // maps as 0/1 text; "" when none
  std::string new_procs;
  std::string reason;
  std::optional<std::int64_t> exit_code;
  std::optional<std::int64_t> signal;
  friend bool operator==(const job_history_event&, const job_history_event&) = default;
};
struct job_history_reply {
  job_info job;
  std::vector<job_history_event> events;
  friend bool operator==(const job_history_reply&, const job_history_reply&) = default;
};

// To register: the node's first global processor number, and the jobs it
// reported running that the server no longer wants there.
struct register_reply {
  std::int64_t first_proc = 0;
  std::vector<std::int64_t> kill;
  std::string cluster_id{};  // the server's cluster id (32 hex digits): the agent keeps this cluster's jobs apart
  friend bool operator==(const register_reply&, const register_reply&) = default;
};

// To heartbeat: the nodes this agent should probe (name, address, probe
// port), sent when they changed since this agent's last heartbeat reply
// (and after each registration); unset (left out) means unchanged. An
// empty list means none.
struct heartbeat_reply {
  std::optional<std::vector<probe_peer>> peers;
  friend bool operator==(const heartbeat_reply&, const heartbeat_reply&) = default;
};

// To remote_exec, once the step started: the node it runs on.
struct remote_exec_reply {
  std::string node;
  friend bool operator==(const remote_exec_reply&, const remote_exec_reply&) = default;
};

// To control (fctl): the jobs changed, and those that could not be, each
// with why (the same shape as cancel's failures).
struct control_reply {
  std::vector<std::int64_t> done;
  std::vector<cancel_failure> failed;
  friend bool operator==(const control_reply&, const control_reply&) = default;
};

// To issue_token: the bearer token (opaque to clients), its id (what
// revoke_token names), whom it acts as, and when it expires (Unix seconds).
struct token_reply {
  std::string token;
  std::string token_id;
  std::string user;
  std::int64_t uid = 0;
  std::int64_t expires_at = 0;
  friend bool operator==(const token_reply&, const token_reply&) = default;
};

// The reply type of each request that has one: reply_t<submit> is
// submit_reply. Declared only, never defined: reply_t reads their types.
hello_reply reply_to(const hello&);
submit_reply reply_to(const submit&);
cancel_reply reply_to(const cancel&);
list_jobs_reply reply_to(const list_jobs&);
list_nodes_reply reply_to(const list_nodes&);
job_history_reply reply_to(const job_history&);
register_reply reply_to(const register_node&);
heartbeat_reply reply_to(const heartbeat&);
remote_exec_reply reply_to(const remote_exec&);
token_reply reply_to(const issue_token&);
control_reply reply_to(const control&);
template <class Request>
using reply_t = decltype(reply_to(std::declval<const Request&>()));

ok make_ok(std::int64_t id, const hello_reply& r);
ok make_ok(std::int64_t id, const submit_reply& r);
ok make_ok(std::int64_t id, const cancel_reply& r);
// The jobs go into ok::raw_members (append_json), not into ok::result.
ok make_ok(std::int64_t id, const list_jobs_reply& r);
ok make_ok(std::int64_t id, const list_nodes_reply& r);
ok make_ok(std::int64_t id, const job_history_reply& r);
ok make_ok(std::int64_t id, const register_reply& r);
ok make_ok(std::int64_t id, const heartbeat_reply& r);
ok make_ok(std::int64_t id, const remote_exec_reply& r);
ok make_ok(std::int64_t id, const token_reply& r);
ok make_ok(std::int64_t id, const control_reply& r);

// The result object of a reply, as the members of its ok (fkill --json and
// fjobs --history --json print it, or a part of it).
nlohmann::json to_json(const cancel_reply& r);
nlohmann::json to_json(const control_reply& r);
nlohmann::json to_json(const job_history_reply& r);

// Defined for the reply types above.
template <class Reply>
Reply read_reply(const ok& reply);

}  // namespace aqs::protocol
