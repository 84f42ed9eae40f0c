// cpu_priority: nice and autogroup nice (cpu_priority.hpp).
#include "daemon_base/cpu_priority.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <sys/resource.h>
#include <unistd.h>

namespace aqs::daemon {

std::string apply_cpu_nice(int nice) {
  if (nice < -20 || nice > 19) throw std::runtime_error("nice " + std::to_string(nice) + " is outside -20..19");
  errno = 0;
  if (::setpriority(PRIO_PROCESS, 0, nice) != 0) {
    throw std::runtime_error("cannot set nice " + std::to_string(nice) + ": " + std::strerror(errno) +
                             (nice < 0 ? " (a negative nice needs CAP_SYS_NICE or RLIMIT_NICE)" : ""));
  }
  std::string done = "nice " + std::to_string(nice);
  if (::getsid(0) != ::getpid()) return done + " (not a session leader: its session's autogroup is left alone)";
  const int fd = ::open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return done + " (no scheduling autogroups in this kernel)";
  const std::string text = std::to_string(nice) + "\n";
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    throw std::runtime_error("cannot set the nice of its session's scheduling autogroup to " + std::to_string(nice) +
                             ": " + std::strerror(err));
  }
  return done + ", and its session's scheduling autogroup's";
}

}  // namespace aqs::daemon
