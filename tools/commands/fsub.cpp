// fsub: submits a batch job (a script with #AQS/#SBATCH directives, or --wrap)
// and prints its id; with -M or --faucets, through a Faucets server.
#include <cstdio>

#include "client/client_connection.hpp"
#include "cmdline/commands.hpp"
#include "faucets_client/faucets_commands.hpp"
#include "cmdline/job_options.hpp"
#include "cmdline/run_command.hpp"
#include "client/submit.hpp"

using namespace aqs;

int main(int argc, char** argv) {
  return client::run_command("fsub", argc, argv, cmdline::parse_fsub_command_line, cmdline::fsub_usage,
                             [](const cmdline::fsub_command_line& cmd) {
    std::optional<std::string> script;
    if (cmd.script_path) {
      script = client::read_script(*cmd.script_path);
      if (!script) throw cmdline::usage_error("cannot read the script " + *cmd.script_path);
    }
    auto req = cmdline::build_fsub_request(cmd, script, client::this_process_context());
    for (const auto& w : req.warnings) std::fprintf(stderr, "fsub: warning: %s\n", w.c_str());
    if (cmd.options.faucets.used()) {  // -M / --faucets: through a Faucets server
      auto server = client::faucets_client_for(cmd.options.faucets);
      return client::fsub_through_faucets(server, cmd, req);
    }
    const std::string socket = client::socket_path(cmd.options.socket);
    if (req.request.test_only) return client::test_submit(socket, req.request, req.json, false);
    // A lost reply (the connection broke, aqsd's database was briefly
    // away) is retried with the same token: the job is made once and its id
    // printed once.
    const std::int64_t id = client::submit(socket, req.request, client::retry_told_as("fsub"));
    client::print_job_id(id, req.json, req.parsable, "Submitted job");
    return 0;
  });
}
