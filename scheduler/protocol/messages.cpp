// messages: JSON encoding and validating decoding of every protocol message.
#include "protocol/messages.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "protocol/base64.hpp"
#include "protocol/field_reader.hpp"
#include "protocol/framing.hpp"
#include "protocol/json_limits.hpp"

namespace aqs::protocol {

using nlohmann::json;

namespace {

using detail::reader;

constexpr reader::str_rule k_name_rule{k_max_name, true, true};
constexpr reader::str_rule k_path_rule{k_max_path, true, true};
constexpr reader::str_rule k_arg_rule{k_max_arg, false, false};

std::int64_t read_id(const reader& r) { return r.integer("id", 0, k_max_job_id); }
std::int64_t read_job_id(const reader& r) { return r.integer("job_id", 1, k_max_job_id); }

// A processor map: only '0' and '1', at least one '1' when `need_one`.
std::string read_map(const reader& r, const char* key, bool need_one) {
  std::string s = r.string(key, {static_cast<std::size_t>(k_max_pe), true, true});
  std::size_t ones = 0;
  for (const char c : s) {
    if (c != '0' && c != '1') r.fail(key, "must contain only 0 and 1");
    ones += c == '1' ? 1 : 0;
  }
  if (need_one && ones == 0) r.fail(key, "must contain at least one 1");
  return s;
}

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  });
}

// Node names appear in "node2:0-3,node3:0-1": no ':' or ',' or blanks.
// A host name as resolvers and MPI take it: letters, digits, '-', '.', '_'.
std::string checked_host_name(const reader& r, std::string_view key, std::string s) {
  for (const char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '.' || c == '_';
    if (!ok) r.fail(key, "must be a host name (letters, digits, '-', '.', '_')");
  }
  return s;
}
std::string read_host_name(const reader& r, const char* key) {
  return checked_host_name(r, key, r.string(key, k_name_rule));
}
std::vector<std::string> read_host_names(const reader& r, const char* key, std::size_t max_items) {
  std::vector<std::string> out = r.strings(key, max_items, k_name_rule);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = checked_host_name(r, std::string(key) + "[" + std::to_string(i) + "]", std::move(out[i]));
  }
  return out;
}

// proc_hosts/proc_cpus: both absent or both with one entry per processor.
void write_placement(json& j, const std::vector<std::string>& hosts, const std::vector<std::int64_t>& cpus) {
  if (hosts.empty() && cpus.empty()) return;
  j["proc_hosts"] = hosts;
  j["proc_cpus"] = cpus;
}
void read_placement(const reader& r, std::int64_t nprocs, std::vector<std::string>& hosts,
                    std::vector<std::int64_t>& cpus) {
  if (r.find("proc_hosts") == nullptr && r.find("proc_cpus") == nullptr) return;
  cpus = r.integers("proc_cpus", k_max_placement, 0, static_cast<std::int64_t>(k_max_cpus) - 1);
  if (static_cast<std::int64_t>(cpus.size()) != nprocs) r.fail("proc_cpus", "must have one entry per processor");
  const json* a = r.array("proc_hosts", k_max_placement, true);
  if (static_cast<std::int64_t>(a->size()) != nprocs) r.fail("proc_hosts", "must have one entry per processor");
  hosts.clear();
  hosts.reserve(a->size());
  for (std::size_t i = 0; i < a->size(); ++i) {
    const std::string key = "proc_hosts[" + std::to_string(i) + "]";
    if (!(*a)[i].is_string()) r.fail(key.c_str(), "must be a string");
    // Runs of one host are common: keep the check cheap for them.
    if (!hosts.empty() && (*a)[i].get_ref<const std::string&>() == hosts.back()) {
      hosts.push_back(hosts.back());
    } else {
      hosts.push_back(r.string_of(key, (*a)[i], k_name_rule));
    }
  }
}

