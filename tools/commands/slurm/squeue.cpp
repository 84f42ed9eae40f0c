// aqs-squeue: Slurm's squeue over aqsd: the queue in Slurm's columns and
// formats (-o, -O, -h, --json), for people and for scripts that parse it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "slurm/slurm_client.hpp"

using namespace aqs;

namespace {

int state_rank(core::job_state s) {
  // Slurm sorts by state: pending jobs first, then running ones, then the rest.
  if (s == core::job_state::pending) return 0;
  if (!core::is_final(s)) return 1;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  return slurm::slurm_main(argc, argv, "squeue", slurm::parse_squeue_command_line, slurm::squeue_usage,
                           [&](const std::string& name, const auto& cmd) {
    slurm::squeue_format format = slurm::default_squeue_format();
    if (auto asked = slurm::asked_format(cmd, slurm::parse_squeue_format, slurm::parse_squeue_long_format,
                                         "SQUEUE_FORMAT", "SQUEUE_FORMAT2")) {
      format = std::move(*asked);
    } else if (cmd.long_list) {
      format = slurm::parse_squeue_long_format(
          "jobarrayid:.18 ,partition:.9 ,name:.8 ,username:.8 ,state:.8 ,timeused:.10 ,timelimit:.9 ,numnodes:.6 ,reasonlist:0");
    }
    for (const auto& e : format.errors) std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.c_str());

    const bool finals_wanted =
        !cmd.job_ids.empty() ||
        (cmd.states && std::any_of(cmd.states->begin(), cmd.states->end(), [](auto s) { return core::is_final(s); }));
    protocol::list_jobs request;
    request.all = finals_wanted;
    request.job_ids = cmd.job_ids;
    client::connection c(client::socket_path(std::nullopt));
    const std::time_t now = slurm::now();
    std::set<std::string> users;
    for (const auto& u : cmd.users) users.insert(slurm::resolve_user(u));
    std::vector<slurm::job_view> shown;
    for (auto& j : slurm::fetch_jobs(c, request, false)) {
      const auto st = j.info.state;
      if (core::is_final(st)) {
        // As squeue: a finished job stays visible a few minutes, and only
        // when asked for by id or state.
        if (!j.end || now - *j.end > slurm::k_min_job_age_s) continue;
        if (!cmd.states && cmd.job_ids.empty()) continue;
      }
      if (cmd.states && std::find(cmd.states->begin(), cmd.states->end(), st) == cmd.states->end()) continue;
      if (!users.empty() && users.count(j.info.user) == 0) continue;
      if (!cmd.names.empty() && std::find(cmd.names.begin(), cmd.names.end(), j.info.name) == cmd.names.end()) continue;
      if (!cmd.partitions.empty() &&
          std::find(cmd.partitions.begin(), cmd.partitions.end(), slurm::k_default_partition) == cmd.partitions.end()) {
        continue;
      }
      // A finished job's nodes are in its history (a 2-node job is not 1).
      if (core::is_final(st) && j.info.start_time && j.hosts.empty()) slurm::add_history(c, j, slurm::uid_lookup{});
      shown.push_back(std::move(j));
    }
    if (cmd.job_ids.size() == 1 && shown.empty() && !cmd.states) {
      std::fprintf(stderr, "slurm_load_jobs error: Invalid job id specified\n");
      return 1;
    }
    std::stable_sort(shown.begin(), shown.end(), [](const slurm::job_view& a, const slurm::job_view& b) {
      return state_rank(a.info.state) < state_rank(b.info.state);
    });
    if (cmd.json) {
      std::printf("%s\n", slurm::squeue_json(shown, now).c_str());
      return 0;
    }
    const std::string text = slurm::render_squeue(format, shown, !cmd.noheader, now, std::getenv("SLURM_TIME_FORMAT"));
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  });
}
