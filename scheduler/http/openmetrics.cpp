// openmetrics: writing families, samples, label values and numbers as the
// OpenMetrics 1.0 text format has them, or as Prometheus' classic text format
// 0.0.4 has them; and choosing between the two from a scraper's Accept.
#include "http/openmetrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <vector>

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

std::string help_text(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

class writer {
public:
  explicit writer(metrics_format f) : format_(f) {}
  // OpenMetrics names a counter's family without its _total suffix; the
  // classic text format names the family as its sample (a scraper reading
  // the classic format finds no HELP or TYPE for aqs_x_total otherwise).
  void family(std::string_view name, std::string_view type, std::string_view help) {
    if (format_ == metrics_format::openmetrics) {
      out_ += fmt::format("# TYPE {} {}\n# HELP {} {}\n", name, type, name, help_text(help));
    } else {
      const std::string n = type == "counter" ? std::string(name) + "_total" : std::string(name);
      out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", n, help_text(help), n, type);
    }
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
  std::string take() {
    if (format_ == metrics_format::openmetrics) out_ += "# EOF\n";
    return std::move(out_);
  }

private:
  metrics_format format_;
  std::string out_;
};

// One entry of an Accept header: its media type (lower case), its
// "version" parameter and its q.
struct accepted {
  std::string type;
  std::string version;
  double q = 1.0;
  std::size_t order = 0;
};

std::string_view trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

std::string lower(std::string_view v) {
  std::string out(v);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<accepted> parse_accept(std::string_view header) {
  std::vector<accepted> out;
  while (!header.empty()) {
    const auto comma = header.find(',');
    std::string_view part = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
    accepted a;
    a.order = out.size();
    const auto semi = part.find(';');
    a.type = lower(trim(part.substr(0, semi)));
    std::string_view params = semi == std::string_view::npos ? std::string_view{} : part.substr(semi + 1);
    while (!params.empty()) {
      const auto next = params.find(';');
      const std::string_view p = trim(params.substr(0, next));
      params = next == std::string_view::npos ? std::string_view{} : params.substr(next + 1);
      const auto eq = p.find('=');
      if (eq == std::string_view::npos) continue;
      const std::string key = lower(trim(p.substr(0, eq)));
      std::string_view value = trim(p.substr(eq + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
      if (key == "q") {
        double q = 0;
        const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), q);
        a.q = ec == std::errc{} && ptr == value.data() + value.size() && q >= 0 && q <= 1 ? q : 0.0;
      } else if (key == "version") {
        a.version = std::string(value);
      }
    }
    if (!a.type.empty()) out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

metrics_format negotiate_metrics_format(std::string_view accept_header) {
  // As the Prometheus client libraries (client_golang's expfmt) choose: the
  // entries by q, highest first (ties in the order given); the first one
  // this exposition can be written as wins; none: the classic text format.
  auto entries = parse_accept(accept_header);
  std::stable_sort(entries.begin(), entries.end(), [](const accepted& a, const accepted& b) { return a.q > b.q; });
  for (const auto& a : entries) {
    if (a.q <= 0) continue;
    if (a.type == "application/openmetrics-text" && (a.version.empty() || a.version == "1.0.0" || a.version == "0.0.1")) {
      return metrics_format::openmetrics;
    }
    if (a.type == "text/plain" && (a.version.empty() || a.version == "0.0.4")) return metrics_format::text;
  }
  return metrics_format::text;
}

std::string_view content_type_of(metrics_format f) noexcept {
  return f == metrics_format::openmetrics ? k_openmetrics_type : k_prometheus_text_type;
}

std::string render_openmetrics(const daemon::cluster_snapshot& s, const daemon::metrics_snapshot& m) {
  return render_metrics(s, m, metrics_format::openmetrics);
}

std::string render_metrics(const daemon::cluster_snapshot& s, const daemon::metrics_snapshot& m, metrics_format f) {
  writer w(f);
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
  return w.take();
}

}  // namespace aqs::http
