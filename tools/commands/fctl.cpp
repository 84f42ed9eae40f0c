// fctl: hold, release, suspend, resume, requeue and update jobs (scontrol's
// job verbs); only your own unless root.
#include <cstdio>

#include "client/client_connection.hpp"
#include "cmdline/commands.hpp"
#include "cmdline/run_command.hpp"

using namespace aqs;

int main(int argc, char** argv) {
  return client::run_command("fctl", argc, argv, cmdline::parse_fctl_command_line, cmdline::fctl_usage,
                             [](const cmdline::fctl_command_line& cmd) {
    client::connection c(client::socket_path(cmd.common.socket));
    auto request = cmdline::build_control(cmd);
    request.id = c.next_id();
    const protocol::control_reply reply = c.ask(request);
    if (cmd.common.json) std::printf("%s\n", protocol::to_json(reply).dump().c_str());
    int rc = 0;
    for (const auto& f : reply.failed) {
      std::fprintf(stderr, "fctl: %s\n", f.message.c_str());
      rc = 1;
    }
    return rc;
  });
}
