// openmetrics: aqsd's /metrics page in the OpenMetrics text format (1.0.0):
// jobs, processors and nodes by state, node heartbeat ages, submissions,
// resizes and their latencies, decision time and store commit latency.
#pragma once

#include <string>
#include <string_view>

#include "daemon/metrics.hpp"
#include "daemon/observe.hpp"

namespace aqs::http {

inline constexpr std::string_view k_openmetrics_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";

// The whole exposition, ending with "# EOF\n". Pure.
std::string render_openmetrics(const daemon::cluster_snapshot& s, const daemon::metrics_snapshot& m);

}  // namespace aqs::http
