// fusage: AQS's usage report: processor-hours (and jobs) per user and
// account charged by jobs that ended in a period, as a table, CSV or JSON.
// Root sees everyone's; a user their own. (aqs-sreport gives Slurm's layout.)
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "slurm/accounting_format.hpp"
#include "slurm/slurm_client.hpp"

using namespace aqs;

namespace {

const char* k_usage =
    "Usage: fusage [-S START] [-E END] [-u USER] [-A ACCOUNT] [--csv|--json]\n"
    "  processor-hours charged per user and account for jobs that ended in [START, END)\n"
    "  (default: all of it; times as YYYY-MM-DD[THH:MM[:SS]], today, yesterday, now or Unix seconds)\n"
    "  -S, --starttime TIME   -E, --endtime TIME   -u, --user USER   -A, --account ACCOUNT\n"
    "      --csv              user,account,jobs,cpu_seconds,cpu_hours,mem_mb_seconds,gpu_seconds\n"
    "      --json             the rows as a JSON list\n";

int run(const std::vector<std::string>& args) {
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  std::int64_t from = 0, to = now + 1;
  std::string user, account, format = "table";
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
