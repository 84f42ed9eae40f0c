// aqs-sprio: Slurm's sprio over aqsd: each pending job's multifactor
// priority and its factors (age, fair share, job size, partition, QOS),
// weighted as aqs.conf's PriorityWeight* say. -j JOBS -u USERS -l -n -o -w.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/text_util.hpp"
#include "slurm/accounting_format.hpp"
#include "slurm/slurm_client.hpp"

using namespace aqs;

namespace {

const char* k_usage =
    "Usage: sprio [-l] [-n] [-w] [-j JOBID[,JOBID]] [-u USER[,USER]] [-o FORMAT]\n"
    "  pending jobs' priorities and their weighted factors\n";

core::priority_weights weights_of(const nlohmann::json& w) {
  core::priority_weights out;
  out.age = w.at("age").get<std::uint32_t>();
  out.fairshare = w.at("fairshare").get<std::uint32_t>();
  out.job_size = w.at("job_size").get<std::uint32_t>();
  out.partition = w.at("partition").get<std::uint32_t>();
  out.qos = w.at("qos").get<std::uint32_t>();
  out.max_age_s = w.at("max_age_s").get<double>();
  out.half_life_s = w.at("half_life_s").get<double>();
  out.favor_small = w.at("favor_small").get<bool>();
  return out;
}

int run(const std::vector<std::string>& args) {
  bool long_list = false, header = true, weights_only = false;
  std::vector<std::string> jobs, users;
  std::string format;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* opt) -> std::string {
      if (i + 1 >= args.size()) throw std::invalid_argument(std::string("option requires an argument -- '") + opt + "'");
      return args[++i];
    };
    if (a == "-l" || a == "--long") {
      long_list = true;
    } else if (a == "-n" || a == "--noheader") {
      header = false;
    } else if (a == "-w" || a == "--weights") {
      weights_only = true;
    } else if (a == "-j") {
      for (auto& j : slurm::comma_list(value("j"))) jobs.push_back(j);
    } else if (a.rfind("--jobs=", 0) == 0) {
      for (auto& j : slurm::comma_list(a.substr(7))) jobs.push_back(j);
    } else if (a == "-u") {
      for (auto& u : slurm::comma_list(value("u"))) users.push_back(u);
    } else if (a.rfind("--user=", 0) == 0) {
      for (auto& u : slurm::comma_list(a.substr(7))) users.push_back(u);
    } else if (a == "-o") {
      format = value("o");
    } else if (a.rfind("--format=", 0) == 0) {
      format = a.substr(9);
    } else {
      throw std::invalid_argument("unrecognized option '" + a + "'");
    }
  }
  client::connection c(client::socket_path(std::nullopt));
  const nlohmann::json r = c.call(protocol::accounts{c.next_id(), "priority", {}, {}, {}, {}, false, {}, {}});
  const core::priority_weights w = weights_of(r.at("weights"));
  if (weights_only) {
    const std::string text = slurm::sprio_weights(w);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::vector<slurm::sprio_job> rows;
  for (const auto& j : r.at("jobs")) {
    slurm::sprio_job s;
    s.priority.id = j.at("job_id").get<std::uint64_t>();
    s.priority.value = j.at("priority").get<int>();
    s.priority.factors.age = j.at("age").get<double>();
    s.priority.factors.fairshare = j.at("fairshare").get<double>();
    s.priority.factors.job_size = j.at("job_size").get<double>();
    s.priority.factors.partition = j.at("partition_factor").get<double>();
    s.priority.factors.qos = j.at("qos").get<double>();
    s.user = j.at("user").get<std::string>();
    s.account = j.at("account").get<std::string>();
    s.partition = j.at("partition").get<std::string>();
    if (s.partition.empty()) s.partition = "main";
    if (!jobs.empty() && std::find(jobs.begin(), jobs.end(), std::to_string(s.priority.id)) == jobs.end()) continue;
    if (!users.empty() && std::find(users.begin(), users.end(), s.user) == users.end()) continue;
    rows.push_back(std::move(s));
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.priority.id < b.priority.id; });
  const auto fields = slurm::sprio_format(format.empty() ? slurm::sprio_default_format(w, long_list) : format);
  const std::string text = slurm::sprio_show(rows, w, fields, header);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return slurm::accounting_main(argc, argv, "sprio", k_usage, [](const std::vector<std::string>& args) { return run(args); });
}
