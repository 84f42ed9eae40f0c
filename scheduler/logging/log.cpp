// log: the line format, the level and the one sink.
#include "logging/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>
#include <unistd.h>

namespace aqs::logging {

namespace {

std::string& program() {
  static std::string name = "aqs";
  return name;
}

level initial_level() {
  const char* env = std::getenv("AQS_LOG_LEVEL");
  if (env == nullptr) return level::info;
  return parse_level(env).value_or(level::info);
}

std::atomic<level>& threshold() {
  static std::atomic<level> l{initial_level()};
  return l;
}

}  // namespace

void set_program(std::string_view name) { program() = std::string(name); }
void set_level(level l) noexcept { threshold() = l; }
level current_level() noexcept { return threshold(); }

std::optional<level> parse_level(std::string_view text) noexcept {
  if (text == "debug") return level::debug;
  if (text == "info") return level::info;
  if (text == "warning" || text == "warn") return level::warning;
  if (text == "error") return level::error;
  return std::nullopt;
}

void write(level l, std::string_view text) noexcept {
  if (l < current_level()) return;
  try {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    const char* tag = l == level::warning ? "warning: " : l == level::error ? "error: " : l == level::debug ? "debug: " : "";
    const std::string line = fmt::format("{}.{:03}Z {}: {}{}\n", stamp, ms, program(), tag, text);
    std::size_t off = 0;
    while (off < line.size()) {
      const ssize_t n = ::write(STDERR_FILENO, line.data() + off, line.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
  } catch (...) {
  }
}

}  // namespace aqs::logging
