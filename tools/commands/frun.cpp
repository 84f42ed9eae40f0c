// frun: runs a command as an interactive job: waits for processors, streams
// its output, forwards Ctrl-C as a cancel, and exits with the job's code.
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>
#include <cstdio>
#include <unistd.h>

#include "client/client_connection.hpp"
#include "cmdline/commands.hpp"
#include "cmdline/job_options.hpp"
#include "cmdline/job_step.hpp"
#include "cmdline/run_command.hpp"
#include "client/submit.hpp"

using namespace aqs;
using namespace std::chrono_literals;

namespace {

volatile std::sig_atomic_t g_interrupts = 0;

void on_sigint(int) { g_interrupts = g_interrupts + 1; }

void write_all(int fd, const std::string& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n <= 0) return;  // our own output is gone (closed pipe): keep going
    off += static_cast<std::size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // aqs-srun and aqs-salloc run frun as "srun" and "salloc": its messages
  // then say whose they are.
  const std::string_view called = argc > 0 && argv[0] != nullptr ? std::string_view(argv[0]) : "frun";
  const std::string name = called == "srun" || called == "salloc" ? std::string(called) : "frun";
  const bool salloc = name == "salloc";
  return client::run_command(name.c_str(), argc, argv, cmdline::parse_frun_command_line, cmdline::frun_usage,
                             [&](const cmdline::frun_command_line& cmd) {
    const auto ctx = client::this_process_context();
    if (cmdline::inside_a_job(ctx.environment)) {
      // srun inside an sbatch job: a step in this job's allocation.
      for (const auto& w : cmd.warnings) std::fprintf(stderr, "%s: warning: %s\n", name.c_str(), w.c_str());
      const auto step = cmdline::step_argv(cmd, ctx.environment, ctx.cwd);
      std::vector<char*> args;
      for (const auto& a : step) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::fprintf(stderr, "%s: cannot run %s: %s\n", name.c_str(), args[0], std::strerror(errno));
      return 127;
    }
    auto submit = cmdline::build_frun_request(cmd, ctx);
    for (const auto& w : cmd.warnings) std::fprintf(stderr, "%s: warning: %s\n", name.c_str(), w.c_str());
    client::connection c(client::socket_path(cmd.options.socket));

    // Ctrl-C interrupts the wait (no SA_RESTART) so that it is acted on at once.
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, nullptr);
    ::signal(SIGPIPE, SIG_IGN);

    submit.id = c.next_id();
    const std::int64_t job = c.ask(submit).job_id;
    const std::int64_t watch = c.next_id();
    c.send(protocol::watch_job{watch, job});
    const auto started = std::chrono::steady_clock::now();
    bool said_waiting = false, cancel_sent = false, running = false;
    while (true) {
      if (g_interrupts >= 2) {
        std::fprintf(stderr, "%s: job %lld left to aqsd (it was asked to cancel it)\n", name.c_str(), static_cast<long long>(job));
        return 130;
      }
      if (g_interrupts == 1 && !cancel_sent) {
        cancel_sent = true;
        std::fprintf(stderr, "%s: cancelling job %lld (Ctrl-C again to stop waiting)\n", name.c_str(), static_cast<long long>(job));
        protocol::cancel k;
        k.id = c.next_id();
        k.job_ids = {job};
        c.send(k);
      }
      if (!said_waiting && !running && std::chrono::steady_clock::now() - started > 1s) {
        said_waiting = true;
        std::fprintf(stderr, "%s: job %lld queued, waiting for processors\n", name.c_str(), static_cast<long long>(job));
      }
      auto m = c.next(200ms);
      if (!m) continue;
      if (auto* o = std::get_if<protocol::output>(&*m); o && o->id == watch) {
        write_all(o->stream == "stderr" ? STDERR_FILENO : STDOUT_FILENO, o->data);
      } else if (auto* e = std::get_if<protocol::job_event>(&*m); e && e->id == watch) {
        if (e->state == core::job_state::running && !running && salloc) {
          std::fprintf(stderr, "salloc: Granted job allocation %lld\n", static_cast<long long>(job));
        }
        if (e->state == core::job_state::running) running = true;
        if (!core::is_final(e->state)) continue;
        if (salloc) std::fprintf(stderr, "salloc: Relinquishing job allocation %lld\n", static_cast<long long>(job));
        if (e->exit_code) return static_cast<int>(*e->exit_code);
        if (e->signal) return 128 + static_cast<int>(*e->signal);
        std::fprintf(stderr, "%s: job %lld %s\n", name.c_str(), static_cast<long long>(job),
                     std::string(core::to_string(e->state)).c_str());
        return 1;
      } else if (auto* err = std::get_if<protocol::error>(&*m); err && err->id == watch) {
        throw client::client_error(err->message, err->code);
      }
    }
  });
}
