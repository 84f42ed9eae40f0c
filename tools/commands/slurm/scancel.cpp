// aqs-scancel: Slurm's scancel over aqsd: quiet on success, Slurm's error
// lines ("scancel: error: Kill job error on job id N: ...") and exit 1 on
// failure.
#include <algorithm>
#include <cstdio>
#include <set>

#include "client/slurm_client.hpp"

using namespace aqs;

namespace {

// Slurm's words for aqsd's refusals.
std::string slurm_error_text(protocol::error_code code) {
  switch (code) {
    case protocol::error_code::not_found:
    case protocol::error_code::invalid_state: return "Invalid job id specified";
    case protocol::error_code::permission_denied: return "Access/permission denied";
    default: return "Unexpected message received";
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = slurm::command_name(argv[0], "scancel");
  return slurm::run_slurm(name, [&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const auto cmd = slurm::parse_scancel_command_line(args);
    if (cmd.help || cmd.usage) {
      std::fputs(slurm::scancel_usage().c_str(), stdout);
      return 0;
    }
    if (cmd.version) {
      std::printf("%s\n", slurm::k_version_line);
      return 0;
    }
    if (cmd.job_ids.empty() && cmd.array_tasks.empty() && !slurm::has_filter(cmd)) {
      throw slurm::command_error("No job identification provided");
    }
    client::connection c(client::socket_path(std::nullopt));
    std::vector<std::int64_t> ids = cmd.job_ids;
    int rc = 0;
    if (!cmd.array_tasks.empty()) {
      // "123_4": the live job that is task 4 of array 123 (as fkill finds it).
      const auto live = slurm::fetch_jobs(c, protocol::list_jobs{}, false);
      for (const auto& [array, task] : cmd.array_tasks) {
        const auto it = std::find_if(live.begin(), live.end(), [&](const slurm::job_view& j) {
          return j.info.array_job_id == array && j.info.array_task_id == task;
        });
        if (it != live.end()) {
          if (std::find(ids.begin(), ids.end(), it->info.id) == ids.end()) ids.push_back(it->info.id);
          continue;
        }
        if (!cmd.quiet) {
          std::fprintf(stderr, "%s: error: Kill job error on job id %lld_%lld: Invalid job id specified\n", name.c_str(),
                       static_cast<long long>(array), static_cast<long long>(task));
        }
        rc = 1;
      }
      if (ids.empty()) return rc;  // never widen to every job the filters match
    }
    std::vector<std::int64_t> targets = ids;
    if (slurm::has_filter(cmd)) {
      // The filters select among the active jobs (and among the given ids).
      protocol::list_jobs request;
      request.job_ids = ids;
      std::set<std::string> users;
      for (const auto& u : cmd.users) users.insert(slurm::resolve_user(u));
      targets.clear();
      std::set<std::int64_t> found;
      for (const auto& j : slurm::fetch_jobs(c, request, false)) {
        found.insert(j.info.id);
        if (!users.empty() && users.count(j.info.user) == 0) continue;
        if (cmd.name && j.info.name != *cmd.name) continue;
        if (cmd.states && std::find(cmd.states->begin(), cmd.states->end(), j.info.state) == cmd.states->end()) continue;
        if (!cmd.partitions.empty() &&
            std::find(cmd.partitions.begin(), cmd.partitions.end(), slurm::k_default_partition) == cmd.partitions.end()) {
          continue;
        }
        targets.push_back(j.info.id);
      }
      for (const auto id : ids) {
        if (found.count(id) != 0) continue;
        if (!cmd.quiet) std::fprintf(stderr, "%s: error: Kill job error on job id %lld: Invalid job id specified\n", name.c_str(), static_cast<long long>(id));
        rc = 1;
      }
      if (targets.empty()) {
        if (cmd.verbose) std::fprintf(stderr, "%s: error: No active jobs match ALL job filters\n", name.c_str());
        return rc;
      }
    }
    // One request per job, so that each refusal is reported against its id
    // (aqsd answers a request whose jobs all fail with one error).
    for (const auto id : targets) {
      protocol::cancel k;
      k.id = c.next_id();
      k.job_ids = {id};
      if (cmd.signal) k.signal = *cmd.signal;
      try {
        const protocol::cancel_reply reply = c.ask(k);
        for (const auto& f : reply.failed) {
          if (!cmd.quiet) {
            std::fprintf(stderr, "%s: error: Kill job error on job id %lld: %s\n", name.c_str(),
                         static_cast<long long>(f.job_id), slurm_error_text(f.code).c_str());
          }
          rc = 1;
        }
        if (cmd.verbose && !reply.cancelled.empty()) {
          std::fprintf(stderr, "%s: %s job %lld\n", name.c_str(), cmd.signal ? "Signal sent to" : "Terminating",
                       static_cast<long long>(id));
        }
      } catch (const client::client_error& e) {
        if (!e.code()) throw;
        if (!cmd.quiet) {
          std::fprintf(stderr, "%s: error: Kill job error on job id %lld: %s\n", name.c_str(), static_cast<long long>(id),
                       slurm_error_text(*e.code()).c_str());
        }
        rc = 1;
      }
    }
    return rc;
  });
}
