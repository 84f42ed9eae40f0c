// service_notify: systemd's notification protocol over a Unix datagram socket.
#include "daemon_base/service_notify.hpp"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/post.hpp>

#include "logging/log.hpp"

namespace aqs::daemon {

namespace {

std::optional<long long> parse_number(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  long long v = 0;
  const char* end = text + std::strlen(text);
  const auto [p, ec] = std::from_chars(text, end, v);
  if (ec != std::errc{} || p != end) return std::nullopt;
  return v;
}

}  // namespace

service_manager_link take_service_manager_link() {
  service_manager_link link;
  if (const char* s = std::getenv("NOTIFY_SOCKET")) link.socket = s;
  const auto usec = parse_number(std::getenv("WATCHDOG_USEC"));
  const char* pid_text = std::getenv("WATCHDOG_PID");
  const auto pid = parse_number(pid_text);
  // WATCHDOG_PID, when set, names the process systemd watches: a child that
  // inherited the variables is not it.
  const bool ours = pid_text == nullptr || (pid && *pid == static_cast<long long>(::getpid()));
  if (usec && *usec > 0 && ours) link.watchdog = std::chrono::microseconds(*usec);
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");
  return link;
}

bool send_service_notification(const std::string& socket, std::string_view state) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket.empty() || socket.size() >= sizeof(addr.sun_path) || (socket[0] != '/' && socket[0] != '@')) {
    errno = EINVAL;
    return false;
  }
  std::memcpy(addr.sun_path, socket.data(), socket.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket.size());
  if (socket[0] == '@') {
    addr.sun_path[0] = '\0';  // abstract namespace: no terminating NUL counted
  } else {
    len += 1;
  }
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&addr), len);
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return n == static_cast<ssize_t>(state.size());
}

service_notifier::service_notifier() : link_(take_service_manager_link()) {}

service_notifier::~service_notifier() = default;

void service_notifier::ready(boost::asio::io_context& io, std::string status) {
  if (!active()) return;
  auto timer = std::make_shared<boost::asio::steady_timer>(io);
  timer_ = timer;
  boost::asio::post(io, [this, timer, status = std::move(status)] {
    const std::string msg = "READY=1\nMAINPID=" + std::to_string(::getpid()) + "\nSTATUS=" + status;
    if (!send_service_notification(link_.socket, msg)) {
      logging::warn("cannot notify the service manager at {}: {}", link_.socket, std::strerror(errno));
    }
    arm_watchdog(timer);
  });
}

void service_notifier::arm_watchdog(const std::shared_ptr<boost::asio::steady_timer>& timer) {
  if (!link_.watchdog) return;
  (void)send_service_notification(link_.socket, "WATCHDOG=1");
  // Half the interval, as sd_watchdog_enabled(3) advises: one late ping is
  // not a restart.
  timer->expires_after(*link_.watchdog / 2);
  timer->async_wait([this, timer](boost::system::error_code ec) {
    if (!ec) arm_watchdog(timer);
  });
}

void service_notifier::stopping() {
  if (!active()) return;
  // Called once the io_context stopped turning: nothing else touches the timer.
  if (auto timer = timer_.lock()) timer->cancel();
  (void)send_service_notification(link_.socket, "STOPPING=1");
}

}  // namespace aqs::daemon
