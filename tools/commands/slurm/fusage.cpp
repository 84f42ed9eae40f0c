// fusage: AQS's usage report: processor-hours (and jobs) per user and
// account charged by jobs that ended in a period, as a table, CSV or JSON.
// Root sees everyone's; a user their own. (aqs-sreport gives Slurm's layout.)
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>
#include <unistd.h>

#include "slurm/accounting_format.hpp"
#include "slurm/slurm_client.hpp"

using namespace aqs;

namespace {

#define K_JOB_COLUMNS \
  "job_id,user,account,state,start,end,elapsed_s,alloc_cpu_seconds,total_cpu_seconds,user_cpu_seconds," \
  "system_cpu_seconds,max_rss_kb"

const char* k_usage =
    "Usage: fusage [-S START] [-E END] [-u USER] [-A ACCOUNT] [--jobs] [--csv|--json]\n"
    "  processor-hours charged per user and account for jobs that ended in [START, END)\n"
    "  (default: all of it; times as YYYY-MM-DD[THH:MM[:SS]], today, yesterday, now or Unix seconds)\n"
    "  -S, --starttime TIME   -E, --endtime TIME   -u, --user USER   -A, --account ACCOUNT\n"
    "      --jobs             one row per job instead (yours; root: everyone's), with what it\n"
    "                         held and what was measured: " K_JOB_COLUMNS "\n"
    "      --csv              user,account,jobs,cpu_seconds,cpu_hours,mem_mb_seconds,gpu_seconds\n"
    "      --json             the rows as a JSON list\n";

// --jobs: one row per job that ended in [from, to), from list_jobs with
// each job's usage (issue 32); a user sees their own jobs, root everyone's.
int jobs_report(client::connection& c, std::int64_t from, std::int64_t to, const std::string& user,
                const std::string& account, const std::string& format) {
  protocol::list_jobs l;
  l.all = true;
  l.usage = true;
  if (::getuid() != 0) l.user = slurm::current_user();
  const auto jobs = slurm::fetch_jobs(c, l, false);
  auto secs = [](const std::optional<std::int64_t>& us) -> nlohmann::json {
    return us ? nlohmann::json(static_cast<double>(*us) / 1e6) : nlohmann::json(nullptr);
  };
  nlohmann::json rows = nlohmann::json::array();
  const std::time_t now = std::time(nullptr);
  for (const auto& j : jobs) {
    const auto& i = j.info;
    if (!core::is_final(i.state) || !j.end || *j.end < from || *j.end >= to) continue;
    if (!user.empty() && i.user != user) continue;
    if (!account.empty() && i.account.value_or("") != account) continue;
    const auto total = slurm::total_cpu_us(j);
    rows.push_back({{"job_id", i.id},
                    {"user", i.user},
                    {"account", i.account ? nlohmann::json(*i.account) : nlohmann::json(nullptr)},
                    {"state", core::to_string(i.state)},
                    {"start", i.start_time ? nlohmann::json(*i.start_time) : nlohmann::json(nullptr)},
                    {"end", i.end_time ? nlohmann::json(*i.end_time) : nlohmann::json(nullptr)},
                    {"elapsed_s", slurm::elapsed(j, now)},
                    {"alloc_cpu_seconds", slurm::alloc_cpu_seconds(j, now)},
                    {"total_cpu_seconds", secs(total)},
                    {"user_cpu_seconds", secs(i.user_cpu_us)},
                    {"system_cpu_seconds", secs(i.system_cpu_us)},
                    {"max_rss_kb", i.max_rss_kb ? nlohmann::json(*i.max_rss_kb) : nlohmann::json(nullptr)}});
  }
  if (format == "json") {
    std::printf("%s\n", rows.dump().c_str());
    return 0;
  }
  auto cell = [](const nlohmann::json& v) -> std::string {
    if (v.is_null()) return "";
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_float()) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.3f", v.get<double>());
      return buf;
    }
    return v.dump();
  };
  const char* cols[] = {"job_id", "user", "account", "state", "start", "end", "elapsed_s", "alloc_cpu_seconds",
                        "total_cpu_seconds", "user_cpu_seconds", "system_cpu_seconds", "max_rss_kb"};
  if (format == "csv") {
    // Names, states and ISO times hold no comma or quote: no quoting needed.
    std::printf("%s\n", K_JOB_COLUMNS);
    for (const auto& r : rows) {
      std::string line;
      for (const char* col : cols) line += (line.empty() && col == cols[0] ? "" : ",") + cell(r.at(col));
      std::printf("%s\n", line.c_str());
    }
    return 0;
  }
  std::printf("%-10s %-16s %-12s %-10s %12s %12s %10s\n", "JOBID", "USER", "ACCOUNT", "STATE", "CPU_HELD_S",
              "CPU_USED_S", "MAXRSS_KB");
  for (const auto& r : rows) {
    std::printf("%-10s %-16s %-12s %-10s %12s %12s %10s\n", cell(r.at("job_id")).c_str(), cell(r.at("user")).c_str(),
                cell(r.at("account")).c_str(), cell(r.at("state")).c_str(), cell(r.at("alloc_cpu_seconds")).c_str(),
                cell(r.at("total_cpu_seconds")).c_str(), cell(r.at("max_rss_kb")).c_str());
  }
  return 0;
}

