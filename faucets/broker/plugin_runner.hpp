// plugin_runner: runs one broker plugin program once, confined: a clean
// environment, the request on stdin and nothing else, a time limit past
// which its whole process group is killed, bounded output.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace aqs::faucets {

struct run_limits {
  std::chrono::milliseconds time_limit{5000};  // then SIGKILL to its process group
  std::size_t max_output = 1 << 20;            // bytes of stdout; more is a failure
  std::size_t max_stderr = 2048;               // bytes of stderr kept for the log (the rest is read and dropped)
};

struct run_outcome {
  bool ok = false;      // exited 0 within the limits
  std::string output;   // stdout (when ok)
  std::string failure;  // one line when !ok: "timed out after 5 s (killed)", "exited with status 1: <stderr>", ...
  std::string stderr_text;  // its first max_stderr bytes of stderr
};

// Runs argv[0] (an absolute path, never looked up in PATH) with argv,
// writes `input` to its stdin then closes it, reads its stdout. The child:
// its own process group, working directory /, environment only PATH,
// LANG=C.UTF-8 and AQS_BROKER_PLUGIN=`plugin_name`, no descriptors beyond 0-2,
// default signal dispositions, no core dumps. Whatever happens (exit,
// timeout, too much output), the process group is SIGKILLed before this
// returns, so nothing it started lives on. Never throws for the plugin's
// faults; throws std::runtime_error only when it cannot fork or make pipes.
// Blocks the calling thread for at most about time_limit.
run_outcome run_plugin_program(const std::vector<std::string>& argv, const std::string& input,
                               const std::string& plugin_name, const run_limits& limits);

}  // namespace aqs::faucets
