// messages: JSON encoding and validating decoding of every protocol message, from one description per message.
#include "protocol/messages.hpp"

#include "core/array_spec.hpp"
#include "core/dependency.hpp"
#include "core/speedup.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/enum_names.hpp"
#include "core/time_limit.hpp"
#include "protocol/base64.hpp"
#include "protocol/field_reader.hpp"
#include "protocol/framing.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/record.hpp"

namespace aqs::protocol {

// The parsers (core::parse_time_limit) and the wire accept the same longest limit.
static_assert(k_max_walltime_s == core::k_max_walltime_s);

using nlohmann::json;

namespace detail {

namespace {

// ---- rules of this file's fields ---------------------------------------

constexpr integer k_epoch{1, k_max_job_id};
constexpr integer k_exit_code{0, 255};
constexpr integer k_signal{1, k_max_signal};
constexpr integer k_cpu{0, static_cast<std::int64_t>(k_max_cpus) - 1};
constexpr integer k_micros{0, std::int64_t{1} << 53};
constexpr list<integer> k_job_ids{k_max_ids, k_job_id};
constexpr list<integer> k_cpus{k_max_cpus, k_cpu};
constexpr text k_arg{k_max_arg, false, false};
constexpr text k_script{k_max_script, true, false};
constexpr text k_secret{128, true, true};  // auth, nonces, job tokens

// The role a peer declares in hello.
struct role_name {
  json write(peer_role r) const { return to_string(r); }
  peer_role read(const reader& in, std::string_view key, const json& v) const {
    const auto role = parse_role(k_name.read(in, key, v));
    if (!role) in.fail(key, "must be \"client\", \"node\" or \"job\"");
    return *role;
  }
};

// Handlers quote what peers sent and what the system said: whatever the
// bytes, the reply must encode and the receiver must accept its length.
struct quoted_text {
  json write(const std::string& v) const { return utf8_safe(v, k_max_text); }
  std::string read(const reader& in, std::string_view key, const json& v) const {
    return text{k_max_text, false, false}.read(in, key, v);
  }
};

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  });
}

struct hex_nonce {
  json write(const std::string& v) const { return v; }
  std::string read(const reader& in, std::string_view key, const json& v) const {
    std::string s = k_secret.read(in, key, v);
    if (s.size() < 32 || !is_hex(s)) in.fail(key, "must be 32 to 128 hex digits");
    return s;
  }
};

struct stream_name {
  json write(const std::string& v) const { return v; }
  std::string read(const reader& in, std::string_view key, const json& v) const {
    std::string s = k_name.read(in, key, v);
    if (s != "stdout" && s != "stderr") in.fail(key, "must be \"stdout\" or \"stderr\"");
    return s;
  }
};

// Raw bytes, padded base64 on the wire.
struct base64_data {
  json write(const std::string& v) const { return base64_encode(v); }
  std::string read(const reader& in, std::string_view key, const json& v) const {
    auto raw = base64_decode(text{(k_max_output_chunk + 2) / 3 * 4, false, true}.read(in, key, v));
    if (!raw) in.fail(key, "must be padded base64");
    return std::move(*raw);
  }
};

struct absolute_path {
  json write(const std::string& v) const { return v; }
  std::string read(const reader& in, std::string_view key, const json& v) const {
    std::string s = k_path.read(in, key, v);
    if (s.front() != '/') in.fail(key, "must be an absolute path");
    return s;
  }
};

// "KEY=VALUE" strings, KEY non-empty. Every entry is checked as a string
// before any is checked for its '='.
struct environment_list {
  json write(const std::vector<std::string>& v) const { return v; }
  std::vector<std::string> read(const reader& in, std::string_view key, const json& v) const {
    auto env = list<text>{k_max_env_entries, k_arg}.read(in, key, v);
    for (std::size_t i = 0; i < env.size(); ++i) {
      const auto eq = env[i].find('=');
      if (eq == std::string::npos || eq == 0) in.fail(element_key(key, i), "must have the form KEY=VALUE");
    }
    return env;
  }
};

