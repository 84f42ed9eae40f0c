// service_notify: what aqsd takes from systemd's environment and the
// datagrams it sends, on sockets of the test's own.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>

#include "daemon_base/service_notify.hpp"
#include "temp_dir.hpp"

namespace {

using aqs::daemon::send_service_notification;
using aqs::daemon::take_service_manager_link;

// A bound datagram socket at `name` ('@': abstract); receive() returns the
// next datagram or "" after 2 s.
struct listener {
  int fd = -1;
  explicit listener(const std::string& name) {
    fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    name.copy(a.sun_path, name.size());
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    if (name[0] == '@') {
      a.sun_path[0] = '\0';
    } else {
      len += 1;
    }
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0);
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~listener() { ::close(fd); }
  std::string receive() const {
    char buf[512];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }
};

void clear_env() {
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");
}

}  // namespace

TEST_CASE("the link is taken out of the environment, so children never speak for the daemon") {
  clear_env();
  ::setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
  ::setenv("WATCHDOG_USEC", "30000000", 1);
  const auto link = take_service_manager_link();
  CHECK(link.socket == "/run/systemd/notify");
  REQUIRE(link.watchdog.has_value());
  CHECK(link.watchdog->count() == 30000000);
  CHECK(std::getenv("NOTIFY_SOCKET") == nullptr);
  CHECK(std::getenv("WATCHDOG_USEC") == nullptr);
}

TEST_CASE("a watchdog meant for another pid, or malformed, is no watchdog") {
  clear_env();
  ::setenv("NOTIFY_SOCKET", "@x", 1);
  ::setenv("WATCHDOG_USEC", "1000000", 1);
  ::setenv("WATCHDOG_PID", std::to_string(::getpid() + 1).c_str(), 1);
  CHECK_FALSE(take_service_manager_link().watchdog.has_value());
  ::setenv("WATCHDOG_USEC", "1000000", 1);
  ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  CHECK(take_service_manager_link().watchdog.has_value());
  ::setenv("WATCHDOG_USEC", "12abc", 1);
  CHECK_FALSE(take_service_manager_link().watchdog.has_value());
  ::setenv("WATCHDOG_USEC", "0", 1);
  CHECK_FALSE(take_service_manager_link().watchdog.has_value());
  CHECK(take_service_manager_link().socket.empty());
}

TEST_CASE("notifications reach a socket path and an abstract socket; a bad address is refused") {
  aqs::test::temp_dir dir("aqs-notify");
  const std::string path = (dir.path() / "notify.sock").string();
  listener on_path(path);
  CHECK(send_service_notification(path, "READY=1\nSTATUS=serving"));
  CHECK(on_path.receive() == "READY=1\nSTATUS=serving");

  const std::string abstract = "@aqs-notify-test-" + std::to_string(::getpid());
  listener on_abstract(abstract);
  CHECK(send_service_notification(abstract, "WATCHDOG=1"));
  CHECK(on_abstract.receive() == "WATCHDOG=1");

  CHECK_FALSE(send_service_notification("", "READY=1"));
  CHECK_FALSE(send_service_notification("relative/path", "READY=1"));
  CHECK_FALSE(send_service_notification(std::string(200, '/'), "READY=1"));
  CHECK_FALSE(send_service_notification((dir.path() / "nobody-listens").string(), "READY=1"));
}

TEST_CASE("the notifier sends READY=1 from inside the running io_context, then watchdog pings") {
  aqs::test::temp_dir dir("aqs-notify");
  const std::string path = (dir.path() / "notify.sock").string();
  listener l(path);
  clear_env();
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  ::setenv("WATCHDOG_USEC", "100000", 1);
  aqs::daemon::service_notifier notifier;
  REQUIRE(notifier.active());
  boost::asio::io_context io;
  notifier.ready(io, "serving");
  // Not before the io_context turns: a client would not be answered yet.
  timeval quick{0, 200000};
  ::setsockopt(l.fd, SOL_SOCKET, SO_RCVTIMEO, &quick, sizeof quick);
  CHECK(l.receive().empty());
  io.run_for(std::chrono::milliseconds(20));
  std::string first = l.receive();
  for (int i = 0; first.empty() && i < 100; ++i) {  // a loaded machine: up to 10 s, no timing asserted
    io.run_for(std::chrono::milliseconds(100));
    first = l.receive();
  }
  CHECK(first == "READY=1\nMAINPID=" + std::to_string(::getpid()) + "\nSTATUS=serving");
  // Pings every half interval (50 ms) from then on, for as long as the
  // io_context turns.
  int pings = 0;
  for (int i = 0; pings < 3 && i < 100; ++i) {
    io.run_for(std::chrono::milliseconds(100));
    for (std::string m = l.receive(); !m.empty(); m = l.receive()) {
      CHECK(m == "WATCHDOG=1");
      ++pings;
    }
  }
  CHECK(pings >= 3);
  notifier.stopping();
  CHECK(l.receive() == "STOPPING=1");
}
