// fsub: submits a batch job (a script with #AQS/#SBATCH directives, or --wrap)
// and prints its id.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "client/client_connection.hpp"
#include "client/commands.hpp"
#include "client/job_options.hpp"
#include "client/run_command.hpp"
#include "client/submit.hpp"

extern char** environ;

using namespace aqs;

int main(int argc, char** argv) {
  return client::run_command("fsub", [&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const auto cmd = cmdline::parse_fsub_command_line(args);
    if (cmd.options.help) {
      std::fputs(cmdline::fsub_usage().c_str(), stdout);
      return 0;
    }
    std::optional<std::string> script;
    if (cmd.script_path) {
      std::ifstream in(*cmd.script_path, std::ios::binary);
      if (!in || std::filesystem::is_directory(*cmd.script_path)) {
        throw cmdline::usage_error("cannot read the script " + *cmd.script_path);
      }
      std::ostringstream text;
      text << in.rdbuf();
      script = text.str();
    }
    cmdline::submit_context ctx;
    ctx.cwd = std::filesystem::current_path().string();
    for (char** e = environ; *e != nullptr; ++e) ctx.environment.emplace_back(*e);
    ctx.submit_token = client::random_token();
    auto req = cmdline::build_fsub_request(cmd, script, ctx);
    for (const auto& w : req.warnings) std::fprintf(stderr, "fsub: warning: %s\n", w.c_str());
    const std::string socket =
        cmdline::resolve_socket_path(cmd.options.socket, std::getenv("AQS_SOCKET"), client::k_default_socket);
    // A lost reply (the connection broke, aqsd's database was briefly
    // away) is retried with the same token: the job is made once and its id
    // printed once.
    client::submit_retry retry;
    retry.on_retry = [](int attempt, const std::string& why) {
      std::fprintf(stderr, "fsub: %s; sending the job again (attempt %d)\n", why.c_str(), attempt);
    };
    const std::int64_t id = client::submit(socket, req.request, retry);
    if (req.json) {
      std::printf("{\"job_id\":%lld}\n", static_cast<long long>(id));
    } else if (req.parsable) {
      std::printf("%lld\n", static_cast<long long>(id));
    } else {
      std::printf("Submitted job %lld\n", static_cast<long long>(id));
    }
    return 0;
  });
}