// Node names appear in "node2:0-3,node3:0-1": no ':' or ',' or blanks.
struct node_name {
  json write(const std::string& v) const { return v; }
  std::string read(const reader& in, std::string_view key, const json& v) const {
    std::string s = k_name.read(in, key, v);
    for (const char c : s) {
      if (c == ':' || c == ',' || c == ' ' || c == '/') in.fail(key, "must not contain ':', ',', '/' or spaces");
    }
    return s;
  }
};

// A job's final state as a node reports it.
struct exit_state {
  json write(core::job_state s) const { return core::to_string(s); }
  core::job_state read(const reader& in, std::string_view key, const json& v) const {
    using core::job_state;
    const job_state s = job_state_name{}.read(in, key, v);
    if (s != job_state::completed && s != job_state::failed && s != job_state::cancelled && s != job_state::timeout &&
        s != job_state::out_of_memory) {
      in.fail(key, "must be COMPLETED, FAILED, CANCELLED, TIMEOUT or OUT_OF_MEMORY");
    }
    return s;
  }
};

std::int64_t ones(const std::string& map) { return static_cast<std::int64_t>(std::count(map.begin(), map.end(), '1')); }

// proc_hosts/proc_cpus: both absent or both with one entry per processor
// (`count` of the record). Read as one entry, because each list is checked
// against the count.
template <class R>
struct placement_entry {
  std::vector<std::string> R::*hosts;
  std::vector<std::int64_t> R::*cpus;
  std::int64_t (*count)(const R&);

  void write(json& j, const R& m) const {
    if ((m.*hosts).empty() && (m.*cpus).empty()) return;
    j["proc_hosts"] = m.*hosts;
    j["proc_cpus"] = m.*cpus;
  }
  void read(const reader& in, R& m) const {
    if (in.find("proc_hosts") == nullptr && in.find("proc_cpus") == nullptr) return;
    const std::int64_t n = count(m);
    auto& cpus_out = m.*cpus;
    cpus_out = in.integers("proc_cpus", k_max_placement, k_cpu.lo, k_cpu.hi);
    if (static_cast<std::int64_t>(cpus_out.size()) != n) in.fail("proc_cpus", "must have one entry per processor");
    const json* a = in.array("proc_hosts", k_max_placement, true);
    if (static_cast<std::int64_t>(a->size()) != n) in.fail("proc_hosts", "must have one entry per processor");
    auto& hosts_out = m.*hosts;
    hosts_out.clear();
    hosts_out.reserve(a->size());
    for (std::size_t i = 0; i < a->size(); ++i) {
      const std::string key = element_key("proc_hosts", i);
      if (!(*a)[i].is_string()) in.fail(key, "must be a string");
      // Runs of one host are common: keep the check cheap for them.
      if (!hosts_out.empty() && (*a)[i].get_ref<const std::string&>() == hosts_out.back()) {
        hosts_out.push_back(hosts_out.back());
      } else {
        hosts_out.push_back(k_name.read(in, key, (*a)[i]));
      }
    }
  }
};

}  // namespace

// ---- one description per message ---------------------------------------------

