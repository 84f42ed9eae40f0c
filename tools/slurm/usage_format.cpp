// usage_format: a job's usage as sacct's usage fields (TotalCPU, MaxRSS,
// AllocTRES, CPUTime) and fjobs --efficiency (like seff) print it (issue 32).
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "client/format.hpp"
#include "slurm/slurm_format.hpp"

namespace aqs::slurm {

namespace {

std::string two(std::int64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%02" PRId64, v);
  return buf;
}

// seff's kbytes2str: "97.66 MB", "1.00 GB", "512.00 KB".
std::string kbytes_text(double kb) {
  const char* units[] = {"KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (kb >= 1024.0 && u < 4) {
    kb /= 1024.0;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f %s", kb, units[u]);
  return buf;
}

bool ended(const job_view& j) { return core::is_final(j.info.state); }

}  // namespace

std::string sacct_cpu_time(std::int64_t micros) {
  if (micros < 0) micros = 0;
  const std::int64_t secs = micros / 1'000'000, msec = (micros % 1'000'000) / 1000;
  const std::int64_t s = secs % 60, m = (secs / 60) % 60, h = (secs / 3600) % 24, d = secs / 86400;
  if (d != 0) return std::to_string(d) + "-" + two(h) + ":" + two(m) + ":" + two(s);
  if (h != 0) return two(h) + ":" + two(m) + ":" + two(s);
  if (msec != 0) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%03" PRId64, msec);
    return two(m) + ":" + two(s) + "." + buf;
  }
  return "00:" + two(m) + ":" + two(s);
}

std::string slurm_exact_units(double num, int unit) {
  if (static_cast<std::int64_t>(num) == 0) return "0";
  static constexpr const char* k_units = "\0KMGTP?";
  while (num >= 1024.0 && static_cast<std::uint64_t>(num) % 512 == 0) {
    num /= 1024.0;
    ++unit;
  }
  if (unit < 0 || unit > 5) unit = 6;
  char buf[48];
  const auto whole = static_cast<std::uint64_t>(num);
  if (static_cast<double>(whole) == num) {
    std::snprintf(buf, sizeof buf, "%" PRIu64, whole);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f", num);
  }
  std::string out = buf;
  if (unit > 0) out += k_units[unit];
  return out;
}

std::string sacct_memory(std::int64_t kb) { return slurm_exact_units(static_cast<double>(kb) * 1024.0, 0); }

std::optional<std::int64_t> requested_mem_mb(const job_view& j) {
  const auto& i = j.info;
  if (i.mem_per_node_mb && *i.mem_per_node_mb > 0) return *i.mem_per_node_mb * node_count(j);
  if (i.mem_per_cpu_mb && *i.mem_per_cpu_mb > 0) return *i.mem_per_cpu_mb * cpus_of(j);
  return std::nullopt;
}

double alloc_cpu_seconds(const job_view& j, std::time_t now) {
  if (j.info.alloc_cpu_ms) return static_cast<double>(*j.info.alloc_cpu_ms) / 1000.0;
  // An adaptive job's held processors change: the integral of its maps.
  // A rigid job's is Elapsed x AllocCPUS, as Slurm's (the same for anyone
  // who looks, history or not).
  if (j.map_seconds && j.info.adaptive && core::is_final(j.info.state)) return *j.map_seconds;
  return static_cast<double>(elapsed(j, now) * cpus_of(j));
}

std::optional<double> map_integral(const std::vector<protocol::job_history_event>& events) {
  double total = 0, last = 0;
  std::size_t held = 0;
  bool ran = false;
  for (const auto& e : events) {
    const auto t = client::parse_iso_time(e.time);
    if (!t) return std::nullopt;
    if (held > 0 && *t > last) total += static_cast<double>(held) * (*t - last);
    last = *t;
    auto ones = [](const std::string& m) { return static_cast<std::size_t>(std::count(m.begin(), m.end(), '1')); };
    if (e.new_state == core::job_state::running) {
      held = ones(e.new_procs);
      ran = ran || held > 0;
    } else if (e.new_state == core::job_state::resizing) {
      held = ones(e.old_procs.empty() ? e.new_procs : e.old_procs);
    } else {
      held = 0;
    }
  }
  if (!ran) return std::nullopt;
  return total;
}

std::optional<std::int64_t> total_cpu_us(const job_view& j) {
  if (!j.info.user_cpu_us || !j.info.system_cpu_us) return std::nullopt;
  return *j.info.user_cpu_us + *j.info.system_cpu_us;
}

std::string alloc_tres(const job_view& j) {
  if (!j.start) return "";
  const std::int64_t cpus = cpus_of(j);
  std::string out = "billing=" + std::to_string(cpus) + ",cpu=" + std::to_string(cpus);
  if (const auto mem = requested_mem_mb(j)) out += ",mem=" + slurm_exact_units(static_cast<double>(*mem), 2);
  out += ",node=" + std::to_string(node_count(j));
  return out;
}

namespace {

// What both forms of --efficiency show: nullopt for a job that has not ended.
struct efficiency {
  std::int64_t cores = 0;
  std::int64_t nodes = 0;
  std::int64_t wall_s = 0;
  double core_walltime_s = 0;
  std::optional<double> cpu_used_s;
  std::optional<double> cpu_pct;
  std::optional<std::int64_t> mem_used_kb;
  std::optional<std::int64_t> mem_req_mb;  // per node
  std::optional<double> mem_pct;
};

efficiency compute(const job_view& j, std::time_t now) {
  efficiency e;
  e.cores = cpus_of(j);
  e.nodes = node_count(j);
  e.wall_s = elapsed(j, now);
  e.core_walltime_s = alloc_cpu_seconds(j, now);
  if (const auto us = total_cpu_us(j)) {
    e.cpu_used_s = static_cast<double>(*us) / 1e6;
    if (e.core_walltime_s > 0) e.cpu_pct = 100.0 * *e.cpu_used_s / e.core_walltime_s;
  }
  e.mem_used_kb = j.info.max_rss_kb;
  if (const auto req = requested_mem_mb(j)) e.mem_req_mb = *req / std::max<std::int64_t>(1, e.nodes);
  if (e.mem_used_kb && e.mem_req_mb && *e.mem_req_mb > 0) {
    e.mem_pct = 100.0 * static_cast<double>(*e.mem_used_kb) / (static_cast<double>(*e.mem_req_mb) * 1024.0);
  }
  return e;
}

std::string not_ended_line(const job_view& j) {
  return "Job " + std::to_string(j.info.id) + " is " + std::string(core::to_string(j.info.state)) +
         ": its efficiency is known once it has ended\n";
}

}  // namespace

std::string efficiency_text(const job_view& j, std::time_t now, bool hidden) {
  if (!ended(j)) return not_ended_line(j);
  const efficiency e = compute(j, now);
  const auto& i = j.info;
  const std::string unknown = hidden ? "(only its owner and root see it)" : "(not measured)";
  char buf[160];
  std::string out = "Job ID: " + std::to_string(i.id) + "\n";
  out += "Cluster: aqs\n";
  out += "User: " + i.user + "\n";
  if (i.account) out += "Account: " + *i.account + "\n";
  std::string state = sacct_state(j);
  if (i.exit_code) state += " (exit code " + std::to_string(*i.exit_code) + ")";
  out += "State: " + state + "\n";
  if (e.nodes > 1) {
    out += "Nodes: " + std::to_string(e.nodes) + "\n";
    out += "Cores: " + std::to_string(e.cores) + "\n";
  } else {
    out += "Cores: " + std::to_string(e.cores) + "\n";
  }
  const auto core_walltime = sacct_secs(std::llround(e.core_walltime_s));
  const std::string of = i.adaptive ? " core-walltime (the integral of its processor maps)" : " core-walltime";
  if (e.cpu_used_s) {
    out += "CPU Utilized: " + sacct_secs(std::llround(*e.cpu_used_s)) + "\n";
    if (e.cpu_pct) {
      std::snprintf(buf, sizeof buf, "CPU Efficiency: %.2f%% of ", *e.cpu_pct);
      out += buf + core_walltime + of + "\n";
    } else {
      out += "CPU Efficiency: 0.00% of " + core_walltime + of + "\n";
    }
  } else {
    out += "CPU Utilized: " + unknown + "\n";
    out += "CPU Efficiency: " + unknown + " of " + core_walltime + of + "\n";
  }
  out += "Job Wall-clock time: " + sacct_secs(e.wall_s) + "\n";
  if (e.mem_used_kb) {
    out += "Memory Utilized: " + kbytes_text(static_cast<double>(*e.mem_used_kb)) + "\n";
  } else {
    out += "Memory Utilized: " + unknown + "\n";
  }
  if (e.mem_req_mb) {
    const std::string req = kbytes_text(static_cast<double>(*e.mem_req_mb) * 1024.0);
    const std::string per = e.nodes > 1 ? " per node" : "";
    if (e.mem_pct) {
      std::snprintf(buf, sizeof buf, "Memory Efficiency: %.2f%% of ", *e.mem_pct);
      out += buf + req + per + "\n";
    } else {
      out += "Memory Efficiency: " + unknown + " of " + req + per + "\n";
    }
  } else {
    out += "Memory Efficiency: (no --mem or --mem-per-cpu was asked)\n";
  }
  return out;
}

std::string efficiency_json(const job_view& j, std::time_t now, bool hidden) {
  const auto& i = j.info;
  nlohmann::json out{{"job_id", i.id}, {"user", i.user}, {"state", core::to_string(i.state)}, {"ended", ended(j)}};
  if (!ended(j)) {
    out["message"] = not_ended_line(j).substr(0, not_ended_line(j).size() - 1);
    return out.dump();
  }
  const efficiency e = compute(j, now);
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  out["account"] = opt(i.account);
  out["exit_code"] = opt(i.exit_code);
  out["adaptive"] = i.adaptive;
  out["nodes"] = e.nodes;
  out["cores"] = e.cores;
  out["wall_clock_s"] = e.wall_s;
  out["core_walltime_s"] = e.core_walltime_s;
  out["cpu_utilized_s"] = opt(e.cpu_used_s);
  out["cpu_efficiency_pct"] = opt(e.cpu_pct);
  out["user_cpu_us"] = opt(i.user_cpu_us);
  out["system_cpu_us"] = opt(i.system_cpu_us);
  out["memory_utilized_kb"] = opt(e.mem_used_kb);
  out["memory_requested_mb"] = opt(e.mem_req_mb);
  out["memory_efficiency_pct"] = opt(e.mem_pct);
  out["measured_hidden"] = hidden;
  return out.dump();
}

}  // namespace aqs::slurm