std::string read_node_name(const reader& r, const char* key) {
  std::string s = r.string(key, k_name_rule);
  for (const char c : s) {
    if (c == ':' || c == ',' || c == ' ' || c == '/') {
      r.fail(key, "must not contain ':', ',', '/' or spaces");
    }
  }
  return s;
}

template <class T>
void put_opt(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

// ---- job_spec ---------------------------------------------------------

json job_to_json(const job_spec& s) {
  json j = json::object();
  j["name"] = s.name;
  put_opt(j, "script", s.script);
  j["argv"] = s.argv;
  j["workdir"] = s.workdir;
  j["environment"] = s.environment;
  j["stdout"] = s.stdout_pattern;
  put_opt(j, "stderr", s.stderr_pattern);
  j["min_pe"] = s.min_pe;
  j["max_pe"] = s.max_pe;
  j["adaptive"] = s.adaptive;
  put_opt(j, "walltime_s", s.walltime_s);
  j["afterok"] = s.afterok;
  j["requeue"] = s.requeue;
  put_opt(j, "submit_token", s.submit_token);
  j["interactive"] = s.interactive;
  put_opt(j, "umask", s.umask);
  return j;
}

// "environment": "KEY=VALUE" strings, KEY non-empty.
std::vector<std::string> read_environment(const reader& r) {
  auto env = r.strings("environment", k_max_env_entries, k_arg_rule);
  for (std::size_t i = 0; i < env.size(); ++i) {
    const auto eq = env[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      r.fail("environment[" + std::to_string(i) + "]", "must have the form KEY=VALUE");
    }
  }
  return env;
}

job_spec read_job(const reader& r) {
  job_spec s;
  s.name = r.string("name", k_name_rule);
  s.script = r.opt_string("script", {k_max_script, true, false});
  s.argv = r.strings("argv", k_max_argv, k_arg_rule);
  if (!s.script && s.argv.empty()) r.fail("argv", "must not be empty when there is no script");
  if (!s.script && s.argv.front().empty()) r.fail("argv[0]", "must not be empty");
  s.workdir = r.string("workdir", k_path_rule);
  if (s.workdir.front() != '/') r.fail("workdir", "must be an absolute path");
  s.environment = read_environment(r);
  if (auto o = r.opt_string("stdout", k_path_rule)) s.stdout_pattern = std::move(*o);
  s.stderr_pattern = r.opt_string("stderr", k_path_rule);
  s.min_pe = r.integer("min_pe", 1, k_max_pe);
  s.max_pe = r.integer("max_pe", 1, k_max_pe);
  if (s.max_pe < s.min_pe) r.fail("max_pe", "must be >= min_pe");
  s.adaptive = r.boolean("adaptive", false);
  if (!s.adaptive && s.min_pe != s.max_pe) {
    r.fail("max_pe", "must equal min_pe for a rigid job (min_pe < max_pe needs adaptive)");
  }
  s.walltime_s = r.opt_integer("walltime_s", 1, k_max_walltime_s);
  s.afterok = r.integers("afterok", k_max_ids, 1, k_max_job_id);
  s.requeue = r.boolean("requeue", false);
  s.submit_token = r.opt_string("submit_token", k_name_rule);
  s.interactive = r.boolean("interactive", false);
  s.umask = r.opt_integer("umask", 0, 0777);
  return s;
}

// ---- per-message encoding and decoding ----------------------------------

void write(json& j, const hello& m) {
  j["id"] = m.id;
  j["protocol"] = m.protocol;
  j["role"] = to_string(m.role);
  put_opt(j, "auth", m.auth);
  put_opt(j, "job_id", m.job_id);
  if (m.launcher) j["launcher"] = true;
}
void read(const reader& r, hello& m) {
  m.id = read_id(r);
  // Any integer is accepted here: the server must be able to answer a
  // newer client with unsupported_version naming both versions.
  m.protocol = r.integer("protocol", 0, k_max_job_id);
  const std::string role_text = r.string("role", k_name_rule);
  const auto role = parse_role(role_text);
  if (!role) r.fail("role", "must be \"client\", \"node\" or \"job\"");
  m.role = *role;
  m.auth = r.opt_string("auth", {128, true, true});
  m.job_id = r.opt_integer("job_id", 1, k_max_job_id);
  if (m.role == peer_role::job && !m.job_id) r.fail("job_id", "is required for role \"job\"");
  m.launcher = r.boolean("launcher", false);
  if (m.launcher && m.role != peer_role::job) r.fail("launcher", "is only for role \"job\"");
}

void write(json& j, const challenge& m) { j["nonce"] = m.nonce; }
void read(const reader& r, challenge& m) {
  m.nonce = r.string("nonce", {128, true, true});
  if (m.nonce.size() < 32 || !is_hex(m.nonce)) r.fail("nonce", "must be 32 to 128 hex digits");
}

void write(json& j, const ok& m) {
  if (m.result.is_object()) {
    for (const auto& [k, v] : m.result.items()) {
      if (k != "type" && k != "id") j[k] = v;
    }
  }
  j["id"] = m.id;
}
void read(const reader& r, ok& m, const json& whole) {
  m.id = read_id(r);
  m.result = json::object();
  for (const auto& [k, v] : whole.items()) {
    if (k != "type" && k != "id") m.result[k] = v;
  }
}

void write(json& j, const error& m) {
  j["id"] = m.id ? json(*m.id) : json(nullptr);
  j["code"] = to_string(m.code);
  // Handlers quote what peers sent and what the system said: whatever the
  // bytes, the reply must encode and the receiver must accept its length.
  j["message"] = utf8_safe(m.message, k_max_text);
}
void read(const reader& r, error& m) {
  m.id = r.opt_integer("id", 0, k_max_job_id);
  const std::string code = r.string("code", k_name_rule);
  m.code = parse_error_code(code).value_or(error_code::internal);
  m.message = r.string("message", {k_max_text, false, false});
}

void write(json& j, const output& m) {
  put_opt(j, "id", m.id);
  j["job_id"] = m.job_id;
  j["stream"] = m.stream;
  j["data"] = base64_encode(m.data);
}
void read(const reader& r, output& m) {
  m.id = r.opt_integer("id", 0, k_max_job_id);
  m.job_id = read_job_id(r);
  m.stream = r.string("stream", k_name_rule);
  if (m.stream != "stdout" && m.stream != "stderr") r.fail("stream", "must be \"stdout\" or \"stderr\"");
  const std::string b64 = r.string("data", {(k_max_output_chunk + 2) / 3 * 4, false, true});
  auto raw = base64_decode(b64);
  if (!raw) r.fail("data", "must be padded base64");
  m.data = std::move(*raw);
}

void write(json& j, const submit& m) {
  j["id"] = m.id;
  j["job"] = job_to_json(m.job);
}
void read(const reader& r, submit& m) {
  m.id = read_id(r);
  m.job = read_job(r.object("job"));
}

void write(json& j, const cancel& m) {
  j["id"] = m.id;
  j["job_ids"] = m.job_ids;
  put_opt(j, "signal", m.signal);
  put_opt(j, "user", m.user);
}
void read(const reader& r, cancel& m) {
  m.id = read_id(r);
  m.job_ids = r.integers("job_ids", k_max_ids, 1, k_max_job_id);
  m.signal = r.opt_integer("signal", 1, k_max_signal);
  m.user = r.opt_string("user", k_name_rule);
  if (m.job_ids.empty() && !m.user) r.fail("job_ids", "must not be empty when no user is given");
}

void write(json& j, const list_jobs& m) {
  j["id"] = m.id;
  j["all"] = m.all;
  put_opt(j, "user", m.user);
  json states = json::array();
  for (const auto s : m.states) states.push_back(core::to_string(s));
  j["states"] = std::move(states);
  j["job_ids"] = m.job_ids;
  put_opt(j, "after_id", m.after_id);
  put_opt(j, "limit", m.limit);
  if (m.newest) j["newest"] = true;
  put_opt(j, "before_id", m.before_id);
}
void read(const reader& r, list_jobs& m) {
  m.id = read_id(r);
  m.all = r.boolean("all", false);
  m.user = r.opt_string("user", k_name_rule);
  if (const json* a = r.array("states", core::k_all_job_states.size() * 4, false)) {
    for (std::size_t i = 0; i < a->size(); ++i) {
      m.states.push_back(r.state_of("states[" + std::to_string(i) + "]", (*a)[i]));
    }
  }
  m.job_ids = r.integers("job_ids", k_max_ids, 1, k_max_job_id);
  m.after_id = r.opt_integer("after_id", 0, k_max_job_id);
  m.limit = r.opt_integer("limit", 1, k_max_list);
  m.newest = r.boolean("newest", false);
  m.before_id = r.opt_integer("before_id", 1, k_max_job_id);
}

void write(json& j, const list_nodes& m) { j["id"] = m.id; }
void read(const reader& r, list_nodes& m) { m.id = read_id(r); }

void write(json& j, const job_history& m) {
  j["id"] = m.id;
  j["job_id"] = m.job_id;
}
void read(const reader& r, job_history& m) {
  m.id = read_id(r);
  m.job_id = read_job_id(r);
}

void write(json& j, const watch_job& m) {
  j["id"] = m.id;
  j["job_id"] = m.job_id;
}
void read(const reader& r, watch_job& m) {
  m.id = read_id(r);
  m.job_id = read_job_id(r);
}

void write(json& j, const shutdown& m) { j["id"] = m.id; }
void read(const reader& r, shutdown& m) { m.id = read_id(r); }

void write(json& j, const job_event& m) {
  put_opt(j, "id", m.id);
  j["job_id"] = m.job_id;
  j["state"] = core::to_string(m.state);
  put_opt(j, "exit_code", m.exit_code);
  put_opt(j, "signal", m.signal);
  put_opt(j, "procs", m.procs);
}
void read(const reader& r, job_event& m) {
  m.id = r.opt_integer("id", 0, k_max_job_id);
  m.job_id = read_job_id(r);
  m.state = r.state_of("state", r.need("state"));
  m.exit_code = r.opt_integer("exit_code", 0, 255);
  m.signal = r.opt_integer("signal", 1, k_max_signal);
  if (r.find("procs") != nullptr) m.procs = read_map(r, "procs", false);
}

void write(json& j, const register_node& m) {
  j["id"] = m.id;
  j["name"] = m.name;
  j["procs"] = m.procs;
  j["cpus"] = m.cpus;
  j["memory_mb"] = m.memory_mb;
  j["gpus"] = m.gpus;
  j["running"] = m.running;
  if (!m.host.empty()) j["host"] = m.host;
}
void read(const reader& r, register_node& m) {
  m.id = read_id(r);
  m.name = read_node_name(r, "name");
  m.procs = r.integer("procs", 1, k_max_pe);
  m.cpus = r.integers("cpus", k_max_cpus, 0, static_cast<std::int64_t>(k_max_cpus) - 1);
  if (m.cpus.empty()) r.fail("cpus", "must not be empty");
  m.memory_mb = r.integer_or("memory_mb", 0, std::int64_t{1} << 40, 0);
  m.gpus = r.integer_or("gpus", 0, 1 << 16, 0);
  m.running = r.integers("running", k_max_ids, 1, k_max_job_id);
  if (r.find("host") != nullptr) m.host = read_host_name(r, "host");
}

void write(json& j, const heartbeat& m) {
  j["id"] = m.id;
  j["running"] = m.running;
}
void read(const reader& r, heartbeat& m) {
  m.id = read_id(r);
  m.running = r.integers("running", k_max_ids, 1, k_max_job_id);
}

void write(json& j, const job_started& m) {
  j["id"] = m.id;
  j["job_id"] = m.job_id;
}
void read(const reader& r, job_started& m) {
  m.id = read_id(r);
  m.job_id = read_job_id(r);
}

void write(json& j, const job_exited& m) {
  j["id"] = m.id;
  j["job_id"] = m.job_id;
  j["state"] = core::to_string(m.state);
  put_opt(j, "exit_code", m.exit_code);
  put_opt(j, "signal", m.signal);
}
void read(const reader& r, job_exited& m) {
  m.id = read_id(r);
  m.job_id = read_job_id(r);
  m.state = r.state_of("state", r.need("state"));
  using core::job_state;
  if (m.state != job_state::completed && m.state != job_state::failed &&
      m.state != job_state::cancelled && m.state != job_state::timeout) {
    r.fail("state", "must be COMPLETED, FAILED, CANCELLED or TIMEOUT");
  }
  m.exit_code = r.opt_integer("exit_code", 0, 255);
  m.signal = r.opt_integer("signal", 1, k_max_signal);
  if (m.exit_code.has_value() == m.signal.has_value()) {
    r.fail("exit_code", "or 'signal' must be given, not both");
  }
}

void write(json& j, const launch& m) {
  j["id"] = m.id;
  j["job_id"] = m.job_id;
  j["job"] = job_to_json(m.job);
  j["user"] = m.user;
  j["uid"] = m.uid;
  j["gid"] = m.gid;
  j["procs"] = m.procs;
  j["nprocs"] = m.nprocs;
  j["local_cpus"] = m.local_cpus;
  j["nodelist"] = m.nodelist;
  put_opt(j, "job_token", m.job_token);
  write_placement(j, m.proc_hosts, m.proc_cpus);
  if (!m.spare_hosts.empty()) j["spare_hosts"] = m.spare_hosts;
}
void read(const reader& r, launch& m) {
  m.id = read_id(r);
  m.job_id = read_job_id(r);
  m.job = read_job(r.object("job"));
  m.user = r.string("user", k_name_rule);
  m.uid = r.integer("uid", 0, 0xfffffffe);
  m.gid = r.integer("gid", 0, 0xfffffffe);
  m.procs = read_map(r, "procs", true);
  m.nprocs = r.integer("nprocs", 1, k_max_pe);
  if (static_cast<std::int64_t>(std::count(m.procs.begin(), m.procs.end(), '1')) != m.nprocs) {
    r.fail("nprocs", "must equal the number of 1s in 'procs'");
  }
  m.local_cpus = r.integers("local_cpus", k_max_cpus, 0, static_cast<std::int64_t>(k_max_cpus) - 1);
  if (m.local_cpus.empty()) r.fail("local_cpus", "must not be empty");
  m.nodelist = r.string("nodelist", {k_max_path, true, true});
  m.job_token = r.opt_string("job_token", {128, true, true});
  read_placement(r, m.nprocs, m.proc_hosts, m.proc_cpus);
  m.spare_hosts = read_host_names(r, "spare_hosts", k_max_placement);
}

void write(json& j, const kill& m) {
  j["id"] = m.id;
  j["job_id"] = m.job_id;
  j["signal"] = m.signal;
  j["grace_s"] = m.grace_s;
  j["escalate"] = m.escalate;
}
void read(const reader& r, kill& m) {
  m.id = read_id(r);
  m.job_id = read_job_id(r);
  m.signal = r.integer("signal", 1, k_max_signal);
  m.grace_s = r.integer_or("grace_s", 0, k_max_grace_s, 10);
  m.escalate = r.boolean("escalate", true);
}

void write(json& j, const new_map& m) {
  j["job_id"] = m.job_id;
  j["epoch"] = m.epoch;
  j["procs"] = m.procs;
  write_placement(j, m.proc_hosts, m.proc_cpus);
}
void read(const reader& r, new_map& m) {
  m.job_id = read_job_id(r);
  m.epoch = r.integer("epoch", 1, k_max_job_id);
  m.procs = read_map(r, "procs", true);
  read_placement(r, static_cast<std::int64_t>(std::count(m.procs.begin(), m.procs.end(), '1')), m.proc_hosts,
                 m.proc_cpus);
}

void write(json& j, const resize_ack& m) {
  j["id"] = m.id;
  j["job_id"] = m.job_id;
  j["epoch"] = m.epoch;
  j["procs"] = m.procs;
  put_opt(j, "received_at_us", m.received_at_us);
  put_opt(j, "wait_us", m.wait_us);
  put_opt(j, "spawn_us", m.spawn_us);
  put_opt(j, "data_us", m.data_us);
  put_opt(j, "total_us", m.total_us);
}
void read(const reader& r, resize_ack& m) {
  m.id = read_id(r);
  m.job_id = read_job_id(r);
  m.epoch = r.integer("epoch", 1, k_max_job_id);
  m.procs = read_map(r, "procs", true);
  constexpr std::int64_t k_max_us = std::int64_t{1} << 53;
  m.received_at_us = r.opt_integer("received_at_us", 0, k_max_us);
  m.wait_us = r.opt_integer("wait_us", 0, k_max_us);
  m.spawn_us = r.opt_integer("spawn_us", 0, k_max_us);
  m.data_us = r.opt_integer("data_us", 0, k_max_us);
  m.total_us = r.opt_integer("total_us", 0, k_max_us);
}

void write(json& j, const resize_begin& m) {
  j["id"] = m.id;
  j["job_id"] = m.job_id;
  j["epoch"] = m.epoch;
}
void read(const reader& r, resize_begin& m) {
  m.id = read_id(r);
  m.job_id = read_job_id(r);
  m.epoch = r.integer("epoch", 1, k_max_job_id);
}

void write(json& j, const resize_refused& m) {
  j["id"] = m.id;
  j["job_id"] = m.job_id;
  j["epoch"] = m.epoch;
  j["reason"] = m.reason;
}
void read(const reader& r, resize_refused& m) {
  m.id = read_id(r);
  m.job_id = read_job_id(r);
  m.epoch = r.integer("epoch", 1, k_max_job_id);
  m.reason = r.string("reason", {k_max_text, true, true});
}

void write(json& j, const remote_exec& m) {
  j["id"] = m.id;
  j["job_id"] = m.job_id;
  j["host"] = m.host;
  j["command"] = m.command;
  j["environment"] = m.environment;
}
void read(const reader& r, remote_exec& m) {
  m.id = read_id(r);
  m.job_id = read_job_id(r);
  m.host = r.string("host", k_name_rule);
  m.command = r.string("command", {k_max_script, true, false});
  m.environment = read_environment(r);
}

void write(json& j, const step_ended& m) {
  j["job_id"] = m.job_id;
  j["node"] = m.node;
  put_opt(j, "exit_code", m.exit_code);
  put_opt(j, "signal", m.signal);
}
void read(const reader& r, step_ended& m) {
  m.job_id = read_job_id(r);
  m.node = r.string("node", k_name_rule);
  m.exit_code = r.opt_integer("exit_code", 0, 255);
  m.signal = r.opt_integer("signal", 1, k_max_signal);
}

void write(json& j, const node_leaving& m) { j["id"] = m.id; }
void read(const reader& r, node_leaving& m) { m.id = read_id(r); }

// Finds the alternative whose ::type is `t` and reads it.
template <std::size_t I = 0>
message read_by_type(std::string_view t, const reader& r, const json& whole) {
  if constexpr (I == std::variant_size_v<message>) {
    // Cut between characters: a split one would make the reply unencodable.
    std::string shown = utf8_safe(t, 64);
    for (char& c : shown) {
      if (static_cast<unsigned char>(c) < 0x20) c = '?';
    }
    throw protocol_error(error_code::unknown_type, "unknown message type \"" + shown + "\"");
  } else {
    using T = std::variant_alternative_t<I, message>;
    if (T::type == t) {
      T m;
      if constexpr (std::is_same_v<T, ok>) {
        read(r, m, whole);
      } else {
        read(r, m);
      }
      return m;
    }
    return read_by_type<I + 1>(t, r, whole);
  }
}

}  // namespace

