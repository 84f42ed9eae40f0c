// reservations: reservation records from scontrol's words, and the two
// listings of them.
#include "slurm/reservations.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>

#include "core/begin_time.hpp"
#include "core/hostlist.hpp"
#include "core/partition.hpp"
#include "slurm/slurm_commands.hpp"
#include "slurm/slurm_format.hpp"

namespace aqs::slurm {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

nlohmann::json name_list(const std::string& key, const std::string& value) {
  nlohmann::json out = nlohmann::json::array();
  std::size_t at = 0;
  while (at <= value.size()) {
    const std::size_t comma = value.find(',', at);
    std::string item = value.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item.empty()) throw command_error(key + "=" + value + ": an empty name in the list");
    out.push_back(item);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

std::string joined(const nlohmann::json& list) {
  std::string out;
  if (!list.is_array()) return "(null)";
  for (const auto& x : list) out += (out.empty() ? "" : ",") + x.get<std::string>();
  return out.empty() ? "(null)" : out;
}

}  // namespace

nlohmann::json reservation_record(std::span<const std::string> words, std::time_t now, bool create) {
  nlohmann::json rec = nlohmann::json::object();
  for (const std::string& w : words) {
    const auto eq = w.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw command_error("invalid reservation option '" + w + "': expected KEY=VALUE");
    }
    const std::string key = lower(std::string_view(w).substr(0, eq));
    const std::string value = w.substr(eq + 1);
    if (value.empty()) throw command_error(w.substr(0, eq) + "= needs a value");
    if (key == "reservationname" || key == "reservation" || key == "resv") {
      rec["name"] = value;
    } else if (key == "starttime") {
      try {
        rec["start_s"] = lower(value) == "now" ? static_cast<std::int64_t>(now)
                                                : core::parse_begin_time(value, static_cast<std::int64_t>(now));
      } catch (const std::exception& e) {
        throw command_error("StartTime=" + value + ": " + e.what());
      }
    } else if (key == "endtime") {
      try {
        rec["end_s"] = core::parse_begin_time(value, static_cast<std::int64_t>(now));
      } catch (const std::exception& e) {
        throw command_error("EndTime=" + value + ": " + e.what());
      }
    } else if (key == "duration") {
      const auto s = core::parse_duration(value);
      if (!s || *s <= 0) throw command_error("Duration=" + value + ": expected minutes or [D-]HH:MM:SS, not unlimited");
      rec["duration_s"] = *s;
    } else if (key == "nodes" || key == "nodelist") {
      if (lower(value) == "all") throw command_error("Nodes=ALL: name the nodes (AQS reserves named nodes or CoreCnt=)");
      try {
        (void)core::expand_hostlist(value);
      } catch (const std::exception& e) {
        throw command_error("Nodes=" + value + ": " + e.what());
      }
      rec["nodes"] = value;
    } else if (key == "corecnt" || key == "cpucnt") {
      std::int64_t n = 0;
      const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc{} || p != value.data() + value.size() || n < 1) {
        throw command_error(w.substr(0, eq) + "=" + value + ": expected a positive count");
      }
      rec["core_count"] = n;
    } else if (key == "users" || key == "user") {
      rec["users"] = name_list("Users", value);
    } else if (key == "accounts" || key == "account") {
      rec["accounts"] = name_list("Accounts", value);
    } else if (key == "flags") {
      nlohmann::json flags = name_list("Flags", value);
      for (auto& f : flags) {
        std::string up = f.get<std::string>();
        std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return std::toupper(c); });
        if (up != "MAINT" && up != "IGNORE_JOBS") {
          throw command_error("Flags=" + value + ": AQS knows MAINT and IGNORE_JOBS");
        }
        f = up;
      }
      rec["flags"] = flags;
    } else {
      throw command_error("reservation key " + w.substr(0, eq) +
                          " is not supported by AQS (ReservationName, StartTime, EndTime, Duration, Nodes, CoreCnt, "
                          "Users, Accounts, Flags)");
    }
  }
  if (!rec.contains("name")) throw command_error("ReservationName= is required");
  if (create) {
    if (!rec.contains("start_s")) rec["start_s"] = static_cast<std::int64_t>(now);
    if (!rec.contains("end_s") && !rec.contains("duration_s")) throw command_error("Duration= or EndTime= is required");
    if (!rec.contains("nodes") && !rec.contains("core_count")) throw command_error("Nodes= or CoreCnt= is required");
    if (!rec.contains("users") && !rec.contains("accounts")) throw command_error("Users= or Accounts= is required");
  }
  return rec;
}

std::string scontrol_show_reservations(const nlohmann::json& reply, bool oneliner, const char* tf) {
  const auto& list = reply.at("reservations");
  if (list.empty()) return "No reservations in the system\n";
  std::string out;
  for (const auto& r : list) {
    const auto start = r.at("start_s").get<std::time_t>();
    const auto end = r.at("end_s").get<std::time_t>();
    std::string flags;
    for (const auto& f : r.at("flags")) flags += (flags.empty() ? "" : ",") + f.get<std::string>();
    const std::string nodes = r.at("nodes").get<std::string>();
    const std::vector<std::string> lines = {
        "ReservationName=" + r.at("name").get<std::string>() + " StartTime=" + slurm_time(start, tf) +
            " EndTime=" + slurm_time(end, tf) + " Duration=" + sacct_secs(end - start),
        "Nodes=" + (nodes.empty() ? std::string("(null)") : nodes) + " NodeCnt=" + std::to_string(r.at("node_count").get<long>()) +
            " CoreCnt=" + std::to_string(r.at("core_count").get<long>()) + " Features=(null) PartitionName=(null) Flags=" + flags,
        "TRES=cpu=" + std::to_string(r.at("core_count").get<long>()),
        "Users=" + joined(r.at("users")) + " Groups=(null) Accounts=" + joined(r.at("accounts")) +
            " Licenses=(null) State=" + r.at("state").get<std::string>() + " BurstBuffer=(null) Watts=n/a",
        "MaxStartDelay=(null)",
    };
    for (std::size_t i = 0; i < lines.size(); ++i) {
      out += (i == 0 ? "" : oneliner ? " " : "\n   ") + lines[i];
    }
    out += oneliner ? "\n" : "\n\n";
  }
  return out;
}

std::string sinfo_reservations(const nlohmann::json& reply, bool header, const char* tf) {
  std::string out;
  char line[512];
  if (header) {
    std::snprintf(line, sizeof line, "%-14s %8s  %19s  %19s  %11s  %s\n", "RESV_NAME", "STATE", "START_TIME", "END_TIME",
                  "DURATION", "NODELIST");
    out += line;
  }
  for (const auto& r : reply.at("reservations")) {
    const auto start = r.at("start_s").get<std::time_t>();
    const auto end = r.at("end_s").get<std::time_t>();
    std::snprintf(line, sizeof line, "%-14s %8s  %19s  %19s  %11s  %s\n", r.at("name").get<std::string>().c_str(),
                  r.at("state").get<std::string>().c_str(), slurm_time(start, tf).c_str(), slurm_time(end, tf).c_str(),
                  sacct_secs(end - start).c_str(), r.at("nodes").get<std::string>().c_str());
    out += line;
  }
  return out;
}

}  // namespace aqs::slurm