template <>
struct record<job_geometry> {
  using R = job_geometry;
  static constexpr auto fields = std::tuple{
      field("ntasks", &R::ntasks, k_pe),
      field("cpus_per_task", &R::cpus_per_task, k_pe),
      field("ntasks_per_node", &R::ntasks_per_node, k_pe),
      field("nodes_min", &R::nodes_min, k_pe),
      field("nodes_max", &R::nodes_max, k_pe),
      check<R>([](const reader& in, const R& g) {
        if (g.nodes_min && g.nodes_max && *g.nodes_max < *g.nodes_min) in.fail("nodes_max", "must be >= nodes_min");
        if (g.nodes_min && *g.nodes_min > g.ntasks) in.fail("nodes_min", "must be <= ntasks (a node with no task)");
        if (g.ntasks > k_max_pe / g.cpus_per_task) in.fail("cpus_per_task", "ntasks * cpus_per_task is too large");
      }),
      field("exclusive", &R::exclusive, flag{}, presence::sparse),
      field("mem_per_node_mb", &R::mem_per_node_mb, k_memory_mb),
      field("mem_per_cpu_mb", &R::mem_per_cpu_mb, k_memory_mb),
      check<R>([](const reader& in, const R& g) {
        if (g.mem_per_node_mb && g.mem_per_cpu_mb) in.fail("mem_per_cpu_mb", "give memory per node or per cpu, not both");
      }),
      field("gpus_per_node", &R::gpus_per_node, k_gpus),
      field("partition", &R::partition, k_name),
      field("recorded", &R::recorded, list<text>{256, k_name}, presence::sparse),
      field("array", &R::array, k_name),
      check<R>([](const reader& in, const R& g) {
        if (!g.array) return;
        try {
          (void)core::parse_array_spec(*g.array);
        } catch (const std::invalid_argument& e) {
          in.fail("array", e.what());
        }
      }),
      field("array_task_id", &R::array_task_id, integer{0, core::k_max_array_index}),
      field("array_job_id", &R::array_job_id, k_job_id),
      field("array_max_running", &R::array_max_running, integer{1, core::k_max_array_index}),
      field("array_task_count", &R::array_task_count, integer{1, core::k_max_array_index}),
      field("dependency", &R::dependency, text{k_max_path, true, true}),
      field("begin_time", &R::begin_time, integer{0, std::int64_t{1} << 40}),
      field("pref_pe", &R::pref_pe, integer{1, k_max_pe}),
      field("speedup", &R::speedup, text{1024, true, true}),
      check<R>([](const reader& in, const R& g) {
        if (!g.speedup) return;
        try {
          (void)core::speedup_model::parse(*g.speedup);
        } catch (const std::invalid_argument& e) {
          in.fail("speedup", e.what());
        }
      }),
      field("resize_cost_s", &R::resize_cost_s, integer{0, 86400}),
      check<R>([](const reader& in, const R& g) {
        if (!g.dependency) return;
        try {
          (void)core::parse_dependency(*g.dependency, k_max_ids);
        } catch (const std::invalid_argument& e) {
          in.fail("dependency", e.what());
        }
      }),
  };
};

template <>
struct record<job_spec> {
  using R = job_spec;
  static constexpr auto fields = std::tuple{
      field("name", &R::name, k_name),
      field("script", &R::script, k_script),
      field("argv", &R::argv, list<text>{k_max_argv, k_arg}),
      check<R>([](const reader& in, const R& s) {
        if (!s.script && s.argv.empty()) in.fail("argv", "must not be empty when there is no script");
        if (!s.script && s.argv.front().empty()) in.fail("argv[0]", "must not be empty");
      }),
      field("workdir", &R::workdir, absolute_path{}),
      field("environment", &R::environment, environment_list{}),
      field("stdout", &R::stdout_pattern, k_path, presence::defaulted),
      field("stderr", &R::stderr_pattern, k_path),
      field("min_pe", &R::min_pe, k_pe),
      field("max_pe", &R::max_pe, k_pe),
      check<R>([](const reader& in, const R& s) {
        if (s.max_pe < s.min_pe) in.fail("max_pe", "must be >= min_pe");
      }),
      field("adaptive", &R::adaptive, flag{}),
      check<R>([](const reader& in, const R& s) {
        if (!s.adaptive && s.min_pe != s.max_pe) {
          in.fail("max_pe", "must equal min_pe for a rigid job (min_pe < max_pe needs adaptive)");
        }
      }),
      field("walltime_s", &R::walltime_s, integer{1, k_max_walltime_s}),
      field("afterok", &R::afterok, k_job_ids),
      field("requeue", &R::requeue, flag{}),
      field("submit_token", &R::submit_token, k_name),
      field("interactive", &R::interactive, flag{}),
      field("umask", &R::umask, integer{0, 0777}),
      field("geometry", &R::geometry, object<job_geometry>{}),
      check<R>([](const reader& in, const R& s) {
        if (!s.geometry) return;
        const auto& g = *s.geometry;
        if (!s.adaptive && g.ntasks * g.cpus_per_task != s.min_pe) {
          in.fail("geometry.ntasks", "ntasks * cpus_per_task must equal min_pe for a rigid job");
        }
      }),
  };
};

