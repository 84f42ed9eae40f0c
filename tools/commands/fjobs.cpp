// fjobs: the queue and running jobs (--all: finished ones too), or one job's
// history (--history), as a table or one JSON array; with -M or --faucets,
// those of a Faucets server.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <unistd.h>

#include "client/client_connection.hpp"
#include "cmdline/commands.hpp"
#include "faucets_client/faucets_commands.hpp"
#include "client/format.hpp"
#include "client/job_listing.hpp"
#include "cmdline/run_command.hpp"
#include "slurm/slurm_client.hpp"
#include "slurm/slurm_format.hpp"

using namespace aqs;

int main(int argc, char** argv) {
  return client::run_command("fjobs", argc, argv, cmdline::parse_fjobs_command_line, cmdline::fjobs_usage,
                             [](const cmdline::fjobs_command_line& cmd) {
    if (cmd.faucets.used()) {  // -M / --faucets: the jobs a Faucets server knows
      auto server = client::faucets_client_for(cmd.faucets);
      return client::fjobs_through_faucets(server, cmd);
    }
    client::connection c(client::socket_path(cmd.common.socket));
    if (cmd.efficiency) {
      // Like seff (issue 32): the job with its usage, measured figures
      // shown to its owner and root only (aqsd leaves them out otherwise).
      protocol::list_jobs one;
      one.all = true;
      one.usage = true;
      one.job_ids = {*cmd.efficiency};
      const auto jobs = client::parse_jobs(client::list_job_pages(c, one, std::nullopt));
      if (jobs.empty()) {
        std::fprintf(stderr, "fjobs: no job %lld\n", static_cast<long long>(*cmd.efficiency));
        return 1;
      }
      slurm::job_view v = slurm::make_view(jobs.front(), nullptr);
      // Its history (its owner's and root's): the nodes it ran on, and
      // without a usage record (a user in no account) the integral of its
      // maps as its core-walltime.
      if (core::is_final(v.info.state)) slurm::add_history(c, v, nullptr);
      const std::time_t now = std::time(nullptr);
      // aqsd shows another user's job without what was measured.
      const bool hidden = ::getuid() != 0 && v.info.user != slurm::current_user();
      if (cmd.common.json) {
        std::printf("%s\n", slurm::efficiency_json(v, now, hidden).c_str());
      } else {
        std::fputs(slurm::efficiency_text(v, now, hidden).c_str(), stdout);
      }
      return 0;
    }
    std::optional<std::int64_t> history = cmd.history;
    if (cmd.history_task) {
      // The job that is (or will be) that task: it, or its array's pending record.
      const auto [array, task] = *cmd.history_task;
      protocol::list_jobs all;
      all.all = true;
      all.after_id = array - 1;
      const auto jobs = client::parse_jobs(client::list_job_pages(c, all, std::nullopt));
      const auto found = client::find_array_task(jobs, array, task);
      if (found.job_id) {
        history = *found.job_id;
      } else if (found.record_id) {
        std::fprintf(stderr, "fjobs: task %lld_%lld has no job of its own yet: array %lld's pending record %lld holds its unstarted tasks\n",
                     static_cast<long long>(array), static_cast<long long>(task), static_cast<long long>(array),
                     static_cast<long long>(*found.record_id));
        history = *found.record_id;
      } else {
        std::fprintf(stderr, "fjobs: no task %lld_%lld\n", static_cast<long long>(array), static_cast<long long>(task));
        return 1;
      }
    }
    if (history) {
      const auto reply = c.ask(protocol::job_history{c.next_id(), *history});
      if (cmd.common.json) {
        std::printf("%s\n", protocol::to_json(reply)["events"].dump().c_str());
      } else {
        std::fputs(client::format_history_table(reply.events).c_str(), stdout);
      }
      return 0;
    }
    // Long histories come in pages, kept as aqsd's text: --json prints it
    // as it is (parsing 100,000 jobs only to print them again took seconds).
    const auto limit = cmdline::listing_limit(cmd);
    if (cmd.common.json && !limit) {
      // Everything, oldest first: each page is printed as it arrives, so the
      // output starts at once and memory stays at one page.
      bool first = true;
      std::fputc('[', stdout);
      client::for_each_job_page(c, cmdline::build_list_jobs(cmd), [&](const client::job_page& p) {
        const std::string_view text = client::page_jobs_text(p);
        if (text.empty()) return;
        if (!first) std::fputc(',', stdout);
        first = false;
        std::fwrite(text.data(), 1, text.size(), stdout);
      });
      std::fputs("]\n", stdout);
      return 0;
    }
    const client::job_listing listing = client::list_job_pages(c, cmdline::build_list_jobs(cmd), limit);
    if (cmd.common.json) {
      const std::string text = client::jobs_json_text(listing);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fputc('\n', stdout);
    } else {
      const double now =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      std::fputs(client::format_jobs_table(client::parse_jobs(listing), now, cmd.expand_arrays).c_str(), stdout);
      if (listing.older_left_out && !cmd.limit) {
        std::fprintf(stderr, "fjobs: the newest %lld jobs; --limit N shows more, --limit 0 all\n",
                     static_cast<long long>(*limit));
      }
    }
    return 0;
  });
}
