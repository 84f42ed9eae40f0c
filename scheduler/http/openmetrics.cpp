// openmetrics: writing families, samples, label values and numbers as the
// OpenMetrics 1.0 text format has them.
#include "http/openmetrics.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/job_state.hpp"

namespace aqs::http {

namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

class writer {
public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += fmt::format("# TYPE {} {}\n# HELP {} {}\n", name, type, name, help);
  }
  void sample(std::string_view name, std::string_view labels, std::string_view value) {
    out_ += name;
    if (!labels.empty()) out_ += fmt::format("{{{}}}", labels);
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  void gauge(std::string_view name, std::string_view help, std::int64_t v) {
    family(name, "gauge", help);
    sample(name, "", std::to_string(v));
  }
  void histogram(std::string_view name, std::string_view labels, const daemon::histogram& h) {
    std::uint64_t cumulative = 0;
    const std::string sep = labels.empty() ? "" : std::string(labels) + ",";
    for (std::size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      sample(std::string(name) + "_bucket", sep + "le=\"" + number(h.bounds[i]) + "\"", std::to_string(cumulative));
    }
    sample(std::string(name) + "_bucket", sep + "le=\"+Inf\"", std::to_string(h.count));
    sample(std::string(name) + "_sum", labels, number(h.sum));
    sample(std::string(name) + "_count", labels, std::to_string(h.count));
  }
  std::string take() { return std::move(out_); }

private:
  std::string out_;
};

}  // namespace

std::string render_openmetrics(const daemon::cluster_snapshot& s, const daemon::metrics_snapshot& m) {
  writer w;
  const std::int64_t pending = s.jobs_pending, running = s.jobs_running, resizing = s.jobs_resizing,
                     suspended = s.jobs_suspended;
  w.gauge("aqs_jobs", "Live jobs (pending, running, resizing or suspended).", pending + running + resizing + suspended);
  w.gauge("aqs_jobs_pending", "Jobs waiting for processors or for their dependencies.", pending);
  w.gauge("aqs_jobs_running", "Jobs running (RUNNING; resizing ones are counted apart).", running);
  w.gauge("aqs_jobs_resizing", "Adaptive jobs between a new map and its acknowledgement.", resizing);
  w.gauge("aqs_jobs_suspended", "Jobs suspended.", suspended);
  w.family("aqs_jobs_ended", "counter", "Jobs that reached a final state since aqsd started, by state.");
  // Every final state from the core's one list (a hand-copied list once
  // lost OUT_OF_MEMORY), each present from the start at 0.
  for (const core::job_state js : core::k_all_job_states) {
    if (!core::is_final(js)) continue;
    const std::string st(core::to_string(js));
    auto it = m.jobs_ended.find(st);
    w.sample("aqs_jobs_ended_total", fmt::format("state=\"{}\"", st), std::to_string(it == m.jobs_ended.end() ? 0 : it->second));
  }

  w.gauge("aqs_cpus", "Processors of every registered node.", s.cpus_total);
  w.gauge("aqs_cpus_alloc", "Processors held by jobs.", s.cpus_alloc);
  w.gauge("aqs_cpus_idle", "Processors on UP nodes that no job holds.", s.cpus_idle);
  w.gauge("aqs_cpus_reserved", "Processors given up by a resizing job, not yet acknowledged.", s.cpus_reserved);
  w.gauge("aqs_cpus_unavailable", "Processors on DOWN or DRAIN nodes.", s.cpus_unavailable);

  std::int64_t up = 0, down = 0, drain = 0;
  for (const auto& n : s.nodes) {
    if (n.state == "UP") ++up;
    else if (n.state == "DOWN") ++down;
    else ++drain;
  }
  w.gauge("aqs_nodes", "Registered nodes.", static_cast<std::int64_t>(s.nodes.size()));
  w.gauge("aqs_nodes_up", "Nodes UP.", up);
  w.gauge("aqs_nodes_down", "Nodes DOWN.", down);
  w.gauge("aqs_nodes_drain", "Nodes DRAIN.", drain);
  w.family("aqs_node_heartbeat_age_seconds", "gauge", "Seconds since the node's agent was last heard from.");
  for (const auto& n : s.nodes) {
    if (n.heartbeat_age_s >= 0) w.sample("aqs_node_heartbeat_age_seconds", fmt::format("node=\"{}\"", label_value(n.name)), number(n.heartbeat_age_s));
  }
  w.family("aqs_node_connected", "gauge", "1 while the node's agent is connected.");
  for (const auto& n : s.nodes) {
    w.sample("aqs_node_connected", fmt::format("node=\"{}\"", label_value(n.name)), n.connected ? "1" : "0");
  }

  w.family("aqs_submissions", "counter", "Jobs submitted since aqsd started.");
  w.sample("aqs_submissions_total", "", std::to_string(m.submissions));
  w.family("aqs_resizes_started", "counter", "New maps sent to adaptive jobs since aqsd started.");
  w.sample("aqs_resizes_started_total", "", std::to_string(m.resizes_started));
  w.family("aqs_resizes", "counter", "Resizes that ended since aqsd started, by outcome (acked, refused, timeout).");
  for (const auto& [outcome, n] : m.resizes) {
    w.sample("aqs_resizes_total", fmt::format("outcome=\"{}\"", label_value(outcome)), std::to_string(n));
  }
  w.family("aqs_resize_latency_seconds", "histogram", "From a new map sent to its acknowledgement.");
  w.histogram("aqs_resize_latency_seconds", "", m.resize_latency);
  w.family("aqs_resize_phase_seconds", "histogram",
           "Phases of acknowledged resizes as the job measured them (wait for MPI_Migrate, spawn, data, total).");
  for (const auto& [phase, h] : m.resize_phase) {
    w.histogram("aqs_resize_phase_seconds", fmt::format("phase=\"{}\"", label_value(phase)), h);
  }
  w.family("aqs_decision_seconds", "histogram", "Time of one scheduling decision of the core.");
  w.histogram("aqs_decision_seconds", "", m.decision_time);
  w.family("aqs_store_commit_seconds", "histogram", "Time to write one batch of transitions to the job store.");
  w.histogram("aqs_store_commit_seconds", "", m.commit_latency);
  w.family("aqs_start_time_seconds", "gauge", "When aqsd started (Unix time).");
  w.sample("aqs_start_time_seconds", "", number(m.started_at));
  std::string out = w.take();
  out += "# EOF\n";
  return out;
}

}  // namespace aqs::http
