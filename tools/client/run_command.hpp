// run_command: the one place where the commands turn failures into a
// one-line message on stderr and an exit status (2: usage, 1: anything else).
#pragma once

#include <cstdio>
#include <exception>

#include "client/usage_error.hpp"

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

}  // namespace aqs::client
