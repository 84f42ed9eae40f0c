// The /metrics exposition: OpenMetrics structure (families, suffixes, label
// syntax, cumulative buckets, # EOF) and, when promtool is installed, its
// lint of the classic text format (Debian 12's promtool 2.42 reads only
// that), and the negotiation between the two formats.
#include <doctest/doctest.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

#include "core/job_state.hpp"
#include "http/openmetrics.hpp"
#include "temp_dir.hpp"

using namespace aqs;

namespace {

std::string sample_exposition() {
  daemon::cluster_snapshot s;
  for (int i = 0; i < 2; ++i) {
    daemon::snapshot_node n;
    n.name = "node" + std::to_string(i) + "\"x\\";  // escaped in labels
    n.state = i == 0 ? "UP" : "DOWN";
    n.nprocs = 4;
    n.first_proc = 4 * i;
    n.heartbeat_age_s = 0.25;
    n.connected = i == 0;
    s.nodes.push_back(n);
  }
  s.jobs_running = 1;
  s.jobs_pending = 1;
  s.cpus_total = 8;
  s.cpus_alloc = 3;
  s.cpus_idle = 1;
  s.cpus_unavailable = 4;
  daemon::metrics m;
  m.submitted();
  m.decided(0.0003);
  m.decided(2.0);
  m.committed(0.004);
  m.resize_started();
  m.resize_ended("acked", 0.2);
  m.resize_phase("spawn", 0.1);
  m.job_ended("COMPLETED");
  return http::render_openmetrics(s, m.read());
}

}  // namespace

TEST_CASE("the exposition is well-formed OpenMetrics: declared families, allowed suffixes, cumulative buckets, # EOF") {
  const std::string text = sample_exposition();
  REQUIRE(text.ends_with("# EOF\n"));
  CHECK(text.find("# EOF") == text.size() - 6);
  std::map<std::string, std::string> families;  // name -> type
  std::istringstream in(text);
  std::string line;
  const std::regex type_line(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter|histogram))");
  const std::regex sample_line(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (\S+))");
  std::map<std::string, double> last_bucket;
  while (std::getline(in, line)) {
    CAPTURE(line);
    std::smatch m;
    if (line == "# EOF") break;
    if (std::regex_match(line, m, type_line)) {
      CHECK(families.count(m[1]) == 0);  // one declaration per family
      families[m[1]] = m[2];
      continue;
    }
    if (line.starts_with("# HELP ")) continue;
    REQUIRE(std::regex_match(line, m, sample_line));
    const std::string name = m[1];
    // The family a sample belongs to, by the suffixes its type allows.
    bool found = false;
    for (const auto& [family, type] : families) {
      if (type == "gauge" && name == family) found = true;
      if (type == "counter" && name == family + "_total") found = true;
      if (type == "histogram" && (name == family + "_bucket" || name == family + "_sum" || name == family + "_count")) found = true;
    }
    CHECK(found);
    const double v = std::stod(m[5]);
    if (name.ends_with("_bucket")) {
      const std::string series = line.substr(0, line.find("le="));
      if (last_bucket.count(series) != 0 && line.find("le=\"0.0005\"") == std::string::npos) CHECK(v >= last_bucket[series]);
      last_bucket[series] = v;
    }
  }
  CHECK(families.at("aqs_jobs_running") == "gauge");
  CHECK(families.at("aqs_submissions") == "counter");
  CHECK(families.at("aqs_resize_latency_seconds") == "histogram");
  CHECK(text.find("aqs_jobs_running 1\n") != std::string::npos);
  CHECK(text.find("aqs_jobs_pending 1\n") != std::string::npos);
  CHECK(text.find("aqs_cpus_alloc 3\n") != std::string::npos);
  CHECK(text.find("aqs_submissions_total 1\n") != std::string::npos);
  CHECK(text.find("aqs_resizes_total{outcome=\"acked\"} 1\n") != std::string::npos);
  CHECK(text.find("aqs_decision_seconds_bucket{le=\"+Inf\"} 2\n") != std::string::npos);
  CHECK(text.find("aqs_decision_seconds_bucket{le=\"0.0005\"} 1\n") != std::string::npos);
  CHECK(text.find("aqs_node_heartbeat_age_seconds{node=\"node0\\\"x\\\\\"} 0.25\n") != std::string::npos);
  CHECK(text.find("aqs_jobs_ended_total{state=\"COMPLETED\"} 1\n") != std::string::npos);
}