template <>
struct record<hello> {
  using R = hello;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      // Any version is read: the server must be able to answer a newer
      // client with unsupported_version naming both versions.
      field("protocol", &R::protocol, integer{0, k_max_job_id}),
      field("role", &R::role, role_name{}),
      field("auth", &R::auth, k_secret),
      field("job_id", &R::job_id, k_job_id),
      check<R>([](const reader& in, const R& m) {
        if (m.role == peer_role::job && !m.job_id) in.fail("job_id", "is required for role \"job\"");
      }),
      field("launcher", &R::launcher, flag{}, presence::sparse),
      check<R>([](const reader& in, const R& m) {
        if (m.launcher && m.role != peer_role::job) in.fail("launcher", "is only for role \"job\"");
      }),
      field("map_epoch", &R::map_epoch, k_epoch),
      check<R>([](const reader& in, const R& m) {
        if (m.map_epoch && (m.role != peer_role::job || m.launcher)) in.fail("map_epoch", "is only for a job's shim");
      }),
  };
};

template <>
struct record<challenge> {
  static constexpr auto fields = std::tuple{field("nonce", &challenge::nonce, hex_nonce{})};
};

// ok is the envelope of the replies (replies.hpp describes what they hold):
// its members are whatever the result holds, so it is written by hand below.

template <>
struct record<error> {
  using R = error;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id, presence::nullable),
      field("code", &R::code, error_code_name{}),
      field("message", &R::message, quoted_text{}),
  };
};

template <>
struct record<output> {
  using R = output;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("job_id", &R::job_id, k_job_id),
      field("stream", &R::stream, stream_name{}),
      field("data", &R::data, base64_data{}),
  };
};

template <>
struct record<submit> {
  static constexpr auto fields = std::tuple{
      field("id", &submit::id, k_request_id),
      field("job", &submit::job, object<job_spec>{}),
      field("test_only", &submit::test_only, flag{}, presence::sparse),
  };
};

template <>
struct record<cancel> {
  using R = cancel;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("job_ids", &R::job_ids, k_job_ids),
      field("signal", &R::signal, k_signal),
      field("user", &R::user, k_name),
      field("array_tasks", &R::array_tasks, list<text>{k_max_ids, k_name}, presence::sparse),
      check<R>([](const reader& in, const R& m) {
        if (m.job_ids.empty() && !m.user && m.array_tasks.empty()) {
          in.fail("job_ids", "must not be empty when no user is given");
        }
      }),
  };
};

template <>
struct record<control> {
  using R = control;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("action", &R::action, k_name),
      field("job_ids", &R::job_ids, k_job_ids),
      field("min_pe", &R::min_pe, integer{1, k_max_pe}),
      field("max_pe", &R::max_pe, integer{1, k_max_pe}),
      field("time_limit_s", &R::time_limit_s, integer{0, k_max_walltime_s}),
      check<R>([](const reader& in, const R& m) {
        static constexpr std::string_view actions[] = {"hold", "release", "suspend", "resume", "requeue", "update"};
        if (std::find(std::begin(actions), std::end(actions), m.action) == std::end(actions)) {
          in.fail("action", "must be one of hold, release, suspend, resume, requeue, update");
        }
        if (m.job_ids.empty()) in.fail("job_ids", "must not be empty");
        const bool sized = m.min_pe || m.max_pe || m.time_limit_s;
        if (m.action == "update" && !sized) in.fail("action", "update needs min_pe, max_pe or time_limit_s");
        if (m.action != "update" && sized) in.fail("action", "only update takes min_pe, max_pe or time_limit_s");
        if (m.min_pe && m.max_pe && *m.min_pe > *m.max_pe) in.fail("max_pe", "must not be below min_pe");
      }),
  };
};