// ---- public API --------------------------------------------------------

std::string_view to_string(peer_role r) noexcept {
  switch (r) {
    case peer_role::client: return "client";
    case peer_role::node: return "node";
    case peer_role::job: return "job";
  }
  return "client";
}

std::optional<peer_role> parse_role(std::string_view text) noexcept {
  if (text == "client") return peer_role::client;
  if (text == "node") return peer_role::node;
  if (text == "job") return peer_role::job;
  return std::nullopt;
}

std::string_view type_of(const message& m) noexcept {
  return std::visit([](const auto& x) { return std::decay_t<decltype(x)>::type; }, m);
}

std::optional<std::int64_t> id_of(const message& m) noexcept {
  return std::visit(
      [](const auto& x) -> std::optional<std::int64_t> {
        if constexpr (requires { x.id; }) {
          return x.id;
        } else {
          return std::nullopt;
        }
      },
      m);
}

bool may_send(peer_role r, const message& m) noexcept {
  if (std::holds_alternative<hello>(m)) return true;
  switch (r) {
    case peer_role::client:
      return std::holds_alternative<submit>(m) || std::holds_alternative<cancel>(m) ||
             std::holds_alternative<list_jobs>(m) || std::holds_alternative<list_nodes>(m) ||
             std::holds_alternative<job_history>(m) || std::holds_alternative<watch_job>(m) ||
             std::holds_alternative<shutdown>(m);
    case peer_role::node:
      return std::holds_alternative<register_node>(m) || std::holds_alternative<heartbeat>(m) ||
             std::holds_alternative<job_started>(m) || std::holds_alternative<job_exited>(m) ||
             std::holds_alternative<output>(m) || std::holds_alternative<ok>(m) ||
             std::holds_alternative<error>(m) || std::holds_alternative<node_leaving>(m);
    case peer_role::job:
      return std::holds_alternative<resize_begin>(m) || std::holds_alternative<resize_ack>(m) ||
             std::holds_alternative<resize_refused>(m) || std::holds_alternative<remote_exec>(m);
  }
  return false;
}

