// fnodes: the nodes, their processors and the jobs holding them, or the
// round trips between them (--latency).
#include <cstdio>

#include "client/client_connection.hpp"
#include "cmdline/commands.hpp"
#include "client/format.hpp"
#include "cmdline/latency_matrix.hpp"
#include "cmdline/run_command.hpp"

using namespace aqs;

int main(int argc, char** argv) {
  return client::run_command("fnodes", argc, argv, cmdline::parse_fnodes_command_line, cmdline::fnodes_usage,
                             [](const cmdline::fnodes_command_line& cmd) {
    client::connection c(client::socket_path(cmd.common.socket));
    const auto listed = c.ask(protocol::list_nodes{c.next_id()}).nodes;
    const std::vector<protocol::node_info> nodes(listed.begin(), listed.end());  // without "connected"
    // --json --latency is --json: the round trips are in each node's object.
    const std::string text = cmd.common.json ? client::nodes_json(nodes) + "\n"
                             : cmd.latency   ? cmdline::format_latency_matrix(nodes)
                                             : client::format_nodes_table(nodes);
    std::fputs(text.c_str(), stdout);
    return 0;
  });
}
