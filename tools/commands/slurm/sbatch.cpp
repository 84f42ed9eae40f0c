// aqs-sbatch: Slurm's sbatch over AQS: everything fsub takes (#SBATCH
// directives, --wrap, ...), the script on standard input when none is named,
// "Submitted batch job ID" (--parsable: "ID"), Slurm's exit status 1 on any
// failure. Slurm options fsub does not know yet and that change nothing AQS
// does (--export-file, ...) are dropped with a warning; its
// input environment (SBATCH_JOB_NAME, SBATCH_PARTITION, ...) is read as
// Slurm's sbatch reads it (cmdline/submit_options.cpp declares which).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <unistd.h>

#include "client/client_connection.hpp"
#include "cmdline/job_options.hpp"
#include "slurm/slurm_client.hpp"
#include "client/submit.hpp"

extern char** environ;

using namespace aqs;

namespace {

bool fsub_knows(const std::string& spelled, const std::optional<std::string>& value) {
  return slurm::parser_accepts(cmdline::parse_fsub_command_line, spelled, value, "--wrap=true");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = slurm::command_name(argv[0], "sbatch");
  return slurm::run_slurm(name, [&] {
    const std::vector<std::string> raw(argv + 1, argv + argc);
    for (const auto& a : raw) {
      if (a == "--help" || a == "-h") {
        std::fputs(slurm::sbatch_usage().c_str(), stdout);
        return 0;
      }
      if (a == "--usage") {
        std::fputs(slurm::sbatch_usage().c_str(), stdout);
        return 0;
      }
      if (a == "-V" || a == "--version") {
        std::printf("%s\n", slurm::k_version_line);
        return 0;
      }
      if (a == "--" || (!a.starts_with("-"))) break;
    }
    slurm::translated_args t = slurm::translate_submit_args(raw, false, fsub_knows);
    for (const auto& w : t.warnings) std::fprintf(stderr, "%s: warning: %s\n", name.c_str(), w.c_str());
    // -W/--wait is sbatch's, not the job's: taken off the options.
    const bool wait = slurm::take_flag(t.args, {"-W", "--wait"});

    cmdline::fsub_command_line cmd;
    bool from_stdin = false;
    try {
      cmd = cmdline::parse_fsub_command_line(t.args);
    } catch (const cmdline::usage_error&) {
      // No script named and no --wrap: sbatch reads the script from its
      // standard input (if that is not a terminal).
      std::vector<std::string> with_stdin = t.args;
      with_stdin.emplace_back("/dev/stdin");
      if (::isatty(STDIN_FILENO) != 0) throw;
      try {
        cmd = cmdline::parse_fsub_command_line(with_stdin);
      } catch (const cmdline::usage_error&) {
        (void)cmdline::parse_fsub_command_line(t.args);  // the original complaint
        throw;
      }
      if (!cmd.script_path || *cmd.script_path != "/dev/stdin" || !cmd.script_args.empty()) {
        (void)cmdline::parse_fsub_command_line(t.args);
        throw;
      }
      from_stdin = true;
    }
    // SBATCH_JOB_NAME, SBATCH_PARTITION, ...: under the command line, over #SBATCH.
    std::vector<std::string> environment;
    for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
    cmdline::read_sbatch_environment(cmd, environment);
    std::optional<std::string> script;
    if (from_stdin) {
      script = std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      if (script->empty()) throw slurm::command_error("Batch script is empty!");
      // Slurm names such a job "sbatch" unless the script or -J names it.
      if (!cmd.options.job_name && !cmd.environment_options.job_name &&
          !cmdline::parse_directives(*script).options.job_name) {
        cmd.options.job_name = "sbatch";
      }
    } else if (cmd.script_path) {
      script = client::read_script(*cmd.script_path);
      if (!script) throw slurm::command_error("Unable to open file " + *cmd.script_path);
    }
    auto req = cmdline::build_fsub_request(cmd, script, client::this_process_context());
    for (const auto& w : req.warnings) std::fprintf(stderr, "%s: warning: %s\n", name.c_str(), w.c_str());
    if (req.request.test_only) {
      try {
        return client::test_submit(client::socket_path(cmd.options.socket), req.request, req.json, true);
      } catch (const client::client_error& e) {
        throw slurm::command_error(std::string("Batch job submission failed: ") + e.what());
      }
    }
    const client::submit_retry retry = client::retry_told_as(name);
    std::int64_t id = 0;
    try {
      id = client::submit(client::socket_path(cmd.options.socket), req.request, retry);
    } catch (const client::client_error& e) {
      throw slurm::command_error(std::string("Batch job submission failed: ") + e.what());
    }
    std::fflush(stderr);
    client::print_job_id(id, req.json, req.parsable, "Submitted batch job");
    if (!wait) return 0;
    std::fflush(stdout);
    // --wait: until the job ends, then its exit code as sbatch's, as Slurm's.
    try {
      client::connection c(client::socket_path(cmd.options.socket));
      const std::int64_t watch = c.next_id();
      c.send(protocol::watch_job{watch, id});
      while (true) {
        auto m = c.next(std::chrono::milliseconds(1000));
        if (!m) continue;
        if (auto* e = std::get_if<protocol::job_event>(&*m); e && e->id == watch) {
          if (!core::is_final(e->state)) continue;
          if (e->exit_code && *e->exit_code != 0) return static_cast<int>(*e->exit_code);
          if (e->state == core::job_state::completed) return 0;
          return e->signal ? 128 + static_cast<int>(*e->signal) : 1;
        } else if (auto* err = std::get_if<protocol::error>(&*m); err && err->id == watch) {
          throw client::client_error(err->message, err->code);
        }
      }
    } catch (const client::client_error& e) {
      throw slurm::command_error(std::string("Job ") + std::to_string(id) + ": cannot wait for its end: " + e.what());
    }
  });
}