template <>
struct record<list_jobs> {
  using R = list_jobs;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("all", &R::all, flag{}),
      field("user", &R::user, k_name),
      field("states", &R::states, list<job_state_name>{core::k_all_job_states.size() * 4, {}}),
      field("job_ids", &R::job_ids, k_job_ids),
      field("after_id", &R::after_id, k_request_id),
      field("limit", &R::limit, integer{1, k_max_list}),
      field("newest", &R::newest, flag{}, presence::sparse),
      field("before_id", &R::before_id, k_job_id),
      field("usage", &R::usage, flag{}, presence::sparse),
  };
};

template <>
struct record<list_nodes> {
  static constexpr auto fields = std::tuple{field("id", &list_nodes::id, k_request_id)};
};

template <>
struct record<job_history> {
  static constexpr auto fields = std::tuple{
      field("id", &job_history::id, k_request_id),
      field("job_id", &job_history::job_id, k_job_id),
  };
};

template <>
struct record<watch_job> {
  static constexpr auto fields = std::tuple{
      field("id", &watch_job::id, k_request_id),
      field("job_id", &watch_job::job_id, k_job_id),
  };
};

template <>
struct record<shutdown> {
  static constexpr auto fields = std::tuple{field("id", &shutdown::id, k_request_id)};
};

template <>
struct record<issue_token> {
  static constexpr auto fields = std::tuple{
      field("id", &issue_token::id, k_request_id),
      field("lifespan_s", &issue_token::lifespan_s, integer{1, k_max_token_lifespan_s}),
      field("login", &issue_token::login, flag{}, presence::sparse),
  };
};

template <>
struct record<revoke_token> {
  using R = revoke_token;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("token_id", &R::token_id, k_name),
      field("all", &R::all, flag{}, presence::sparse),
      check<R>([](const reader& in, const R& m) {
        if (m.all == m.token_id.has_value()) in.fail("token_id", "is required, unless all is true (and not with it)");
      }),
  };
};

template <>
struct record<accounts> {
  using R = accounts;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("action", &R::action, k_name),
      field("entity", &R::entity, k_name),
      field("record", &R::record, text{65536, true, false}),
      field("name", &R::name, k_name),
      field("account", &R::account, k_name),
      field("make_default", &R::make_default, flag{}, presence::sparse),
      field("from_s", &R::from_s, integer{0, std::int64_t{1} << 40}),
      field("to_s", &R::to_s, integer{0, std::int64_t{1} << 40}),
      check<R>([](const reader& in, const R& m) {
        static constexpr std::string_view actions[] = {"show", "shares", "priority", "usage", "add", "modify", "delete"};
        if (std::find(std::begin(actions), std::end(actions), m.action) == std::end(actions)) {
          in.fail("action", "must be one of show, shares, priority, usage, add, modify, delete");
        }
        if (m.from_s && m.to_s && *m.to_s < *m.from_s) in.fail("to_s", "must not be before from_s");
        const bool change = m.action == "add" || m.action == "modify" || m.action == "delete";
        if (change && (!m.entity || (*m.entity != "account" && *m.entity != "user" && *m.entity != "qos"))) {
          in.fail("entity", "must be account, user or qos");
        }
        if ((m.action == "add" || m.action == "modify") && !m.record) in.fail("record", "is required");
        if (m.action == "delete" && !m.name) in.fail("name", "is required");
      }),
  };
};

template <>
struct record<reservations> {
  using R = reservations;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("action", &R::action, k_name),
      field("name", &R::name, k_name),
      field("record", &R::record, text{65536, true, false}),
      check<R>([](const reader& in, const R& m) {
        static constexpr std::string_view actions[] = {"show", "create", "update", "delete"};
        if (std::find(std::begin(actions), std::end(actions), m.action) == std::end(actions)) {
          in.fail("action", "must be one of show, create, update, delete");
        }
        if ((m.action == "create" || m.action == "update") && !m.record) in.fail("record", "is required");
        if (m.action == "delete" && !m.name) in.fail("name", "is required");
      }),
  };
};

