// aqs-sinfo: Slurm's sinfo over aqsd: the nodes grouped by state in one
// partition (AQS's nodes form one default partition until partitions exist).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "slurm/reservations.hpp"
#include "slurm/slurm_client.hpp"

using namespace aqs;

int main(int argc, char** argv) {
  return slurm::slurm_main(argc, argv, "sinfo", slurm::parse_sinfo_command_line, slurm::sinfo_usage,
                           [&](const std::string& name, const auto& cmd) {
    slurm::sinfo_format format = slurm::default_sinfo_format(cmd.node_oriented);
    if (auto asked = slurm::asked_format(cmd, slurm::parse_sinfo_format, slurm::parse_sinfo_long_format, "SINFO_FORMAT")) {
      format = std::move(*asked);
    } else if (cmd.summarize) {
      format = slurm::parse_sinfo_long_format("partition:9 ,available:.5 ,time:.10 ,nodeaiot:.16 ,nodelist:0");
    } else if (cmd.long_list) {
      format = slurm::parse_sinfo_long_format(
          cmd.node_oriented ? "nodelist:0 ,nodes:.6 ,partition:.9 ,statelong:.11 ,cpus:4 ,memory:.6"
                            : "partition:9 ,available:.5 ,time:.10 ,nodes:.6 ,statelong:.11 ,nodelist:0");
    }
    for (const auto& e : format.errors) std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.c_str());
    client::connection c(client::socket_path(std::nullopt));
    if (cmd.reservations) {
      const nlohmann::json r = c.call(protocol::reservations{c.next_id(), "show", {}, {}});
      if (cmd.json) {
        std::printf("%s\n", r.dump().c_str());
        return 0;
      }
      const std::string text = slurm::sinfo_reservations(r, !cmd.noheader, std::getenv("SLURM_TIME_FORMAT"));
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    }
    auto nodes = slurm::fetch_nodes(c);
    if (!cmd.partitions.empty()) slurm::keep_partitions(nodes, cmd.partitions);
    if (cmd.json) {
      std::printf("%s\n", slurm::sinfo_json(nodes).c_str());
      return 0;
    }
    const auto grouping = cmd.node_oriented ? slurm::sinfo_grouping::per_node
                          : cmd.summarize   ? slurm::sinfo_grouping::all
                                            : slurm::sinfo_grouping::by_state;
    const std::string text = slurm::render_sinfo(format, nodes, !cmd.noheader, grouping);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  });
}
