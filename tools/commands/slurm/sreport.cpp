// aqs-sreport: Slurm's sreport over aqsd's usage records: cluster
// AccountUtilizationByUser (and its alias UserUtilizationByAccount's rows
// per account), start=/end= (default: yesterday), users=, accounts=, -t
// minutes|hours|seconds|percent, -P/-p, -n. Each finished job's
// processor-seconds (an adaptive job's the integral of its maps).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "core/text_util.hpp"
#include "slurm/accounting_format.hpp"
#include "slurm/slurm_client.hpp"

using namespace aqs;

namespace {

const char* k_usage =
    "Usage: sreport [-P|-p] [-n] [-t minutes|hours|seconds|percent] cluster AccountUtilizationByUser\n"
    "               [start=TIME] [end=TIME] [users=U[,U]] [accounts=A[,A]]\n"
    "  processor time charged per account and user in [start, end) (default: yesterday)\n";

int run(const std::vector<std::string>& args) {
  slurm::print_style style = slurm::print_style::table;
  bool header = true;
  std::string unit = "minutes";
  std::vector<std::string> words;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-P" || a == "--parsable2") {
      style = slurm::print_style::parsable2;
    } else if (a == "-p" || a == "--parsable") {
      style = slurm::print_style::parsable;
    } else if (a == "-n" || a == "--noheader") {
      header = false;
    } else if (a == "-t") {
      if (i + 1 >= args.size()) throw std::invalid_argument("option requires an argument -- 't'");
      unit = core::ascii_lower(args[++i]);
    } else if (a.rfind("-t", 0) == 0 && a.size() > 2 && a[1] == 't') {
      unit = core::ascii_lower(a.substr(2));
    } else if (a.size() > 1 && a[0] == '-') {
      throw std::invalid_argument("unrecognized option '" + a + "'");
    } else {
      words.push_back(a);
    }
  }
  if (unit != "minutes" && unit != "hours" && unit != "seconds" && unit != "percent") {
    throw std::invalid_argument("unknown time format '" + unit + "' (minutes, hours, seconds or percent)");
  }
  if (words.size() < 2 || core::ascii_lower(words[0]) != "cluster" ||
      (core::ascii_lower(words[1]) != "accountutilizationbyuser" && core::ascii_lower(words[1]) != "userutilizationbyaccount")) {
    throw std::invalid_argument("AQS reports: cluster AccountUtilizationByUser (see sreport --help)");
  }
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  std::int64_t from = slurm::parse_report_time("yesterday", now), to = slurm::parse_report_time("today", now);
  std::vector<std::string> users, accounts;
  for (std::size_t i = 2; i < words.size(); ++i) {
    const std::string& w = words[i];
    const auto eq = w.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("'" + w + "' needs a value (key=value)");
    const std::string k = core::ascii_lower(w.substr(0, eq)), v = w.substr(eq + 1);
    if (k == "start") {
      from = slurm::parse_report_time(v, now);
    } else if (k == "end") {
      to = slurm::parse_report_time(v, now);
    } else if (k == "users" || k == "user") {
      users = slurm::comma_list(v);
    } else if (k == "accounts" || k == "account") {
      accounts = slurm::comma_list(v);
    } else {
      throw std::invalid_argument("unknown option '" + w + "' (start=, end=, users=, accounts=)");
    }
  }
  if (to <= from) throw std::invalid_argument("end must be after start");
  client::connection c(client::socket_path(std::nullopt));
  const nlohmann::json r = c.call(protocol::accounts{c.next_id(), "usage", {}, {}, {}, {}, false, from, to});
  std::vector<slurm::usage_row> rows;
  for (const auto& u : r.at("usage")) {
    slurm::usage_row row{u.at("user").get<std::string>(), u.at("account").get<std::string>(),
                         u.at("jobs").get<std::int64_t>(), u.at("cpu_seconds").get<double>()};
    if (!users.empty() && std::find(users.begin(), users.end(), row.user) == users.end()) continue;
    if (!accounts.empty() && std::find(accounts.begin(), accounts.end(), row.account) == accounts.end()) continue;
    rows.push_back(std::move(row));
  }
  const std::string text = slurm::sreport_account_utilization(rows, from, to, unit, style, header);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return slurm::accounting_main(argc, argv, "sreport", k_usage, [](const std::vector<std::string>& args) { return run(args); });
}