template <>
struct record<job_event> {
  using R = job_event;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("job_id", &R::job_id, k_job_id),
      field("state", &R::state, job_state_name{}),
      field("exit_code", &R::exit_code, k_exit_code),
      field("signal", &R::signal, k_signal),
      field("procs", &R::procs, proc_map{false}),
  };
};

template <>
struct record<register_node> {
  using R = register_node;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("name", &R::name, node_name{}),
      field("procs", &R::procs, k_pe),
      field("cpus", &R::cpus, k_cpus),
      check<R>([](const reader& in, const R& m) {
        if (m.cpus.empty()) in.fail("cpus", "must not be empty");
      }),
      field("memory_mb", &R::memory_mb, k_memory_mb, presence::defaulted),
      field("gpus", &R::gpus, k_gpus, presence::defaulted),
      field("running", &R::running, k_job_ids),
      field("host", &R::host, host_name{}, presence::sparse),
      field("probe_port", &R::probe_port, integer{0, 65535}, presence::sparse),
      field("cluster_id", &R::cluster_id, cluster_id_text{}, presence::sparse),
      field("containment", &R::containment, text{k_max_text, false, true}, presence::sparse),
  };
};

template <>
struct record<heartbeat> {
  static constexpr auto fields = std::tuple{
      field("id", &heartbeat::id, k_request_id),
      field("running", &heartbeat::running, k_job_ids),
      field("latency", &heartbeat::latency, k_latency_samples),
  };
};

template <>
struct record<job_started> {
  static constexpr auto fields = std::tuple{
      field("id", &job_started::id, k_request_id),
      field("job_id", &job_started::job_id, k_job_id),
  };
};

template <>
struct record<job_exited> {
  using R = job_exited;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("job_id", &R::job_id, k_job_id),
      field("state", &R::state, exit_state{}),
      field("exit_code", &R::exit_code, k_exit_code),
      field("signal", &R::signal, k_signal),
      field("reason", &R::reason, text{k_max_text, true, true}),
      field("user_cpu_us", &R::user_cpu_us, k_micros),
      field("system_cpu_us", &R::system_cpu_us, k_micros),
      field("max_rss_kb", &R::max_rss_kb, integer{0, std::int64_t{1} << 50}),
      check<R>([](const reader& in, const R& m) {
        if (m.exit_code.has_value() == m.signal.has_value()) {
          in.fail("exit_code", "or 'signal' must be given, not both");
        }
      }),
  };
};

template <>
struct record<launch> {
  using R = launch;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("job_id", &R::job_id, k_job_id),
      field("job", &R::job, object<job_spec>{}),
      field("user", &R::user, k_name),
      field("uid", &R::uid, integer{0, 0xfffffffe}),
      field("gid", &R::gid, integer{0, 0xfffffffe}),
      field("procs", &R::procs, proc_map{true}),
      field("nprocs", &R::nprocs, k_pe),
      check<R>([](const reader& in, const R& m) {
        if (ones(m.procs) != m.nprocs) in.fail("nprocs", "must equal the number of 1s in 'procs'");
      }),
      field("local_cpus", &R::local_cpus, k_cpus),
      check<R>([](const reader& in, const R& m) {
        if (m.local_cpus.empty()) in.fail("local_cpus", "must not be empty");
      }),
      field("nodelist", &R::nodelist, k_path),
      field("job_token", &R::job_token, k_secret),
      placement_entry<R>{&R::proc_hosts, &R::proc_cpus, [](const R& m) { return m.nprocs; }},
      field("spare_hosts", &R::spare_hosts, host_list{k_max_placement}, presence::sparse),
  };
};

template <>
struct record<kill> {
  using R = kill;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("job_id", &R::job_id, k_job_id),
      field("signal", &R::signal, k_signal),
      field("grace_s", &R::grace_s, integer{0, k_max_grace_s}, presence::defaulted),
      field("escalate", &R::escalate, flag{}),
      field("steps", &R::steps, flag{}, presence::sparse),
  };
};

template <>
struct record<job_signal> {
  using R = job_signal;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("job_id", &R::job_id, k_job_id),
      field("signal", &R::signal, k_signal),
  };
};

