// run_command: the one place where the commands turn failures into a
// one-line message on stderr and an exit status (2: usage, 1: anything else),
// and where they read their command line and answer --help.
#pragma once

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cmdline/usage_error.hpp"

namespace aqs::client {

template <class Body>
int run_command(const char* name, Body&& body) noexcept {
  try {
    return body();
  } catch (const cmdline::usage_error& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "%s: unexpected failure\n", name);
    return 1;
  }
}

// A command's main(): `parse` reads the arguments (argv without the program
// name) into its command line; with -h/--help, usage() goes to stdout and the
// exit status is 0; otherwise body(command line) does the work and returns
// the exit status. Failures of any of them as above.
template <class Parse, class Body>
int run_command(const char* name, int argc, char** argv, Parse&& parse, std::string (*usage)(), Body&& body) noexcept {
  return run_command(name, [&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const auto cmd = parse(args);
    bool help = false;
    if constexpr (requires { cmd.common.help; }) {
      help = cmd.common.help;  // fkill, fjobs, fnodes
    } else {
      help = cmd.options.help;  // fsub, frun
    }
    if (help) {
      std::fputs(usage().c_str(), stdout);
      return 0;
    }
    return body(cmd);
  });
}

}  // namespace aqs::client
