// fnodes: the nodes, their processors and the jobs holding them.
#include <cstdio>
#include <cstdlib>

#include "client/client_connection.hpp"
#include "client/commands.hpp"
#include "client/format.hpp"
#include "client/run_command.hpp"

using namespace aqs;

int main(int argc, char** argv) {
  return client::run_command("fnodes", [&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const auto cmd = cmdline::parse_fnodes_command_line(args);
    if (cmd.common.help) {
      std::fputs(cmdline::fnodes_usage().c_str(), stdout);
      return 0;
    }
    client::connection c(
        cmdline::resolve_socket_path(cmd.common.socket, std::getenv("AQS_SOCKET"), client::k_default_socket));
    const auto listed = c.ask(protocol::list_nodes{c.next_id()}).nodes;
    const std::vector<protocol::node_info> nodes(listed.begin(), listed.end());  // without "connected"
    std::fputs((cmd.common.json ? client::nodes_json(nodes) + "\n" : client::format_nodes_table(nodes)).c_str(), stdout);
    return 0;
  });
}
