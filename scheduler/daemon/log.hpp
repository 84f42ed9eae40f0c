// log: aqsd's log lines (timestamped, one per event, to stderr or the log file).
#pragma once

#include <string_view>

#include <fmt/format.h>

namespace aqs::daemon {

// Writes "2026-11-22T14:26:00.123Z aqsd: <text>\n" to stderr in one write, so
// lines from several threads never interleave.
void log_line(std::string_view text) noexcept;

template <class... Args>
void log(fmt::format_string<Args...> f, Args&&... args) noexcept {
  try {
    log_line(fmt::format(f, std::forward<Args>(args)...));
  } catch (...) {
  }
}

}  // namespace aqs::daemon
