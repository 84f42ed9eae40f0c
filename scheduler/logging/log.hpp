// log: AQS's one logger: leveled, timestamped lines to one sink (stderr, which
// aqsd points at its log file), each line one write(2) so that lines from
// several threads never interleave. Used by aqsd and aqs-node.
//
// Why fmt and not spdlog: every program here already formats with fmt, the
// sink is a single file descriptor, and a line must reach it in one write
// even when the process is about to die (no background thread, no buffer).
#pragma once

#include <optional>
#include <string_view>

#include <fmt/format.h>

namespace aqs::logging {

enum class level { debug, info, warning, error };

// The name lines carry ("aqsd", "aqs-node[node1]"). Call before other threads log.
void set_program(std::string_view name);
// Lines below `l` are dropped. The default is info, or $AQS_LOG_LEVEL when it
// names a level.
void set_level(level l) noexcept;
level current_level() noexcept;
// "debug", "info", "warning" (or "warn"), "error"; nullopt for anything else.
std::optional<level> parse_level(std::string_view text) noexcept;

// "2026-11-25T14:26:00.123Z aqsd: text" (warnings and errors say so after the
// colon). Never throws.
void write(level l, std::string_view text) noexcept;

template <class... Args>
void at(level l, fmt::format_string<Args...> f, Args&&... args) noexcept {
  if (l < current_level()) return;
  try {
    write(l, fmt::format(f, std::forward<Args>(args)...));
  } catch (...) {
  }
}
template <class... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) noexcept {
  at(level::debug, f, std::forward<Args>(args)...);
}
template <class... Args>
void info(fmt::format_string<Args...> f, Args&&... args) noexcept {
  at(level::info, f, std::forward<Args>(args)...);
}
template <class... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) noexcept {
  at(level::warning, f, std::forward<Args>(args)...);
}
template <class... Args>
void error(fmt::format_string<Args...> f, Args&&... args) noexcept {
  at(level::error, f, std::forward<Args>(args)...);
}

}  // namespace aqs::logging
