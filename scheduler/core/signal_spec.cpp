// signal_spec: Slurm's --signal value.
#include "core/signal_spec.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <csignal>

namespace aqs::core {

std::optional<int> signal_number(std::string_view name) {
  int n = 0;
  const auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
  if (!name.empty() && ec == std::errc{} && p == name.data() + name.size()) {
    if (n >= 1 && n <= 64) return n;
    return std::nullopt;
  }
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper.starts_with("SIG")) upper.erase(0, 3);
  static const std::pair<const char*, int> names[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ILL", SIGILL},     {"TRAP", SIGTRAP},
      {"ABRT", SIGABRT}, {"BUS", SIGBUS},   {"FPE", SIGFPE},   {"KILL", SIGKILL},   {"USR1", SIGUSR1},
      {"SEGV", SIGSEGV}, {"USR2", SIGUSR2}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},   {"TERM", SIGTERM},
      {"CHLD", SIGCHLD}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
      {"TTOU", SIGTTOU}, {"URG", SIGURG},   {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ},   {"VTALRM", SIGVTALRM},
      {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},   {"PWR", SIGPWR},     {"SYS", SIGSYS},
  };
  for (const auto& [n2, v] : names) {
    if (upper == n2) return v;
  }
  return std::nullopt;
}

std::variant<signal_spec, std::string> parse_signal_spec(std::string_view text) {
  const std::string shown = "invalid --signal '" + std::string(text.substr(0, 80)) +
                            "': expected [{R|B}:]SIGNAL[@SECONDS], such as B:USR1@90";
  signal_spec s;
  std::string_view rest = text;
  if (const auto colon = rest.find(':'); colon != std::string_view::npos) {
    const std::string_view flags = rest.substr(0, colon);
    if (flags.empty()) return shown;
    for (char c : flags) {
      if (c == 'B' || c == 'b') {
        s.batch_only = true;
      } else if (c != 'R' && c != 'r') {
        return shown;
      }
    }
    rest.remove_prefix(colon + 1);
  }
  if (const auto at = rest.find('@'); at != std::string_view::npos) {
    const std::string_view t = rest.substr(at + 1);
    std::int64_t v = 0;
    const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc{} || p != t.data() + t.size() || v < 0 || v > 65535) return shown;
    s.before_s = v;
    rest = rest.substr(0, at);
  }
  const auto sig = signal_number(rest);
  if (!sig) return shown;
  s.signal = *sig;
  return s;
}

std::optional<signal_spec> signal_spec_of(const std::vector<std::string>& recorded) {
  for (auto it = recorded.rbegin(); it != recorded.rend(); ++it) {
    if (!it->starts_with("signal=")) continue;
    auto r = parse_signal_spec(std::string_view(*it).substr(7));
    if (auto* s = std::get_if<signal_spec>(&r)) return *s;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace aqs::core
