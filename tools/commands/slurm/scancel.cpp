// aqs-scancel: Slurm's scancel over aqsd: quiet on success, Slurm's error
// lines ("scancel: error: Kill job error on job id N: ...") and exit 1 on
// failure.
#include <algorithm>
#include <cstdio>
#include <set>

#include "client/job_listing.hpp"
#include "slurm/slurm_client.hpp"

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

// Asks aqsd to cancel what k names (to signal it, with -s); each job it
// could not is reported in Slurm's words (unless -Q) and makes rc 1.
protocol::cancel_reply ask_cancel(client::connection& c, protocol::cancel k, const slurm::scancel_command_line& cmd,
                                  const std::string& name, int& rc) {
  k.id = c.next_id();
  if (cmd.signal) k.signal = *cmd.signal;
  const protocol::cancel_reply reply = c.ask(k);
  for (const auto& f : reply.failed) {
    if (!cmd.quiet) {
      std::fprintf(stderr, "%s: error: Kill job error on job id %lld: %s\n", name.c_str(),
                   static_cast<long long>(f.job_id), slurm_error_text(f.code).c_str());
    }
    rc = 1;
  }
  return reply;
}

}  // namespace

int main(int argc, char** argv) {
  return slurm::slurm_main(argc, argv, "scancel", slurm::parse_scancel_command_line, slurm::scancel_usage,
                           [&](const std::string& name, const auto& cmd) {
    if (cmd.job_ids.empty() && cmd.array_tasks.empty() && !slurm::has_filter(cmd)) {
      throw slurm::command_error("No job identification provided");
    }
    client::connection c(client::socket_path(std::nullopt));
    std::vector<std::int64_t> ids = cmd.job_ids;
    std::vector<std::string> unsplit;  // ARRAY_TASK of tasks still in their array's record
    int rc = 0;
    if (!cmd.array_tasks.empty()) {
      // "123_4": the live job that is task 4 of array 123 (as fkill finds
      // it), or a task its array's pending record still holds.
      std::vector<protocol::job_info> live;
      for (auto& j : slurm::fetch_jobs(c, protocol::list_jobs{}, false)) live.push_back(std::move(j.info));
      for (const auto& [array, task] : cmd.array_tasks) {
        const auto found = client::find_array_task(live, array, task);
        if (found.job_id) {
          if (std::find(ids.begin(), ids.end(), *found.job_id) == ids.end()) ids.push_back(*found.job_id);
          continue;
        }
        if (found.record_id) {
          unsplit.push_back(std::to_string(array) + "_" + std::to_string(task));
          continue;
        }
        if (!cmd.quiet) {
          std::fprintf(stderr, "%s: error: Kill job error on job id %lld_%lld: Invalid job id specified\n", name.c_str(),
                       static_cast<long long>(array), static_cast<long long>(task));
        }
        rc = 1;
      }
      if (!unsplit.empty()) {
        // Tasks not split off their record yet: aqsd takes them out of it.
        protocol::cancel k;
        k.array_tasks = unsplit;
        try {
          ask_cancel(c, std::move(k), cmd, name, rc);
        } catch (const client::client_error& e) {
          if (!e.code()) throw;
          if (!cmd.quiet) std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.what());
          rc = 1;
        }
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
      k.job_ids = {id};
      try {
        const protocol::cancel_reply reply = ask_cancel(c, std::move(k), cmd, name, rc);
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
