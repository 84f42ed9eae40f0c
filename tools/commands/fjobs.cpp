// fjobs: the queue and running jobs (--all: finished ones too), or one job's
// history (--history), as a table or one JSON array.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "client/client_connection.hpp"
#include "client/commands.hpp"
#include "client/format.hpp"
#include "client/run_command.hpp"

using namespace aqs;

int main(int argc, char** argv) {
  return client::run_command("fjobs", [&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const auto cmd = cmdline::parse_fjobs_command_line(args);
    if (cmd.common.help) {
      std::fputs(cmdline::fjobs_usage().c_str(), stdout);
      return 0;
    }
    client::connection c(
        cmdline::resolve_socket_path(cmd.common.socket, std::getenv("AQS_SOCKET"), client::k_default_socket));
    if (cmd.history) {
      const auto events = c.call(protocol::job_history{c.next_id(), *cmd.history})["events"];
      if (cmd.common.json) {
        std::printf("%s\n", events.dump().c_str());
      } else {
        std::fputs(client::format_history_table(events).c_str(), stdout);
      }
      return 0;
    }
    std::vector<protocol::job_info> jobs;
    auto request = cmdline::build_list_jobs(cmd);
    // Long histories come in pages.
    while (true) {
      request.id = c.next_id();
      const auto result = c.call(request);
      auto page = protocol::parse_job_list(result);
      const bool more = result.value("more", false) && !page.empty();
      if (!page.empty()) request.after_id = page.back().id;
      jobs.insert(jobs.end(), page.begin(), page.end());
      if (!more) break;
    }
    if (cmd.common.json) {
      std::printf("%s\n", client::jobs_json(jobs).c_str());
    } else {
      const double now =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      std::fputs(client::format_jobs_table(jobs, now).c_str(), stdout);
    }
    return 0;
  });
}
