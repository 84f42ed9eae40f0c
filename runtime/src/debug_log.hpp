// debug_log: a trace of the runtime's reconfiguration steps on stderr, for
// finding out where a job stopped. Off unless $AQS_DEBUG is set (and not
// "0"); pass it to every rank (mpirun -x AQS_DEBUG=1). Each line says when
// (wall clock, ms), where (host, pid) and what:
//   aqs-debug 12:01:02.345 host3 4711: parked at host1 40123 10.0.0.11
#pragma once

#include <cstdarg>

namespace aqs::runtime {

bool debug_enabled() noexcept;
// printf-style; one write() per line, so lines of concurrent ranks sharing
// an output file do not interleave.
void debug_log(const char* fmt, ...) noexcept __attribute__((format(printf, 1, 2)));

}  // namespace aqs::runtime

// Evaluates its arguments only when tracing is on.
#define AQS_DEBUG_LOG(...)                                                  \
  do {                                                                      \
    if (::aqs::runtime::debug_enabled()) ::aqs::runtime::debug_log(__VA_ARGS__); \
  } while (0)
