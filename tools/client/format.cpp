// format: fixed-width tables sized to their contents.
#include "client/format.hpp"

#include "core/array_spec.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "cmdline/time_limit.hpp"

namespace aqs::client {

std::optional<double> parse_iso_time(const std::string& text) {
  std::tm tm{};
  int ms = 0;
  char z = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &ms, &z) != 8 ||
      z != 'Z') {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(::timegm(&tm)) + ms / 1000.0;
}

std::string render_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string format_jobs_table(const std::vector<protocol::job_info>& jobs, double now, bool expand_arrays) {
  std::vector<std::vector<std::string>> rows{{"JOBID", "NAME", "USER", "STATE", "NPROCS", "MIN-MAX", "TIME", "NODES"}};
  // A PARTITION column once partitions are configured (or named with -p).
  const bool with_partition =
      std::any_of(jobs.begin(), jobs.end(), [](const protocol::job_info& j) { return j.partition.has_value(); });
  if (with_partition) rows.front().insert(rows.front().begin() + 3, "PARTITION");
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    const auto& j = jobs[k];
    std::string id = std::to_string(j.id);
    if (j.array_job_id && j.array_task_id) {
      id = std::to_string(*j.array_job_id) + "_" + std::to_string(*j.array_task_id);
      // The pending tasks of an array that follow each other: one line,
      // "123_[4-99]", as squeue shows them (fjobs -r lists each).
      if (!expand_arrays && j.state == core::job_state::pending) {
        std::vector<std::int64_t> tasks{*j.array_task_id};
        while (k + 1 < jobs.size() && jobs[k + 1].state == core::job_state::pending &&
               jobs[k + 1].array_job_id == j.array_job_id && jobs[k + 1].array_task_id) {
          tasks.push_back(*jobs[++k].array_task_id);
        }
        if (tasks.size() > 1) id = std::to_string(*j.array_job_id) + "_[" + core::format_array_tasks(tasks) + "]";
      }
    }
    std::string time = "-";
    const auto start = j.start_time ? parse_iso_time(*j.start_time) : std::nullopt;
    if (start) {
      const auto end = j.end_time ? parse_iso_time(*j.end_time) : std::nullopt;
      const double secs = std::max(0.0, end.value_or(now) - *start);
      time = secs < 1 ? "00:00:00" : cmdline::format_duration(static_cast<std::int64_t>(secs));
    }
    std::string where = j.nodes;
    if (core::is_final(j.state)) where = j.exit_code ? "exit " + std::to_string(*j.exit_code) : "";
    if (j.state == core::job_state::pending && j.reason) where = "(" + *j.reason + ")";  // as squeue shows it
    const std::string range =
        j.min_pe == j.max_pe ? std::to_string(j.min_pe) : std::to_string(j.min_pe) + "-" + std::to_string(j.max_pe);
    // An adaptive job's preferred size, when it gave one: "2-16 adaptive pref 8".
    const std::string pref = j.pref_pe ? " pref " + std::to_string(*j.pref_pe) : "";
    rows.push_back({id, j.name, j.user, std::string(core::to_string(j.state)),
                    std::to_string(j.nprocs), range + (j.adaptive ? " adaptive" : "") + pref, time, where});
    if (with_partition) rows.back().insert(rows.back().begin() + 3, j.partition.value_or("-"));
  }
  return render_table(rows);
}

std::string format_nodes_table(const std::vector<protocol::node_info>& nodes) {
  std::vector<std::vector<std::string>> rows{{"NODE", "STATE", "PROCS", "NPROCS", "JOBS", "MEMORY"}};
  // A PARTITIONS column once partitions are configured (aqs.conf).
  const bool with_partitions =
      std::any_of(nodes.begin(), nodes.end(), [](const protocol::node_info& n) { return !n.partitions.empty(); });
  if (with_partitions) rows.front().push_back("PARTITIONS");
  // How the node contains its jobs, in short ("cgroup v1", "cgroup v2",
  // "none"; "-" from an agent that does not say); --json has the whole line
  // (hierarchies, path, or why none).
  rows.front().push_back("CONTAINMENT");
  const auto containment = [](const std::string& c) {
    return c.empty() ? std::string("-") : c.substr(0, c.find(" ("));
  };
  for (const auto& n : nodes) {
    std::string jobs;
    for (auto id : n.jobs) jobs += (jobs.empty() ? "" : ",") + std::to_string(id);
    rows.push_back({n.name, std::string(protocol::to_string(n.state)), n.procs, std::to_string(n.nprocs),
                    jobs.empty() ? "-" : jobs, std::to_string(n.memory_mb) + " MB"});
    if (with_partitions) {
      std::string parts;
      for (const auto& p : n.partitions) parts += (parts.empty() ? "" : ",") + p;
      rows.back().push_back(parts.empty() ? "-" : parts);
    }
    rows.back().push_back(containment(n.containment));
  }
  return render_table(rows);
}

std::string format_history_table(const std::vector<protocol::job_history_event>& events) {
  std::vector<std::vector<std::string>> rows{{"TIME", "FROM", "TO", "PROCS", "REASON"}};
  auto text = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  for (const auto& e : events) {
    rows.push_back({text(e.time), e.old_state ? std::string(core::to_string(*e.old_state)) : std::string("-"),
                    std::string(core::to_string(e.new_state)), text(e.new_procs), text(e.reason)});
  }
  return render_table(rows);
}

std::string jobs_json(const std::vector<protocol::job_info>& jobs) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& j : jobs) a.push_back(protocol::to_json(j));
  return a.dump();
}

std::string nodes_json(const std::vector<protocol::node_info>& nodes) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& n : nodes) a.push_back(protocol::to_json(n));
  return a.dump();
}

}  // namespace aqs::client
