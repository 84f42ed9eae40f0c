// openmetrics: aqsd's /metrics page in the OpenMetrics text format (1.0.0)
// or Prometheus' classic text format (0.0.4), as the scraper's Accept asks:
// jobs, processors and nodes by state, node heartbeat ages, submissions,
// resizes and their latencies, decision time and store commit latency.
#pragma once

#include <string>
#include <string_view>

#include "daemon/metrics.hpp"
#include "daemon/observe.hpp"

namespace aqs::http {

inline constexpr std::string_view k_openmetrics_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
inline constexpr std::string_view k_prometheus_text_type = "text/plain; version=0.0.4; charset=utf-8";

enum class metrics_format : unsigned char {
  openmetrics,  // application/openmetrics-text 1.0.0: counters' families without _total, "# EOF" at the end
  text,         // text/plain 0.0.4: HELP and TYPE name each counter's _total sample; no "# EOF"
};

// The format for a request's Accept header (empty: none sent), as the
// Prometheus client libraries negotiate: OpenMetrics only when an entry
// asks for application/openmetrics-text (version 1.0.0, 0.0.1 or none) ahead
// of (by q) any text/plain entry; the classic text format otherwise. Pure.
metrics_format negotiate_metrics_format(std::string_view accept_header);
// The Content-Type of an exposition in `f`.
std::string_view content_type_of(metrics_format f) noexcept;

// The whole exposition in `f`. Pure.
std::string render_metrics(const daemon::cluster_snapshot& s, const daemon::metrics_snapshot& m, metrics_format f);
// The same in OpenMetrics, ending with "# EOF\n".
std::string render_openmetrics(const daemon::cluster_snapshot& s, const daemon::metrics_snapshot& m);

}  // namespace aqs::http