int run(const std::vector<std::string>& args) {
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  std::int64_t from = 0, to = now + 1;
  std::string user, account, format = "table";
  bool per_job = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::invalid_argument(a + " needs a value");
      return args[++i];
    };
    if (a == "-S" || a == "--starttime") {
      from = slurm::parse_report_time(value(), now);
    } else if (a == "-E" || a == "--endtime") {
      to = slurm::parse_report_time(value(), now);
    } else if (a == "-u" || a == "--user") {
      user = value();
    } else if (a == "-A" || a == "--account") {
      account = value();
    } else if (a == "--jobs") {
      per_job = true;
    } else if (a == "--csv") {
      format = "csv";
    } else if (a == "--json") {
      format = "json";
    } else {
      throw std::invalid_argument("unknown option '" + a + "' (see fusage --help)");
    }
  }
  if (to <= from) throw std::invalid_argument("the end must be after the start");
  client::connection c(client::socket_path(std::nullopt));
  if (per_job) return jobs_report(c, from, to, user, account, format);
  const nlohmann::json r = c.call(protocol::accounts{c.next_id(), "usage", {}, {}, {}, {}, false, from, to});
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& u : r.at("usage")) {
    if (!user.empty() && u.at("user") != user) continue;
    if (!account.empty() && u.at("account") != account) continue;
    rows.push_back(u);
  }
  if (format == "json") {
    std::printf("%s\n", rows.dump().c_str());
    return 0;
  }
  if (format == "csv") {
    std::printf("user,account,jobs,cpu_seconds,cpu_hours,mem_mb_seconds,gpu_seconds\n");
    for (const auto& u : rows) {
      std::printf("%s,%s,%lld,%.0f,%.2f,%.0f,%.0f\n", u.at("user").get<std::string>().c_str(),
                  u.at("account").get<std::string>().c_str(), static_cast<long long>(u.at("jobs").get<std::int64_t>()),
                  u.at("cpu_seconds").get<double>(), u.at("cpu_seconds").get<double>() / 3600.0,
                  u.at("mem_mb_seconds").get<double>(), u.at("gpu_seconds").get<double>());
    }
    return 0;
  }
  std::printf("%-16s %-16s %8s %12s\n", "USER", "ACCOUNT", "JOBS", "CPU_HOURS");
  for (const auto& u : rows) {
    std::printf("%-16s %-16s %8lld %12.2f\n", u.at("user").get<std::string>().c_str(),
                u.at("account").get<std::string>().c_str(), static_cast<long long>(u.at("jobs").get<std::int64_t>()),
                u.at("cpu_seconds").get<double>() / 3600.0);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const auto& a : args) {
    if (a == "-h" || a == "--help") {
      std::fputs(k_usage, stdout);
      return 0;
    }
  }
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fusage: %s\n", e.what());
    return 1;
  }
}
