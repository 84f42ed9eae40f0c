// replies: one description per reply, driving make_ok and read_reply.
#include "protocol/replies.hpp"

#include <climits>
#include <string_view>
#include <utility>

#include "protocol/field_reader.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/record.hpp"

namespace aqs::protocol {

using nlohmann::json;

namespace detail {

namespace {

// Lists a reply holds without a bound of their own: a frame cannot hold more
// values than this anyway (fkill --user can cancel a whole queue).
constexpr std::size_t k_max_entries = k_max_json_values;

// A job object as listed (results.hpp keeps its one reading and writing).
struct job_object {
  json write(const job_info& j) const { return protocol::to_json(j); }
  job_info read(const reader& in, std::string_view key, const json& v) const {
    return parse_job_info(v, in.name_of(key));
  }
};

// A node object as listed, and "connected" beside its fields.
struct listed_node_object {
  json write(const listed_node& n) const {
    json j = protocol::to_json(static_cast<const node_info&>(n));
    j["connected"] = n.connected;
    if (n.alloc != 0) j["alloc"] = n.alloc;
    return j;
  }
  listed_node read(const reader& in, std::string_view key, const json& v) const {
    listed_node out;
    static_cast<node_info&>(out) = parse_node_info(v, in.name_of(key));
    out.connected = in.nested(key, v).boolean("connected", false);
    out.alloc = in.nested(key, v).integer_or("alloc", 0, k_max_pe, 0);
    return out;
  }
};

// Exit codes and signals as the store keeps them.
constexpr integer k_int32{INT32_MIN, INT32_MAX};

}  // namespace

template <>
struct record<hello_reply> {
  static constexpr auto fields = std::tuple{
      field("protocol", &hello_reply::protocol, integer{0, k_max_job_id}),
      field("server", &hello_reply::server, k_name),
  };
};

template <>
struct record<submit_reply> {
  static constexpr auto fields = std::tuple{
      field("job_id", &submit_reply::job_id, k_job_id),
      field("warnings", &submit_reply::warnings, list<text>{64, {k_max_text, true, true}}, presence::sparse),
  };
};

template <>
struct record<cancel_failure> {
  using R = cancel_failure;
  static constexpr auto fields = std::tuple{
      field("job_id", &R::job_id, k_job_id),
      field("code", &R::code, error_code_name{}),
      field("message", &R::message, text{k_max_text, false, false}),
  };
};

template <>
struct record<cancel_reply> {
  using R = cancel_reply;
  static constexpr auto fields = std::tuple{
      field("cancelled", &R::cancelled, list<integer>{k_max_entries, k_job_id}),
      field("failed", &R::failed, list<object<cancel_failure>>{k_max_entries, {}}),
  };
};

template <>
struct record<control_reply> {
  using R = control_reply;
  static constexpr auto fields = std::tuple{
      field("done", &R::done, list<integer>{k_max_entries, k_job_id}),
      field("failed", &R::failed, list<object<cancel_failure>>{k_max_entries, {}}),
  };
};

template <>
struct record<list_jobs_reply> {
  using R = list_jobs_reply;
  static constexpr auto fields = std::tuple{
      field("jobs", &R::jobs, list<job_object>{k_max_ids, {}}, presence::required),
      field("more", &R::more, flag{}),
  };
};

template <>
struct record<partition_info> {
  using R = partition_info;
  static constexpr integer k_seconds{0, k_max_walltime_s};
  static constexpr integer k_count{0, k_max_pe};
  static constexpr auto fields = std::tuple{
      field("name", &R::name, k_name),
      field("state", &R::state, k_name),
      field("default", &R::is_default, flag{}, presence::sparse),
      field("nodes", &R::nodes, text{k_max_script, false, true}),
      field("max_time_s", &R::max_time_s, k_seconds, presence::sparse),
      field("default_time_s", &R::default_time_s, k_seconds, presence::sparse),
      field("max_nodes", &R::max_nodes, k_count, presence::sparse),
      field("max_cpus_per_job", &R::max_cpus_per_job, k_count, presence::sparse),
      field("jobs_pending", &R::jobs_pending, integer{0, k_max_job_id}, presence::sparse),
      field("jobs_running", &R::jobs_running, integer{0, k_max_job_id}, presence::sparse),
  };
};

template <>
struct record<list_nodes_reply> {
  static constexpr auto fields = std::tuple{
      field("nodes", &list_nodes_reply::nodes, list<listed_node_object>{k_max_ids, {}}, presence::required),
      field("partitions", &list_nodes_reply::partitions, list<object<partition_info>>{4096, {}}, presence::sparse),
      field("jobs_pending", &list_nodes_reply::jobs_pending, integer{0, k_max_job_id}, presence::sparse),
      field("jobs_running", &list_nodes_reply::jobs_running, integer{0, k_max_job_id}, presence::sparse),
  };
};

template <>
struct record<job_history_event> {
  using R = job_history_event;
  static constexpr auto fields = std::tuple{
      field("time", &R::time, text{64, true, true}),
      field("old_state", &R::old_state, job_state_name{}, presence::nullable),
      field("new_state", &R::new_state, job_state_name{}),
      field("old_procs", &R::old_procs, proc_map{false, false}),
      field("new_procs", &R::new_procs, proc_map{false, false}),
      field("reason", &R::reason, text{k_max_script, false, false}),
      field("exit_code", &R::exit_code, k_int32),
      field("signal", &R::signal, k_int32),
  };
};

template <>
struct record<job_history_reply> {
  static constexpr auto fields = std::tuple{
      field("job", &job_history_reply::job, job_object{}),
      field("events", &job_history_reply::events, list<object<job_history_event>>{k_max_entries, {}}),
  };
};

template <>
struct record<register_reply> {
  static constexpr auto fields = std::tuple{
      field("first_proc", &register_reply::first_proc, integer{0, k_max_pe}),
      field("kill", &register_reply::kill, list<integer>{k_max_ids, k_job_id}),
      field("cluster_id", &register_reply::cluster_id, cluster_id_text{}),
  };
};

template <>
struct record<heartbeat_reply> {
  static constexpr auto fields = std::tuple{field("peers", &heartbeat_reply::peers, k_probe_peers)};
};

template <>
struct record<remote_exec_reply> {
  static constexpr auto fields = std::tuple{field("node", &remote_exec_reply::node, k_name)};
};

template <>
struct record<token_reply> {
  static constexpr auto fields = std::tuple{
      field("token", &token_reply::token, text{4096, true, true}),
      field("token_id", &token_reply::token_id, k_name),
      field("user", &token_reply::user, k_name),
      field("uid", &token_reply::uid, integer{0, 4294967295}),
      field("expires_at", &token_reply::expires_at, integer{0, k_max_job_id}),
  };
};

}  // namespace detail

namespace {

template <class Reply>
ok described_ok(std::int64_t id, const Reply& r) {
  return ok{id, detail::to_object(r)};
}

}  // namespace

ok make_ok(std::int64_t id, const hello_reply& r) { return described_ok(id, r); }
ok make_ok(std::int64_t id, const submit_reply& r) { return described_ok(id, r); }
ok make_ok(std::int64_t id, const cancel_reply& r) { return described_ok(id, r); }
ok make_ok(std::int64_t id, const list_nodes_reply& r) { return described_ok(id, r); }
ok make_ok(std::int64_t id, const job_history_reply& r) { return described_ok(id, r); }
ok make_ok(std::int64_t id, const register_reply& r) { return described_ok(id, r); }
ok make_ok(std::int64_t id, const heartbeat_reply& r) { return described_ok(id, r); }
ok make_ok(std::int64_t id, const remote_exec_reply& r) { return described_ok(id, r); }
ok make_ok(std::int64_t id, const token_reply& r) { return described_ok(id, r); }
ok make_ok(std::int64_t id, const control_reply& r) { return described_ok(id, r); }

ok make_ok(std::int64_t id, const list_jobs_reply& r) {
  // The jobs as text (append_json), as aqsd has always sent them: the same
  // JSON as the description writes, with "jobs" last instead of in key order.
  ok out{id, json{{"more", r.more}}};
  std::string& text = out.raw_members;
  text.reserve(r.jobs.size() * 320 + 16);
  text += "\"jobs\":[";
  for (std::size_t i = 0; i < r.jobs.size(); ++i) {
    if (i > 0) text += ',';
    append_json(text, r.jobs[i]);
  }
  text += ']';
  return out;
}

json to_json(const cancel_reply& r) { return detail::to_object(r); }
json to_json(const job_history_reply& r) { return detail::to_object(r); }
json to_json(const control_reply& r) { return detail::to_object(r); }

template <class Reply>
Reply read_reply(const ok& reply) {
  if (!reply.result.is_object()) throw protocol_error(error_code::bad_request, "field '(top)' must be an object");
  return detail::from_object<Reply>(detail::reader(reply.result, ""));
}

template hello_reply read_reply<hello_reply>(const ok&);
template submit_reply read_reply<submit_reply>(const ok&);
template cancel_reply read_reply<cancel_reply>(const ok&);
template list_jobs_reply read_reply<list_jobs_reply>(const ok&);
template list_nodes_reply read_reply<list_nodes_reply>(const ok&);
template job_history_reply read_reply<job_history_reply>(const ok&);
template register_reply read_reply<register_reply>(const ok&);
template heartbeat_reply read_reply<heartbeat_reply>(const ok&);
template remote_exec_reply read_reply<remote_exec_reply>(const ok&);
template token_reply read_reply<token_reply>(const ok&);
template control_reply read_reply<control_reply>(const ok&);

}  // namespace aqs::protocol
