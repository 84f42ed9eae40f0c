// log: one timestamped line per write(2).
#include "daemon/log.hpp"

#include <chrono>
#include <ctime>
#include <string>
#include <unistd.h>

namespace aqs::daemon {

void log_line(std::string_view text) noexcept {
  try {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    std::string line = fmt::format("{}.{:03}Z aqsd: {}\n", stamp, ms, text);
    std::size_t off = 0;
    while (off < line.size()) {
      const ssize_t n = ::write(STDERR_FILENO, line.data() + off, line.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
  } catch (...) {
  }
}

}  // namespace aqs::daemon