json to_json(const message& m) {
  json j = json::object();
  std::visit(
      [&j](const auto& x) {
        j["type"] = std::decay_t<decltype(x)>::type;
        write(j, x);
      },
      m);
  return j;
}

message parse_message(const json& j) {
  std::optional<std::int64_t> id;
  try {
    if (!j.is_object()) {
      throw protocol_error(error_code::bad_request, "a message must be a JSON object");
    }
    const reader r(j, "");
    id = r.opt_integer("id", 0, k_max_job_id);
  } catch (const protocol_error&) {
    // An unreadable id is reported by the message's own validation below,
    // or, when j is not an object, right here without an id.
    if (!j.is_object()) throw;
  }
  try {
    const reader r(j, "");
    const json* t = r.find("type");
    if (t == nullptr) r.fail("type", "is missing");
    if (!t->is_string()) r.fail("type", "must be a string");
    return read_by_type(t->get_ref<const std::string&>(), r, j);
  } catch (protocol_error& e) {
    if (!e.request_id()) e.set_request_id(id);
    throw;
  }
}

message parse_message(std::string_view body) { return parse_message(parse_json_bounded(body)); }

std::string encode_body(const message& m) {
  std::string body = dump_json(to_json(m));
  if (const auto* o = std::get_if<ok>(&m); o != nullptr && !o->raw_members.empty()) {
    body.back() = ',';  // the object always has "id" and "type": it is never empty
    body += o->raw_members;
    body += '}';
  }
  return body;
}

std::string encode(const message& m) { return encode_frame(encode_body(m)); }

error make_error(const protocol_error& e) {
  error out;
  out.id = e.request_id();
  out.code = e.code();
  out.message = utf8_safe(e.what(), k_max_text);
  return out;
}

}  // namespace aqs::protocol
