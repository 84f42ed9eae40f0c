// job_records: field-by-field conversions, kept in one place so that every
// path (submit, launch, recovery, listing) agrees on defaults.
#include "daemon/job_records.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <unistd.h>

#include <fmt/format.h>

#include "core/hostlist.hpp"

namespace aqs::daemon {

std::string scoped_submit_token(std::int64_t uid, const std::string& token) {
  return token.empty() ? token : "u" + std::to_string(uid) + ":" + token;
}

store::job_submission to_store_request(const protocol::job_spec& spec, const submitter& who) {
  store::job_submission r;
  r.submit_token = scoped_submit_token(who.uid, spec.submit_token.value_or(""));
  r.user_name = who.user;
  r.uid = who.uid;
  r.gid = who.gid;
  r.name = spec.name;
  r.script = spec.script.value_or("");
  r.argv = spec.argv;
  r.workdir = spec.workdir;
  r.environment = spec.environment;
  r.stdout_pattern = spec.stdout_pattern;
  r.stderr_pattern = spec.stderr_pattern.value_or("");
  r.min_pe = static_cast<std::int32_t>(spec.min_pe);
  r.max_pe = static_cast<std::int32_t>(spec.max_pe);
  r.adaptive = spec.adaptive;
  if (spec.walltime_s) r.walltime_s = static_cast<std::int32_t>(*spec.walltime_s);
  r.requeue = spec.requeue;
  r.umask = static_cast<std::int32_t>(spec.umask.value_or(022));
  r.dependencies = spec.afterok;
  if (spec.geometry) r.geometry = protocol::geometry_json(*spec.geometry);
  return r;
}

core::job_shape shape_of(const protocol::job_geometry& g) {
  core::job_shape s;
  s.ntasks = static_cast<std::size_t>(g.ntasks);
  s.cpus_per_task = static_cast<std::size_t>(g.cpus_per_task);
  s.tasks_per_node = static_cast<std::size_t>(g.ntasks_per_node.value_or(0));
  s.min_nodes = static_cast<std::size_t>(g.nodes_min.value_or(0));
  s.max_nodes = static_cast<std::size_t>(g.nodes_max.value_or(0));
  s.exclusive = g.exclusive;
  s.mem_per_node_mb = static_cast<std::uint64_t>(g.mem_per_node_mb.value_or(0));
  s.mem_per_cpu_mb = static_cast<std::uint64_t>(g.mem_per_cpu_mb.value_or(0));
  s.gpus_per_node = static_cast<std::size_t>(g.gpus_per_node.value_or(0));
  return s;
}

std::optional<protocol::job_geometry> geometry_of(const std::string& json_text) {
  if (json_text.empty()) return std::nullopt;
  return protocol::parse_geometry(json_text);
}

protocol::job_spec to_spec(const store::job_record& rec) {
  const store::job_submission& r = rec.request;
  protocol::job_spec s;
  s.name = r.name;
  if (!r.script.empty()) s.script = r.script;
  s.argv = r.argv;
  s.workdir = r.workdir;
  s.environment = r.environment;
  s.stdout_pattern = r.stdout_pattern;
  if (!r.stderr_pattern.empty()) s.stderr_pattern = r.stderr_pattern;
  s.min_pe = r.min_pe;
  s.max_pe = r.max_pe;
  s.adaptive = r.adaptive;
  if (r.walltime_s) s.walltime_s = *r.walltime_s;
  s.afterok = r.dependencies;
  s.requeue = r.requeue;
  s.umask = r.umask;
  s.geometry = geometry_of(r.geometry);
  // An interactive job's watcher is gone after a restart; its output goes to
  // the files like a batch job's.
  s.interactive = false;
  return s;
}

void set_malleability(core::job_request& r, const protocol::job_geometry& g) {
  if (!r.adaptive) return;
  if (g.pref_pe) r.pref_pe = std::clamp(static_cast<std::size_t>(*g.pref_pe), r.min_pe, r.max_pe);
  if (g.speedup) {
    try {
      r.speedup = core::speedup_model::parse(*g.speedup);
    } catch (const std::invalid_argument&) {
      // Checked on the wire: a stored one this build cannot read scales linearly.
    }
  }
  if (g.resize_cost_s) r.resize_cost = static_cast<double>(*g.resize_cost_s);
}

std::string recorded_option(const std::optional<protocol::job_geometry>& g, std::string_view key) {
  if (!g) return {};
  std::string found;
  for (const auto& r : g->recorded) {
    if (r.size() > key.size() && r.compare(0, key.size(), key) == 0 && r[key.size()] == '=') found = r.substr(key.size() + 1);
  }
  return found;
}

void set_named_nodes(core::job_request& r, const std::optional<protocol::job_geometry>& g) {
  // Checked by the client and again here: a list that does not expand
  // names no node (the job then never fits, and is refused at submission).
  const auto expand = [](const std::string& text) {
    try {
      return text.empty() ? std::vector<std::string>{} : core::expand_hostlist(text);
    } catch (const std::exception&) {
      return std::vector<std::string>{text};
    }
  };
  r.nodelist = expand(recorded_option(g, "nodelist"));
  r.exclude = expand(recorded_option(g, "exclude"));
}

core::job_request to_core_request(std::int64_t id, const protocol::job_spec& spec, const std::string& user,
                                  double submit_time) {
  core::job_request r;
  r.id = static_cast<core::job_id>(id);
  r.user = user;
  r.min_pe = static_cast<std::size_t>(spec.min_pe);
  r.max_pe = static_cast<std::size_t>(spec.max_pe);
  r.adaptive = spec.adaptive;
  r.walltime = spec.walltime_s ? static_cast<double>(*spec.walltime_s) : k_unlimited_walltime_s;
  r.submit_time = submit_time;
  r.requeue_on_node_fail = spec.requeue;
  if (spec.geometry) {
    r.shape = shape_of(*spec.geometry);
    r.partition = spec.geometry->partition.value_or("");
    set_malleability(r, *spec.geometry);
    r.reservation = recorded_option(spec.geometry, "reservation");
    set_named_nodes(r, spec.geometry);
  }
  return r;
}

core::job_request to_core_request(const store::job_summary& s) {
  core::job_request r;
  r.id = static_cast<core::job_id>(s.id);
  r.user = s.user_name;
  r.min_pe = static_cast<std::size_t>(s.min_pe);
  r.max_pe = static_cast<std::size_t>(s.max_pe);
  r.adaptive = s.adaptive;
  r.walltime = s.walltime_s ? static_cast<double>(*s.walltime_s) : k_unlimited_walltime_s;
  r.submit_time = to_seconds(s.status.submit_time);
  r.priority = s.priority;
  r.requeue_on_node_fail = s.requeue;
  if (const auto g = geometry_of(s.geometry)) {
    r.shape = shape_of(*g);
    r.partition = g->partition.value_or("");
    set_malleability(r, *g);
    r.reservation = recorded_option(g, "reservation");
    set_named_nodes(r, g);
  }
  return r;
}

double to_seconds(store::time_point t) noexcept {
  return static_cast<double>(t.time_since_epoch().count()) / 1e6;
}

// Without gmtime_r and strftime: glibc takes its time-zone lock in both,
// and they were a quarter of aqsd's time listing 100,000 jobs. The civil
// date from a day count is the usual proleptic Gregorian arithmetic (eras
// of 400 years starting on 1 March).
std::string iso8601(store::time_point t) {
  const std::int64_t us = t.time_since_epoch().count();
  std::int64_t secs = us / 1'000'000;
  std::int64_t rem = us % 1'000'000;
  if (rem < 0) {
    rem += 1'000'000;
    --secs;
  }
  std::int64_t days = secs / 86'400;
  std::int64_t sod = secs % 86'400;
  if (sod < 0) {
    sod += 86'400;
    --days;
  }
  const std::int64_t z = days + 719'468;
  const std::int64_t era = (z >= 0 ? z : z - 146'096) / 146'097;
  const std::int64_t doe = z - era * 146'097;                                // [0, 146096]
  const std::int64_t yoe = (doe - doe / 1'460 + doe / 36'524 - doe / 146'096) / 365;  // [0, 399]
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);          // [0, 365]
  const std::int64_t mp = (5 * doy + 2) / 153;                               // [0, 11], March first
  const std::int64_t day = doy - (153 * mp + 2) / 5 + 1;
  const std::int64_t month = mp < 10 ? mp + 3 : mp - 9;
  const std::int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  if (year < 0 || year > 9999) {  // outside what 4 digits hold: rare, slow
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", year, month, day, sod / 3600, sod / 60 % 60,
                       sod % 60, rem / 1000);
  }
  // Digits by hand: snprintf cost as much as the rest of a listing.
  std::string out = "0000-00-00T00:00:00.000Z";
  auto put = [&out](std::size_t at, std::int64_t v, int width) {
    for (int i = width - 1; i >= 0; --i, v /= 10) out[at + static_cast<std::size_t>(i)] = static_cast<char>('0' + v % 10);
  };
  put(0, year, 4);
  put(5, month, 2);
  put(8, day, 2);
  put(11, sod / 3600, 2);
  put(14, sod / 60 % 60, 2);
  put(17, sod % 60, 2);
  put(20, rem / 1000, 3);
  return out;
}

core::processor_set map_over(const core::processor_set& procs, std::size_t n) {
  core::processor_set out = procs;
  out.resize(n);
  return out;
}

protocol::job_info to_job_info(const store::job_summary& s, std::span<const core::node_span> nodes) {
  protocol::job_info j;
  j.id = s.id;
  j.name = s.name;
  j.user = s.user_name;
  j.state = s.status.state;
  j.adaptive = s.adaptive;
  j.min_pe = s.min_pe;
  j.max_pe = s.max_pe;
  // A suspended job holds no processors (others may run on them); `nodes`
  // still says where its stopped processes are.
  const bool holds = s.status.state != core::job_state::suspended;
  j.procs = s.status.procs.none() || !holds ? std::string() : s.status.procs.to_string();
  j.nprocs = holds ? static_cast<std::int64_t>(s.status.procs.count()) : 0;
  j.nodes = s.status.procs.none() ? std::string() : core::format_processor_map(nodes, s.status.procs);
  j.submit_time = iso8601(s.status.submit_time);
  if (s.status.start_time) j.start_time = iso8601(*s.status.start_time);
  if (s.status.end_time) j.end_time = iso8601(*s.status.end_time);
  if (s.status.exit_code) {
    j.exit_code = *s.status.exit_code;
  } else if (s.status.term_signal) {
    j.exit_code = 128 + *s.status.term_signal;  // as the shell reports a killed command
  }
  if (s.walltime_s) j.walltime_s = *s.walltime_s;
  if (!s.geometry.empty()) {
    // Listing 100,000 jobs reads this per job: most have none.
    try {
      const auto g = protocol::parse_geometry(s.geometry);
      if (g.array_task_id) {
        j.array_task_id = g.array_task_id;
        j.array_job_id = g.array_job_id.value_or(s.id);
      } else if (g.array) {
        j.array_job_id = g.array_job_id.value_or(s.id);  // an array's compact record: its tasks not yet split off
      }
      j.partition = g.partition;
      j.pref_pe = g.pref_pe;
    } catch (const std::exception&) {
      // A geometry this build cannot read: listed without it.
    }
  }
  return j;
}

void add_usage(protocol::job_info& j, const store::job_summary& s, const store::job_usage* u, bool measured_visible) {
  if (!s.geometry.empty()) {
    try {
      const auto g = protocol::parse_geometry(s.geometry);
      j.mem_per_node_mb = g.mem_per_node_mb;
      j.mem_per_cpu_mb = g.mem_per_cpu_mb;
    } catch (const std::exception&) {
      // Listed without it, as to_job_info does.
    }
  }
  if (u == nullptr) return;
  j.account = u->account;
  if (u->alloc_cpu_seconds) j.alloc_cpu_ms = static_cast<std::int64_t>(std::llround(*u->alloc_cpu_seconds * 1000.0));
  if (!measured_visible || u->measured_nodes <= 0) return;
  j.user_cpu_us = u->user_cpu_us;
  j.system_cpu_us = u->system_cpu_us;
  j.max_rss_kb = u->max_rss_kb;
  j.measured_nodes = u->measured_nodes;
}

}  // namespace aqs::daemon
