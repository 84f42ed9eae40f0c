// fkill: cancels jobs (or sends them a signal); only your own unless root;
// with -M or --faucets, through a Faucets server.
#include <algorithm>
#include <cstdio>

#include "client/client_connection.hpp"
#include "cmdline/commands.hpp"
#include "faucets_client/faucets_commands.hpp"
#include "client/job_listing.hpp"
#include "cmdline/run_command.hpp"

using namespace aqs;

int main(int argc, char** argv) {
  return client::run_command("fkill", argc, argv, cmdline::parse_fkill_command_line, cmdline::fkill_usage,
                             [](const cmdline::fkill_command_line& cmd) {
    if (cmd.faucets.used()) {  // -M / --faucets: cancelled through a Faucets server
      auto server = client::faucets_client_for(cmd.faucets);
      return client::fkill_through_faucets(server, cmd);
    }
    client::connection c(client::socket_path(cmd.common.socket));
    auto request = cmdline::build_cancel(cmd);
    if (!cmd.array_tasks.empty()) {
      // "123_4": the job that is task 4 of array 123, found among the live jobs.
      const auto live = client::parse_jobs(client::list_job_pages(c, protocol::list_jobs{}, std::nullopt));
      for (const auto& [array, task] : cmd.array_tasks) {
        const auto found = client::find_array_task(live, array, task);
        if (found.job_id) {
          request.job_ids.push_back(*found.job_id);
        } else if (found.record_id) {
          // Not split off yet: aqsd takes it out of its array's record.
          request.array_tasks.push_back(std::to_string(array) + "_" + std::to_string(task));
        } else {
          std::fprintf(stderr, "fkill: no pending or running task %lld_%lld\n", static_cast<long long>(array),
                       static_cast<long long>(task));
          return 1;
        }
      }
    }
    return client::ask_for_jobs(c, std::move(request), "fkill", cmd.common.json);
  });
}
