// aqs-scontrol: the subset of Slurm's scontrol that maps onto AQS: fctl's job
// verbs (hold, release, requeue, suspend, resume, update) and `show job,
// partition, node, hostnames, hostlist` in scontrol's key=value form.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "slurm/reservations.hpp"
#include "slurm/scontrol.hpp"
#include "slurm/slurm_client.hpp"
#include "core/hostlist.hpp"

using namespace aqs;

namespace {

void out(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

}  // namespace

int main(int argc, char** argv) {
  return slurm::slurm_main(argc, argv, "scontrol", slurm::parse_scontrol_command_line, slurm::scontrol_usage,
                           [&](const std::string& name, const auto& cmd) {
    if (cmd.verb == "show" && (cmd.entity == "hostnames" || cmd.entity == "hostlist")) {
      // No aqsd needed: host list arithmetic, as job scripts use it
      // (`scontrol show hostnames $SLURM_JOB_NODELIST`).
      std::string list;
      if (cmd.name) {
        list = *cmd.name;
      } else if (const char* env = std::getenv("SLURM_JOB_NODELIST"); env != nullptr) {
        list = env;
      } else {
        throw slurm::command_error("show hostnames needs a host list (or $SLURM_JOB_NODELIST)");
      }
      std::vector<std::string> hosts;
      try {
        hosts = core::expand_hostlist(list);
      } catch (const std::exception& e) {
        throw slurm::command_error("invalid host list '" + list + "': " + e.what());
      }
      if (cmd.entity == "hostlist") {
        std::printf("%s\n", core::compress_hostlist(hosts).c_str());
      } else {
        for (const auto& h : hosts) std::printf("%s\n", h.c_str());
      }
      return 0;
    }
    const std::string socket = client::socket_path(std::nullopt);
    client::connection c(socket);
    if (cmd.entity == "reservation") {
      if (cmd.verb == "show") {
        const nlohmann::json r = c.call(protocol::reservations{c.next_id(), "show", cmd.name, {}});
        out(slurm::scontrol_show_reservations(r, cmd.oneliner, std::getenv("SLURM_TIME_FORMAT")));
        return 0;
      }
      if (cmd.verb == "delete") {
        c.call(protocol::reservations{c.next_id(), "delete", cmd.words[0], {}});
        return 0;
      }
      const nlohmann::json rec = slurm::reservation_record(cmd.words, slurm::now(), cmd.verb == "create");
      const nlohmann::json r = c.call(protocol::reservations{c.next_id(), cmd.verb, rec.at("name").get<std::string>(), rec.dump()});
      if (cmd.verb == "create") {
        std::printf("Reservation created: %s\n", r.at("reservation").at("name").get<std::string>().c_str());
      } else {
        std::printf("Reservation updated.\n");
      }
      return 0;
    }
    if (cmd.verb == "show" && cmd.entity == "config") {
      const protocol::list_nodes_reply reply = c.ask(protocol::list_nodes{c.next_id()});
      out(slurm::scontrol_show_config(reply, slurm::now(), socket, std::getenv("SLURM_TIME_FORMAT")));
      return 0;
    }
    if (cmd.verb == "show" && cmd.entity == "job") {
      protocol::list_jobs request;
      request.all = !cmd.job_ids.empty();
      request.job_ids = cmd.job_ids;
      const auto jobs = slurm::fetch_jobs(c, request, !cmd.job_ids.empty());
      if (jobs.empty()) {
        if (!cmd.job_ids.empty()) {
          std::fprintf(stderr, "slurm_load_jobs error: Invalid job id specified\n");
          return 1;
        }
        if (!cmd.quiet) std::printf("No jobs in the system\n");
        return 0;
      }
      const std::time_t now = slurm::now();
      for (const auto& j : jobs) out(slurm::scontrol_show_job(j, now, cmd.oneliner, std::getenv("SLURM_TIME_FORMAT")));
      return 0;
    }
    if (cmd.verb == "show") {
      const protocol::list_nodes_reply reply = c.ask(protocol::list_nodes{c.next_id()});
      const bool partition = cmd.entity == "partition";
      const auto text = partition ? slurm::scontrol_show_partitions(reply, cmd.name, cmd.oneliner)
                                  : slurm::scontrol_show_nodes(reply, cmd.name, cmd.oneliner);
      if (!text) {
        // As Slurm's: on stdout, exit 1.
        if (!cmd.quiet) {
          if (cmd.name) {
            std::printf("%s %s not found\n", partition ? "Partition" : "Node", cmd.name->c_str());
          } else {
            std::printf("No %s in the system\n", partition ? "partitions" : "nodes");
          }
        }
        return cmd.name ? 1 : 0;
      }
      out(*text);
      return 0;
    }
    // The job verbs and update: fctl's request.
    auto request = slurm::scontrol_control(cmd);
    request.id = c.next_id();
    const protocol::control_reply reply = c.ask(request);
    int rc = 0;
    for (const auto& f : reply.failed) {
      std::fprintf(stderr, "%s: error: %s\n", name.c_str(), f.message.c_str());
      rc = 1;
    }
    return rc;
  });
}