TEST_CASE("aqs_jobs_ended_total has a sample for every final state of the core's list, and none for the others") {
  daemon::metrics m;
  std::map<std::string, int> expected;
  int n = 0;
  for (const core::job_state js : core::k_all_job_states) {
    if (!core::is_final(js)) continue;
    ++n;  // a different count per state, so that no two samples can be confused
    for (int i = 0; i < n; ++i) m.job_ended(std::string(core::to_string(js)));
    expected[std::string(core::to_string(js))] = n;
  }
  REQUIRE(expected.count("OUT_OF_MEMORY") == 1);  // the state a hand-copied list once lost
  const std::string text = http::render_openmetrics(daemon::cluster_snapshot{}, m.read());
  for (const core::job_state js : core::k_all_job_states) {
    const std::string name(core::to_string(js));
    const std::string prefix = "aqs_jobs_ended_total{state=\"" + name + "\"} ";
    if (core::is_final(js)) {
      CHECK_MESSAGE(text.find(prefix + std::to_string(expected.at(name)) + "\n") != std::string::npos, name);
    } else {
      CHECK_MESSAGE(text.find(prefix) == std::string::npos, name);
    }
  }
  // A fresh aqsd shows every final state at 0.
  const std::string fresh = http::render_openmetrics(daemon::cluster_snapshot{}, daemon::metrics{}.read());
  for (const auto& [name, count] : expected) {
    CHECK_MESSAGE(fresh.find("aqs_jobs_ended_total{state=\"" + name + "\"} 0\n") != std::string::npos, name);
  }
}

namespace {

// promtool's verdict on an exposition (nullopt: promtool is not installed).
std::optional<std::pair<int, std::string>> promtool_check(const std::string& text) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) return std::nullopt;
  test::temp_dir dir;
  const auto file = dir.path() / "metrics.prom";
  std::ofstream(file) << text;
  const auto out = dir.path() / "lint.txt";
  const int rc = std::system(("promtool check metrics < " + file.string() + " > " + out.string() + " 2>&1").c_str());
  std::ifstream lint(out);
  return std::make_pair(rc, std::string((std::istreambuf_iterator<char>(lint)), std::istreambuf_iterator<char>()));
}

std::string sample_text() {
  daemon::cluster_snapshot s;
  s.cpus_total = 8;
  daemon::metrics m;
  m.submitted();
  m.resize_started();
  m.resize_ended("acked", 0.2);
  m.job_ended("COMPLETED");
  m.decided(0.0003);
  return http::render_metrics(s, m.read(), http::metrics_format::text);
}

}  // namespace

TEST_CASE("promtool check metrics finds nothing to lint in the classic text exposition, as served to it") {
  // promtool (2.42 in Debian 12) reads the classic text format, and asks for
  // it: what /metrics answers a request without an OpenMetrics Accept.
  const auto verdict = promtool_check(sample_text());
  if (!verdict) {
    MESSAGE("promtool is not installed (Debian package prometheus): lint skipped");
    return;
  }
  CAPTURE(verdict->second);
  CHECK(verdict->first == 0);
  CHECK(verdict->second.empty());
}

