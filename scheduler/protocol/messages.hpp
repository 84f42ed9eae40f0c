// messages: every message of the AQS wire protocol as a C++ struct, with validation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/job_state.hpp"
#include "protocol/errors.hpp"
#include "protocol/latency.hpp"

namespace aqs::protocol {

// The one version constant of the wire protocol (see docs/protocol.md). Bump it
// for any change an old peer would misread; adding an optional field or a new
// message type does not need a bump, because unknown fields are ignored.
inline constexpr std::int64_t k_protocol_version = 1;

// Bounds checked by parse_message. A submit with a 1 MB script and 1,000
// environment variables is far inside all of them.
inline constexpr std::int64_t k_max_pe = std::int64_t{1} << 20;
inline constexpr std::int64_t k_max_walltime_s = std::int64_t{3660} * 24 * 3600;  // ~10 years
inline constexpr std::int64_t k_max_job_id = (std::int64_t{1} << 53) - 1;  // exact in a double
inline constexpr std::size_t k_max_name = 256;        // job, node and user names, tokens
inline constexpr std::size_t k_max_path = 4096;       // workdir, output patterns
inline constexpr std::size_t k_max_script = std::size_t{8} << 20;
inline constexpr std::size_t k_max_env_entries = 16384;
inline constexpr std::size_t k_max_argv = 16384;
inline constexpr std::size_t k_max_arg = std::size_t{128} << 10;  // one argv/env string (Linux MAX_ARG_STRLEN)
inline constexpr std::size_t k_max_ids = 65536;       // job id lists
inline constexpr std::int64_t k_max_list = 10000;      // jobs per list_jobs reply page
inline constexpr std::size_t k_max_cpus = 65536;      // local cpu lists
inline constexpr std::size_t k_max_placement = 65536; // proc_hosts/proc_cpus entries (jobs larger than this go without)
inline constexpr std::size_t k_max_output_chunk = std::size_t{1} << 20;  // raw bytes per output message
inline constexpr std::size_t k_max_text = 4096;       // error messages
inline constexpr std::int64_t k_max_signal = 64;
inline constexpr std::int64_t k_max_grace_s = 3600;
inline constexpr std::int64_t k_max_token_lifespan_s = std::int64_t{31} * 24 * 3600;  // HTTP bearer tokens

// Who is at the other end, declared in hello.
enum class peer_role : unsigned char { client, node, job };
std::string_view to_string(peer_role r) noexcept;
std::optional<peer_role> parse_role(std::string_view text) noexcept;

// A job's layout beyond its processor count, as Slurm's options give it
// (wire: the "geometry" object of a job; see docs/protocol.md). A rigid
// job's min_pe == max_pe == ntasks * cpus_per_task. Memory in MB.
struct job_geometry {
  std::int64_t ntasks = 1;
  std::int64_t cpus_per_task = 1;
  std::optional<std::int64_t> ntasks_per_node;
  std::optional<std::int64_t> nodes_min;
  std::optional<std::int64_t> nodes_max;
  bool exclusive = false;
  std::optional<std::int64_t> mem_per_node_mb;
  std::optional<std::int64_t> mem_per_cpu_mb;
  std::optional<std::int64_t> gpus_per_node;
  std::optional<std::string> partition;
  // Slurm options accepted and kept but not acted on ("account=proj").
  std::vector<std::string> recorded;
  // A job array: in a submit, "0-99%10" (core/array_spec.hpp) makes one job
  // per task; each task's job carries its index, its array's id (the first
  // task's job id; unset on the first task itself) and the throttle.
  std::optional<std::string> array;
  std::optional<std::int64_t> array_task_id;
  std::optional<std::int64_t> array_job_id;
  std::optional<std::int64_t> array_max_running;
  std::optional<std::int64_t> array_task_count;
  // A dependency beyond afterok (core/dependency.hpp): "afterany:4,after:5",
  // "afterok:7?afternotok:8". Its jobs are also in the job's afterok list,
  // which then only says which jobs it names.
  std::optional<std::string> dependency;
  // sbatch --begin: the job is not eligible before this Unix time (it waits
  // with reason BeginTime).
  std::optional<std::int64_t> begin_time;
  // Adaptive jobs (issue 34): the size it runs best at, in processors
  // (min_pe..max_pe; --pref counts ranks, times -c), how it scales
  // (core::speedup_model's text: "linear", "amdahl:F", "table:P=S,...")
  // and what one resize costs it in seconds. Unset: the policies' defaults.
  std::optional<std::int64_t> pref_pe;
  std::optional<std::string> speedup;
  std::optional<std::int64_t> resize_cost_s;
  friend bool operator==(const job_geometry&, const job_geometry&) = default;
};

// What a job asks for: the body of submit, and the job part of launch.
// Exactly one of two shapes: a batch script (`script` set, `argv` its
// arguments, possibly empty) or a command (`script` unset, `argv` non-empty,
// argv[0] the program). Rigid jobs have min_pe == max_pe; min_pe < max_pe
// needs adaptive.
struct job_spec {
  std::string name;                        // non-empty
  std::optional<std::string> script;       // the script text, run by its shebang
  std::vector<std::string> argv;
  std::string workdir;                     // absolute
  std::vector<std::string> environment;    // "KEY=VALUE", KEY non-empty
  std::string stdout_pattern = "aqs-%j.out";     // wire: "stdout"
  std::optional<std::string> stderr_pattern;     // wire: "stderr"; unset: into stdout
  std::int64_t min_pe = 1;
  std::int64_t max_pe = 1;
  bool adaptive = false;
  std::optional<std::int64_t> walltime_s;  // unset: no limit
  std::vector<std::int64_t> afterok;       // run only after these jobs COMPLETED
  bool requeue = false;                    // back to PENDING after NODE_FAIL
  std::optional<std::string> submit_token; // idempotency key: a retry returns the same job
  bool interactive = false;                // frun: output is streamed, not written to files
  std::optional<std::int64_t> umask;       // the submitter's umask (0..0777); unset: 0022
  std::optional<job_geometry> geometry;    // unset: any processors anywhere
  friend bool operator==(const job_spec&, const job_spec&) = default;
};

// ---- both directions ---------------------------------------------------

// Peer -> server, first message on every connection. `auth` is required on
// TCP (HMAC of the challenge nonce), ignored on the Unix socket. `job_id`
// names the job a role=job connection speaks for.
struct hello {
  static constexpr std::string_view type = "hello";
  std::int64_t id = 0;
  std::int64_t protocol = k_protocol_version;
  peer_role role = peer_role::client;
  std::optional<std::string> auth;
  std::optional<std::int64_t> job_id;
  // Role job only: this connection launches processes for the job (aqs-rsh)
  // and is not its shim (which gets the job's new_map messages).
  bool launcher = false;
  // Role job, the shim only: the newest map epoch it has seen (it reconnects
  // after aqsd restarted; aqsd numbers the job's next map above it).
  std::optional<std::int64_t> map_epoch{};
  friend bool operator==(const hello&, const hello&) = default;
};

// Server -> peer, first message on a TCP connection, before hello.
struct challenge {
  static constexpr std::string_view type = "challenge";
  std::string nonce;  // hex
  friend bool operator==(const challenge&, const challenge&) = default;
};

// Success reply. `result` is a JSON object whose members sit beside "type"
// and "id" on the wire (so {"type":"ok","id":3,"job_id":17}).
struct ok {
  static constexpr std::string_view type = "ok";
  std::int64_t id = 0;
  nlohmann::json result = nlohmann::json::object();
  // Sender side only: members already encoded as JSON text ("jobs":[...]),
  // written after result's. A large reply (a page of 10,000 jobs) costs a
  // tenth as much this way as built into `result`. A parsed ok has them in
  // `result` and this empty.
  std::string raw_members{};
  friend bool operator==(const ok&, const ok&) = default;
};

// Failure reply. `id` is unset when the request's id could not be read.
// An unknown code received from a newer peer is read as internal.
struct error {
  static constexpr std::string_view type = "error";
  std::optional<std::int64_t> id;
  error_code code = error_code::internal;
  std::string message;
  friend bool operator==(const error&, const error&) = default;
};

// Interactive output, node -> server -> watching client. `data` holds raw
// bytes (base64 on the wire); `id` is the watch_job request on the client
// side, unset from the node.
struct output {
  static constexpr std::string_view type = "output";
  std::optional<std::int64_t> id;
  std::int64_t job_id = 0;
  std::string stream = "stdout";  // "stdout" | "stderr"
  std::string data;
  friend bool operator==(const output&, const output&) = default;
};

// ---- client requests ---------------------------------------------------

// Reply: ok {job_id}.
struct submit {
  static constexpr std::string_view type = "submit";
  std::int64_t id = 0;
  job_spec job;
  // sbatch --test-only: checked as a submission is (partitions, fit,
  // account, limits, reservation, dependencies), then nothing is stored;
  // the reply is ok {test_only: true, start_in_s: S|null, start_s: T|null,
  // procs: N}: when it would start if submitted now (core/start_estimate).
  bool test_only = false;
  friend bool operator==(const submit&, const submit&) = default;
};

// Cancels the listed jobs, or every job of `user` when job_ids is empty (at
// least one of the two is required; with both, the listed jobs that `user`
// owns). `signal` unset: SIGTERM, grace, SIGKILL.
// Reply: ok {cancelled: [ids]}.
struct cancel {
  static constexpr std::string_view type = "cancel";
  std::int64_t id = 0;
  std::vector<std::int64_t> job_ids;
  std::optional<std::int64_t> signal;
  std::optional<std::string> user;
  // Tasks not yet split off their array's compact record, as "ARRAY_INDEX"
  // ("123_7"): each leaves the record (fkill 123_7 of a held array).
  std::vector<std::string> array_tasks;
  friend bool operator==(const cancel&, const cancel&) = default;
};

// fctl: changes live jobs (the owner's or, for root, anyone's), like
// scontrol. `action` is one of:
//   hold, release   a pending job leaves the queue / comes back; a job held by
//                   root is released by root only
//   suspend, resume a running job's processes are stopped on every node and
//                   its processors freed / it queues to run again (rigid: on
//                   its old processors; adaptive: on any, sent as a new map)
//   requeue         a running or suspended job is killed and queued again
//   update          a new min_pe..max_pe (adaptive jobs: any live state;
//                   rigid: pending only) and/or time_limit_s (pending only;
//                   0: none)
// A job (role job, its shim) may send update for itself: aqs_request_range.
// Reply: ok {done: [ids], failed: [{job_id, code, message}]}; when every
// job failed, the first failure as an error.
struct control {
  static constexpr std::string_view type = "control";
  std::int64_t id = 0;
  std::string action;
  std::vector<std::int64_t> job_ids;
  std::optional<std::int64_t> min_pe;
  std::optional<std::int64_t> max_pe;
  std::optional<std::int64_t> time_limit_s;
  friend bool operator==(const control&, const control&) = default;
};

// Reply: ok {jobs: [job objects, by increasing id], more: bool}. Without
// `all`, finished jobs are left out. A long history does not fit one frame:
// the server returns at most `limit` (or its own cap) jobs with id >
// `after_id`, and more = true when the client should ask again with
// after_id = the last id it got.
struct list_jobs {
  static constexpr std::string_view type = "list_jobs";
  std::int64_t id = 0;
  bool all = false;
  std::optional<std::string> user;
  std::vector<core::job_state> states;  // empty: any
  std::vector<std::int64_t> job_ids;    // empty: any
  std::optional<std::int64_t> after_id;
  std::optional<std::int64_t> limit;    // 1..k_max_list
  // The last `limit` matching jobs (the newest, below `before_id` when set)
  // instead of the first ones after `after_id`; still sent by increasing id.
  // more = true when older matching jobs exist.
  bool newest = false;
  std::optional<std::int64_t> before_id;
  // Each job also carries its usage (issue 32): account, allocated
  // processor-time and, to its owner and root only, what was measured
  // (job_info's usage fields).
  bool usage = false;
  friend bool operator==(const list_jobs&, const list_jobs&) = default;
};

// Reply: ok {nodes: [node objects]}.
struct list_nodes {
  static constexpr std::string_view type = "list_nodes";
  std::int64_t id = 0;
  friend bool operator==(const list_nodes&, const list_nodes&) = default;
};

// Reply: ok {job: job object, events: [event objects]}.
struct job_history {
  static constexpr std::string_view type = "job_history";
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  friend bool operator==(const job_history&, const job_history&) = default;
};

// Reply: ok {}, then job_event and (for interactive jobs) output messages
// carrying this request's id, until a job_event with a final state.
struct watch_job {
  static constexpr std::string_view type = "watch_job";
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  friend bool operator==(const watch_job&, const watch_job&) = default;
};

// Root only. Reply: ok {}, then the server closes.
struct shutdown {
  static constexpr std::string_view type = "shutdown";
  std::int64_t id = 0;
  friend bool operator==(const shutdown&, const shutdown&) = default;
};

// Client -> server, Unix socket only: a bearer token for aqsd's HTTP API
// that acts as the caller (its SO_PEERCRED uid), valid `lifespan_s` seconds
// (unset: the server's default). Reply: ok {token, token_id, user, uid,
// expires_at} (token_reply).
struct issue_token {
  static constexpr std::string_view type = "issue_token";
  std::int64_t id = 0;
  std::optional<std::int64_t> lifespan_s;  // 1..k_max_token_lifespan_s
  // ftoken --login: instead of a token, a one-time login code for the
  // dashboard, valid for k_login_code_lifespan_s: the reply's `token` is
  // the code, `expires_at` its end; the page exchanges it (POST
  // /api/v1/login) for a token of `lifespan_s` (default: aqsd's), which
  // never appears in a URL.
  bool login = false;
  friend bool operator==(const issue_token&, const issue_token&) = default;
};
inline constexpr std::int64_t k_login_code_lifespan_s = 60;

// Client -> server, Unix socket only: revokes the caller's token whose id is
// `token_id` (root: anyone's), or with `all` every token the caller was
// issued until now. Exactly one of the two. Reply: ok {}.
struct revoke_token {
  static constexpr std::string_view type = "revoke_token";
  std::int64_t id = 0;
  std::optional<std::string> token_id;
  bool all = false;
  friend bool operator==(const revoke_token&, const revoke_token&) = default;
};

// Client -> server: the accounts (issue 32; protocol/accounts_wire.hpp for
// the JSON shapes). `action`:
//   show     -> ok {tree: TREE}                         (anyone)
//   shares   -> ok {shares: [..], weights: {..}}        (anyone: sshare)
//   priority -> ok {jobs: [..], weights: {..}}          (anyone: sprio)
//   usage    -> ok {usage: [{user, account, jobs, cpu_seconds, mem_mb_seconds,
//               gpu_seconds}]} of jobs that ended in [from_s, to_s) (Unix
//               seconds; a user who is not root sees their own rows only)
//   add, modify (entity account|user|qos, `record` a JSON object of it;
//   a user with make_default becomes that account's default) and delete
//   (entity, name, and for a user the account): root only; ok {} once the
//   change is stored (audited) and aqsd acts on it, else one error line.
struct accounts {
  static constexpr std::string_view type = "accounts";
  std::int64_t id = 0;
  std::string action;
  std::optional<std::string> entity;
  std::optional<std::string> record;
  std::optional<std::string> name;
  std::optional<std::string> account;
  bool make_default = false;
  std::optional<std::int64_t> from_s;
  std::optional<std::int64_t> to_s;
  friend bool operator==(const accounts&, const accounts&) = default;
};

// Client -> server: advance reservations (issue 32). `action`:
//   show   -> ok {reservations: [RESV]}                       (anyone)
//   create -> ok {reservation: RESV}   (root; `record` a JSON object:
//             name, start_s, end_s (Unix seconds), nodes (a host list) or
//             core_count, users and/or accounts (arrays of names), flags
//             (array: MAINT, IGNORE_JOBS))
//   update -> ok {reservation: RESV}   (root; `record` with the name and
//             what changes: start_s, end_s, users, accounts, flags)
//   delete -> ok {}                     (root; `name`)
// RESV: {name, start_s, end_s, state ("ACTIVE"|"INACTIVE"), nodes (host
// list), node_count, core_count, procs (compact per-node form), users,
// accounts, flags}. A refusal is one error line; nothing changes.
struct reservations {
  static constexpr std::string_view type = "reservations";
  std::int64_t id = 0;
  std::string action;
  std::optional<std::string> name;
  std::optional<std::string> record;
  friend bool operator==(const reservations&, const reservations&) = default;
};

// Server -> client: a job changed state (for watch_job).
struct job_event {
  static constexpr std::string_view type = "job_event";
  std::optional<std::int64_t> id;
  std::int64_t job_id = 0;
  core::job_state state = core::job_state::pending;
  std::optional<std::int64_t> exit_code;  // 0..255, final states
  std::optional<std::int64_t> signal;     // killed by this signal
  std::optional<std::string> procs;       // map as 0/1 text while it holds processors
  friend bool operator==(const job_event&, const job_event&) = default;
};

// ---- node agent ------------------------------------------------------------

// Node -> server after hello. `cpus` are the local cpu numbers it pins to,
// `procs` how many processors it advertises (may exceed cpus.size() with
// --procs). `running` lists jobs it still runs, to be re-adopted. Reply: ok
// {first_proc, kill: [job ids the server no longer wants running]}.
struct register_node {
  static constexpr std::string_view type = "register";
  std::int64_t id = 0;
  std::string name;
  std::int64_t procs = 1;
  std::vector<std::int64_t> cpus;
  std::int64_t memory_mb = 0;
  std::int64_t gpus = 0;
  std::vector<std::int64_t> running;
  std::string host;  // the machine's host name as MPI knows it; empty: same as name
  // The UDP port its latency probe socket answers on; 0 (left out): none
  // (an agent without one, or older than the latency probes).
  std::int64_t probe_port = 0;
  // The cluster whose jobs `running` lists (the id an earlier registration
  // taught the agent); empty (left out): none known. The server ignores
  // `running` unless this is its own id: another cluster's jobs are never
  // adopted or killed.
  std::string cluster_id{};
  // How the agent contains its jobs, one line ("cgroup v1 (memory, ...)
  // under ...", or "none (why)"); empty (left out): an older agent.
  std::string containment{};
  friend bool operator==(const register_node&, const register_node&) = default;
};

// Node -> server, periodically. Reply: ok {}, with `peers` (replies.hpp's
// heartbeat_reply) when the nodes to probe have changed.
struct heartbeat {
  static constexpr std::string_view type = "heartbeat";
  std::int64_t id = 0;
  std::vector<std::int64_t> running;
  // The round trips of the agent's last probe round, once each round: they
  // replace all it reported before (a peer left out is not reachable now).
  // Unset (left out): nothing new since the last report.
  std::optional<std::vector<latency_sample>> latency{};
  friend bool operator==(const heartbeat&, const heartbeat&) = default;
};

// Node -> server: the job's processes are running. Reply: ok {}.
struct job_started {
  static constexpr std::string_view type = "job_started";
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  friend bool operator==(const job_started&, const job_started&) = default;
};

// Node -> server: the job's --signal warning (without B:) went out on this
// node, its batch host; the server sends `signal` to the job's steps on its
// other nodes (kill with `steps`). Reply: ok {}.
struct job_signal {
  static constexpr std::string_view type = "job_signal";
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  std::int64_t signal = 0;
  friend bool operator==(const job_signal&, const job_signal&) = default;
};

// Node -> server: the job's processes are gone. `state` is final (COMPLETED,
// FAILED, CANCELLED or TIMEOUT); exactly one of exit_code and signal is set.
// Reply: ok {}.
struct job_exited {
  static constexpr std::string_view type = "job_exited";
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  core::job_state state = core::job_state::completed;
  std::optional<std::int64_t> exit_code;
  std::optional<std::int64_t> signal;
  // Why, in one line, when the agent knows more than the state says (the
  // kernel's OOM kill in the job's cgroup). Left out: nothing to add.
  std::optional<std::string> reason{};
  // What the job's processes used on this node (issue 32), as the agent
  // measured it at their end: CPU time (user and system, microseconds) from
  // the job's cgroup or the rusage of the processes its step reaped,
  // whichever is more, and the peak resident memory of its largest process
  // (KiB). Left out when the agent could not measure (its step was killed).
  std::optional<std::int64_t> user_cpu_us{};
  std::optional<std::int64_t> system_cpu_us{};
  std::optional<std::int64_t> max_rss_kb{};
  friend bool operator==(const job_exited&, const job_exited&) = default;
};

// Server -> node: start (this node's part of) a job as `user` (uid/gid).
// `procs` is the whole job's map (0/1 text, nprocs ones), `local_cpus` the
// cpus of this node to pin to, `nodelist` the job's nodes in the compact
// range form. `job_token` is the secret the job's shim authenticates with.
// Reply: ok {} once forked, or error.
struct launch {
  static constexpr std::string_view type = "launch";
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  job_spec job;
  std::string user;
  std::int64_t uid = 0;
  std::int64_t gid = 0;
  std::string procs;
  std::int64_t nprocs = 1;
  std::vector<std::int64_t> local_cpus;
  std::string nodelist;
  std::optional<std::string> job_token;
  // Where each processor of `procs` runs, in processor order (both empty, or
  // both with one entry per 1 of the map): its node's host and local cpu.
  std::vector<std::string> proc_hosts;
  std::vector<std::int64_t> proc_cpus;
  // An adaptive job: the hosts of the cluster's other nodes, where it may
  // grow; its mpirun starts a daemon on each at launch (spawns cannot add
  // hosts reliably in OpenMPI 4.1). Empty for rigid jobs and steps.
  std::vector<std::string> spare_hosts;
  friend bool operator==(const launch&, const launch&) = default;
};

// Server -> node: signal the job's process group; if it is still there after
// grace_s seconds, SIGKILL, unless escalate is false (fkill --signal: that
// signal only). `steps` (with escalate false): only what the job's first
// process there started, not that process (a --signal warning reaching the
// ranks an MPI daemon runs on another node of the job). Reply: ok {}.
struct kill {
  static constexpr std::string_view type = "kill";
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  std::int64_t signal = 15;
  std::int64_t grace_s = 10;
  bool escalate = true;
  bool steps = false;
  friend bool operator==(const kill&, const kill&) = default;
};

// Server -> node: the cpus of this node job `job_id` may use from now on:
// its cgroup's cpuset (and its steps') becomes exactly `cpus`. aqsd sends it
// to each node of an adaptive job whose map changes: the old and new map's
// cpus together before the new map goes to the shim, the new map's after
// the shim's ack, the old map's when the resize is not applied; and the
// current cpus again to an agent that registers. Empty: the job holds no
// processors on this node any more (what it still runs there, an idle MPI
// daemon, gets the node's cpus, as a daemon on a spare host does at
// launch). Repeating it changes nothing (idempotent). Reply: ok {}, or
// error not_found (the job does not run here), bad_request (a cpu the
// agent does not have), internal (the cgroup could not be written).
struct job_cpus {
  static constexpr std::string_view type = "job_cpus";
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  std::vector<std::int64_t> cpus;
  friend bool operator==(const job_cpus&, const job_cpus&) = default;
};

// ---- adaptive job shim ---------------------------------------------------

// Server -> job: apply this map at the next MPI_Migrate(). Epochs increase
// per job; only the newest map matters.
struct new_map {
  static constexpr std::string_view type = "new_map";
  std::int64_t job_id = 0;
  std::int64_t epoch = 1;
  std::string procs;
  std::vector<std::string> proc_hosts;  // as in launch
  std::vector<std::int64_t> proc_cpus;
  friend bool operator==(const new_map&, const new_map&) = default;
};

// Job -> server: the map of `epoch` is in effect now (`procs` as applied).
// Reply: ok {}; an ack of an old epoch gets invalid_state.
struct resize_ack {
  static constexpr std::string_view type = "resize_ack";
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  std::int64_t epoch = 1;
  std::string procs;
  // How the change went, as the shim measured it (microseconds; each absent
  // if unknown): received_at_us is the wall-clock time (Unix epoch) the map
  // arrived; wait_us until MPI_Migrate() took it up; spawn_us starting new
  // ranks; data_us moving data; total_us from arrival to this ack.
  std::optional<std::int64_t> received_at_us;
  std::optional<std::int64_t> wait_us;
  std::optional<std::int64_t> spawn_us;
  std::optional<std::int64_t> data_us;
  std::optional<std::int64_t> total_us;
  friend bool operator==(const resize_ack&, const resize_ack&) = default;
};

// Job -> server: MPI_Migrate() is about to apply the map of `epoch` (start
// ranks, move data); sent by the shim before it changes anything. Reply:
// ok {} if that map is still the one aqsd wants: from then on aqsd no longer
// times the resize out (the change is under way; its ack or the job's end
// closes it). invalid_state if the resize timed out or was replaced
// meanwhile: the job must not apply that map, and keeps what it has.
struct resize_begin {
  static constexpr std::string_view type = "resize_begin";
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  std::int64_t epoch = 1;
  friend bool operator==(const resize_begin&, const resize_begin&) = default;
};

// Job -> server: the map of `epoch` cannot be applied (new ranks could not be
// started, say); the job goes on with the processors it had. Reply: ok {}.
struct resize_refused {
  static constexpr std::string_view type = "resize_refused";
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  std::int64_t epoch = 1;
  std::string reason;
  friend bool operator==(const resize_refused&, const resize_refused&) = default;
};

// ---- live application values (AQS_Publish, aqs-publish) --------------------

// Limits of published values: a name is 1..k_max_value_name bytes of
// letters, digits, '_', '.', ':' and '-' (a metric name, shown on one line);
// a value is a finite number; one publish carries 1..k_max_publish_batch.
inline constexpr std::size_t k_max_value_name = 64;
inline constexpr std::size_t k_max_publish_batch = 256;

// One published value; `time_us`: when the job measured it (Unix epoch
// microseconds; absent: when aqsd receives it).
struct published_value {
  std::string name;
  double value = 0;
  std::optional<std::int64_t> time_us;
  friend bool operator==(const published_value&, const published_value&) = default;
};

// Whether `name` is a valid value name (the rule parse_message applies).
bool valid_value_name(std::string_view name) noexcept;

// Job -> server: named values the running job publishes (its shim's
// AQS_Publish, or aqs-publish in its script), over the job's own
// authenticated connection; `job_id` must be the connection's job. Reply:
// ok {"accepted": N, "dropped": M}: values past the job's rate or its
// series limit are dropped and counted, never an error (a flooding job is
// capped, not refused); error bad_request for a name or value that breaks
// the rules (nothing of that publish is kept).
struct publish {
  static constexpr std::string_view type = "publish";
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  std::vector<published_value> values;
  friend bool operator==(const publish&, const publish&) = default;
};

// ---- launching on the job's other nodes (aqs-rsh) ------------------------

// Job (a launcher connection) -> server: run `command` (a shell command
// line, run with /bin/sh -c) on `host`, the host name of one of the job's
// nodes, as the job's user, with `environment` ("KEY=VALUE"), for as long as
// the job runs. One at a time per job and node. Reply: ok {node} once it
// started, or error; then step_ended on this connection. Closing the
// connection ends the step.
struct remote_exec {
  static constexpr std::string_view type = "remote_exec";
  std::int64_t id = 0;
  std::int64_t job_id = 0;
  std::string host;
  std::string command;
  std::vector<std::string> environment;
  friend bool operator==(const remote_exec&, const remote_exec&) = default;
};

// Server -> job: the remote_exec step on `node` ended.
struct step_ended {
  static constexpr std::string_view type = "step_ended";
  std::int64_t job_id = 0;
  std::string node;
  std::optional<std::int64_t> exit_code;
  std::optional<std::int64_t> signal;
  friend bool operator==(const step_ended&, const step_ended&) = default;
};

// Node -> server: the agent is shutting down (SIGTERM) and has ended its
// jobs; the node goes DOWN at once instead of after the heartbeat timeout.
// Reply: ok {}, then the server closes the connection.
struct node_leaving {
  static constexpr std::string_view type = "node_leaving";
  std::int64_t id = 0;
  friend bool operator==(const node_leaving&, const node_leaving&) = default;
};

using message = std::variant<hello, challenge, ok, error, output, submit, cancel, list_jobs,
                             list_nodes, job_history, watch_job, shutdown, job_event,
                             register_node, heartbeat, job_started, job_exited, launch, kill,
                             new_map, resize_ack, resize_refused, remote_exec, step_ended, node_leaving,
                             resize_begin, issue_token, revoke_token, control, job_signal, job_cpus, accounts,
                             reservations, publish>;

// The wire "type" of a message.
std::string_view type_of(const message& m) noexcept;
// The request/reply correlation id, if the message has one.
std::optional<std::int64_t> id_of(const message& m) noexcept;
// Whether a peer that said hello with role `r` may send `m` to the server
// (hello itself is allowed to every role). The server answers anything else
// with error unauthorized.
bool may_send(peer_role r, const message& m) noexcept;
// Whether the server sends `m` to a peer of role `r` (the other half of the
// table: job_cpus, launch and kill go to node agents only, new_map to job
// shims only). A peer ignores a message not meant for its role.
bool may_receive(peer_role r, const message& m) noexcept;

// ---- JSON and frames -------------------------------------------------------

// The JSON object of a message, "type" included. Optional fields that are
// unset are left out.
nlohmann::json to_json(const message& m);

// Validates a JSON value as a message. Throws protocol_error only:
// unknown_type when "type" is a string naming no message, bad_request for
// everything else (not an object, "type" missing, a required field missing or
// of the wrong JSON type, a number out of range or not an integer, a string
// with NUL or over its bound, an array over its bound, inconsistent fields),
// with a one-line message naming the field ("job.min_pe"). The error carries
// the request's "id" when that could be read. Unknown fields are ignored;
// null counts as absent.
message parse_message(const nlohmann::json& j);
// Parses frame body text (bounded JSON parsing, see json_limits.hpp) and
// validates it as above.
message parse_message(std::string_view body);
// Exact overloads so a std::string or a literal is not ambiguous between the
// text and the JSON overload (json converts implicitly from both).
inline message parse_message(const std::string& body) { return parse_message(std::string_view(body)); }
inline message parse_message(const char* body) { return parse_message(std::string_view(body)); }

// The JSON text of a message (no frame header). Throws protocol_error
// (bad_request) if a string is not valid UTF-8.
std::string encode_body(const message& m);
// A complete frame (header + JSON). Throws protocol_error(bad_request) for
// invalid UTF-8 and protocol_error(too_large) past k_max_frame.
std::string encode(const message& m);

// An error reply for a protocol_error caught while handling a request.
error make_error(const protocol_error& e);

// A job geometry as its JSON object (the store keeps it as such), and back:
// validated as in a submit; throws protocol_error(bad_request) naming the field.
std::string geometry_json(const job_geometry& g);
job_geometry parse_geometry(std::string_view json_text);

}  // namespace aqs::protocol
