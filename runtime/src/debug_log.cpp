// debug_log: $AQS_DEBUG tracing of the runtime's steps.
#include "debug_log.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sys/time.h>
#include <unistd.h>

namespace aqs::runtime {

bool debug_enabled() noexcept {
  static const bool on = [] {
    const char* v = std::getenv("AQS_DEBUG");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

void debug_log(const char* fmt, ...) noexcept {
  char line[1024];
  timeval tv{};
  ::gettimeofday(&tv, nullptr);
  tm t{};
  ::gmtime_r(&tv.tv_sec, &t);
  char host[64] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  int n = std::snprintf(line, sizeof line, "aqs-debug %02d:%02d:%02d.%03ld %s %d: ", t.tm_hour, t.tm_min, t.tm_sec,
                        static_cast<long>(tv.tv_usec / 1000), host, static_cast<int>(::getpid()));
  if (n < 0) return;
  va_list ap;
  va_start(ap, fmt);
  const int m = std::vsnprintf(line + n, sizeof line - static_cast<std::size_t>(n) - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  n = std::min<int>(n + m, static_cast<int>(sizeof line) - 2);
  line[n++] = '\n';
  (void)!::write(STDERR_FILENO, line, static_cast<std::size_t>(n));
}

}  // namespace aqs::runtime