TEST_CASE("the classic text format names each counter's HELP and TYPE after its _total sample and has no # EOF") {
  const std::string text = sample_text();
  CHECK(text.find("# EOF") == std::string::npos);
  CHECK(text.find("# HELP aqs_submissions_total Jobs submitted since aqsd started.\n# TYPE aqs_submissions_total counter\n"
                  "aqs_submissions_total 1\n") != std::string::npos);
  CHECK(text.find("# TYPE aqs_resizes_total counter\n") != std::string::npos);
  CHECK(text.find("# TYPE aqs_jobs_ended_total counter\n") != std::string::npos);
  CHECK(text.find("# TYPE aqs_resizes counter") == std::string::npos);
  CHECK(text.find("# HELP aqs_jobs_running Jobs running") != std::string::npos);
  CHECK(text.find("# TYPE aqs_decision_seconds histogram\n") != std::string::npos);
  CHECK(text.find("aqs_decision_seconds_bucket{le=\"+Inf\"} 1\n") != std::string::npos);
  // Every sample's family is declared, under the sample's own name (or its
  // histogram's), before the sample.
  std::istringstream in(text);
  std::string line;
  std::map<std::string, std::string> typed;
  while (std::getline(in, line)) {
    if (line.starts_with("# TYPE ")) {
      const std::string rest = line.substr(7);
      typed[rest.substr(0, rest.find(' '))] = rest.substr(rest.find(' ') + 1);
      continue;
    }
    if (line.starts_with("#") || line.empty()) continue;
    std::string name = line.substr(0, line.find_first_of("{ "));
    if (typed.count(name) == 0) {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (name.ends_with(suffix)) name = name.substr(0, name.size() - std::string(suffix).size());
      }
      CHECK_MESSAGE(typed[name] == "histogram", line);
    }
  }
}

TEST_CASE("the metrics format is negotiated from Accept as the Prometheus client libraries do") {
  using http::metrics_format;
  using http::negotiate_metrics_format;
  // No Accept, anything else, */*: the classic text format.
  CHECK(negotiate_metrics_format("") == metrics_format::text);
  CHECK(negotiate_metrics_format("*/*") == metrics_format::text);
  CHECK(negotiate_metrics_format("application/json") == metrics_format::text);
  CHECK(negotiate_metrics_format("text/plain; version=0.0.4") == metrics_format::text);
  CHECK(negotiate_metrics_format("text/plain") == metrics_format::text);
  // promtool and older Prometheus servers ask for protobuf first, then text.
  CHECK(negotiate_metrics_format("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                                 "encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.1") ==
        metrics_format::text);
  // Prometheus 2.x's scrape Accept: OpenMetrics first.
  CHECK(negotiate_metrics_format("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
                                 "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1") == metrics_format::openmetrics);
  CHECK(negotiate_metrics_format("application/openmetrics-text") == metrics_format::openmetrics);
  CHECK(negotiate_metrics_format("Application/OpenMetrics-Text; Version=\"1.0.0\"") == metrics_format::openmetrics);
  // By q, not by order; q=0 is "not this".
  CHECK(negotiate_metrics_format("text/plain;version=0.0.4;q=0.5,application/openmetrics-text;version=1.0.0") ==
        metrics_format::openmetrics);
  CHECK(negotiate_metrics_format("application/openmetrics-text;q=0.2,text/plain;version=0.0.4;q=0.9") ==
        metrics_format::text);
  CHECK(negotiate_metrics_format("application/openmetrics-text;q=0") == metrics_format::text);
  // A version this exposition is not written in is passed over.
  CHECK(negotiate_metrics_format("application/openmetrics-text;version=2.0.0") == metrics_format::text);
  CHECK(negotiate_metrics_format("text/plain;version=9.9,application/openmetrics-text;q=0.5") ==
        metrics_format::openmetrics);
  CHECK(http::content_type_of(metrics_format::text) == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(http::content_type_of(metrics_format::openmetrics) ==
        "application/openmetrics-text; version=1.0.0; charset=utf-8");
}

TEST_CASE("every live state of the core's list has its gauge aqs_jobs_<state>") {
  // The live gauges come from cluster_snapshot's counters, one field per
  // state: a state added to core::job_state fails here until it has one.
  const std::string text = http::render_openmetrics(daemon::cluster_snapshot{}, daemon::metrics{}.read());
  for (const core::job_state js : core::k_all_job_states) {
    if (core::is_final(js)) continue;
    std::string family = "aqs_jobs_";
    for (const char c : core::to_string(js)) family += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    CHECK_MESSAGE(text.find("# TYPE " + family + " gauge\n") != std::string::npos,
                  "scheduler/http/openmetrics.cpp has no gauge " << family << " for the live state " << core::to_string(js));
  }
}