template <>
struct record<new_map> {
  using R = new_map;
  static constexpr auto fields = std::tuple{
      field("job_id", &R::job_id, k_job_id),
      field("epoch", &R::epoch, k_epoch),
      field("procs", &R::procs, proc_map{true}),
      placement_entry<R>{&R::proc_hosts, &R::proc_cpus, [](const R& m) { return ones(m.procs); }},
  };
};

template <>
struct record<resize_ack> {
  using R = resize_ack;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("job_id", &R::job_id, k_job_id),
      field("epoch", &R::epoch, k_epoch),
      field("procs", &R::procs, proc_map{true}),
      field("received_at_us", &R::received_at_us, k_micros),
      field("wait_us", &R::wait_us, k_micros),
      field("spawn_us", &R::spawn_us, k_micros),
      field("data_us", &R::data_us, k_micros),
      field("total_us", &R::total_us, k_micros),
  };
};

template <>
struct record<resize_begin> {
  static constexpr auto fields = std::tuple{
      field("id", &resize_begin::id, k_request_id),
      field("job_id", &resize_begin::job_id, k_job_id),
      field("epoch", &resize_begin::epoch, k_epoch),
  };
};

template <>
struct record<resize_refused> {
  using R = resize_refused;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("job_id", &R::job_id, k_job_id),
      field("epoch", &R::epoch, k_epoch),
      field("reason", &R::reason, text{k_max_text, true, true}),
  };
};

// A published value's name (valid_value_name).
struct value_name {
  json write(const std::string& v) const { return v; }
  std::string read(const reader& in, std::string_view key, const json& v) const {
    if (!v.is_string()) in.fail(key, "must be a string");
    const auto& s = v.get_ref<const std::string&>();
    if (s.empty() || s.size() > k_max_value_name) {
      in.fail(key, "must be 1.." + std::to_string(k_max_value_name) + " bytes");
    }
    if (!valid_value_name(s)) in.fail(key, "must be letters, digits, '_', '.', ':' or '-'");
    return s;
  }
};

// A finite JSON number.
struct finite_number {
  json write(double v) const { return v; }
  double read(const reader& in, std::string_view key, const json& v) const {
    if (!v.is_number()) in.fail(key, "must be a number");
    const double d = v.get<double>();
    if (!std::isfinite(d)) in.fail(key, "must be a finite number");
    return d;
  }
};

template <>
struct record<published_value> {
  using R = published_value;
  static constexpr auto fields = std::tuple{
      field("name", &R::name, value_name{}),
      field("value", &R::value, finite_number{}),
      field("time_us", &R::time_us, k_micros),
  };
};

template <>
struct record<publish> {
  using R = publish;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("job_id", &R::job_id, k_job_id),
      field("values", &R::values, list<object<published_value>>{k_max_publish_batch, {}}),
      check<R>([](const reader& in, const R& m) {
        if (m.values.empty()) in.fail("values", "must hold at least one value");
      }),
  };
};

template <>
struct record<remote_exec> {
  using R = remote_exec;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("job_id", &R::job_id, k_job_id),
      field("host", &R::host, k_name),
      field("command", &R::command, k_script),
      field("environment", &R::environment, environment_list{}),
  };
};

template <>
struct record<step_ended> {
  using R = step_ended;
  static constexpr auto fields = std::tuple{
      field("job_id", &R::job_id, k_job_id),
      field("node", &R::node, k_name),
      field("exit_code", &R::exit_code, k_exit_code),
      field("signal", &R::signal, k_signal),
  };
};

template <>
struct record<job_cpus> {
  using R = job_cpus;
  static constexpr auto fields = std::tuple{
      field("id", &R::id, k_request_id),
      field("job_id", &R::job_id, k_job_id),
      // Required although it may be empty: a job_cpus without it must not
      // read as "none of its processors here".
      field("cpus", &R::cpus, k_cpus, presence::required),
  };
};

template <>
struct record<node_leaving> {
  static constexpr auto fields = std::tuple{field("id", &node_leaving::id, k_request_id)};
};

}  // namespace detail

