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
    return client::ask_for_jobs(c, cmdline::build_control(cmd), "fctl", cmd.common.json);
  });
}