namespace {

using detail::reader;

// ok carries the members of its result beside "type" and "id".
void write_ok(json& j, const ok& m) {
  if (m.result.is_object()) {
    for (const auto& [k, v] : m.result.items()) {
      if (k != "type" && k != "id") j[k] = v;
    }
  }
  j["id"] = m.id;
}
void read_ok(const reader& r, ok& m, const json& whole) {
  m.id = detail::k_request_id.read(r, "id", r.need("id"));
  m.result = json::object();
  for (const auto& [k, v] : whole.items()) {
    if (k != "type" && k != "id") m.result[k] = v;
  }
}

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
        read_ok(r, m, whole);
      } else {
        detail::read_fields(r, m);
      }
      return m;
    }
    return read_by_type<I + 1>(t, r, whole);
  }
}

}  // namespace

// ---- public API --------------------------------------------------------

namespace {
constexpr core::enum_table<peer_role, 3> k_roles = {{
    {peer_role::client, "client"},
    {peer_role::node, "node"},
    {peer_role::job, "job"},
}};
}  // namespace

std::string_view to_string(peer_role r) noexcept { return core::name_in(k_roles, r, "client"); }

std::optional<peer_role> parse_role(std::string_view text) noexcept { return core::value_in(k_roles, text); }

bool valid_value_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > k_max_value_name) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
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
             std::holds_alternative<shutdown>(m) || std::holds_alternative<issue_token>(m) ||
             std::holds_alternative<revoke_token>(m) || std::holds_alternative<control>(m) ||
             std::holds_alternative<accounts>(m) || std::holds_alternative<reservations>(m);
    case peer_role::node:
      return std::holds_alternative<register_node>(m) || std::holds_alternative<heartbeat>(m) ||
             std::holds_alternative<job_started>(m) || std::holds_alternative<job_exited>(m) ||
             std::holds_alternative<output>(m) || std::holds_alternative<ok>(m) ||
             std::holds_alternative<error>(m) || std::holds_alternative<node_leaving>(m) ||
             std::holds_alternative<job_signal>(m);
    case peer_role::job:
      return std::holds_alternative<resize_begin>(m) || std::holds_alternative<resize_ack>(m) ||
             std::holds_alternative<resize_refused>(m) || std::holds_alternative<remote_exec>(m) ||
             std::holds_alternative<control>(m) || std::holds_alternative<publish>(m);
  }
  return false;
}

bool may_receive(peer_role r, const message& m) noexcept {
  // Replies and the TCP handshake's challenge go to every role.
  if (std::holds_alternative<ok>(m) || std::holds_alternative<error>(m) || std::holds_alternative<challenge>(m)) {
    return true;
  }
  switch (r) {
    case peer_role::client:
      return std::holds_alternative<output>(m) || std::holds_alternative<job_event>(m);
    case peer_role::node:
      return std::holds_alternative<launch>(m) || std::holds_alternative<kill>(m) ||
             std::holds_alternative<job_cpus>(m);
    case peer_role::job:
      return std::holds_alternative<new_map>(m) || std::holds_alternative<step_ended>(m);
  }
  return false;
}

json to_json(const message& m) {
  json j = json::object();
  std::visit(
      [&j](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        j["type"] = T::type;
        if constexpr (std::is_same_v<T, ok>) {
          write_ok(j, x);
        } else {
          detail::write_fields(j, x);
        }
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

std::string geometry_json(const job_geometry& g) { return dump_json(detail::to_object(g)); }

job_geometry parse_geometry(std::string_view json_text) {
  const json j = parse_json_bounded(json_text);
  if (!j.is_object()) throw protocol_error(error_code::bad_request, "a job geometry must be a JSON object");
  return detail::from_object<job_geometry>(reader(j, "geometry"));
}

error make_error(const protocol_error& e) {
  error out;
  out.id = e.request_id();
  out.code = e.code();
  out.message = utf8_safe(e.what(), k_max_text);
  return out;
}

}  // namespace aqs::protocol
