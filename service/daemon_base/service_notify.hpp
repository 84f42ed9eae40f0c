// service_notify: systemd's service notification protocol (Type=notify:
// READY=1 once the daemon serves, WATCHDOG=1 pings), spoken directly over
// $NOTIFY_SOCKET, so the daemons need no libsystemd.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace aqs::daemon {

// What systemd handed this process: the notification socket ("" when not
// run as a Type=notify service) and the watchdog interval (when WatchdogSec=
// is set and $WATCHDOG_PID, if present, names this process).
struct service_manager_link {
  std::string socket;
  std::optional<std::chrono::microseconds> watchdog;
};

// Reads $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID and removes them
// from the environment, so that children (the private PostgreSQL is built
// with systemd support and would report READY=1 itself; jobs) never speak
// for this daemon. A malformed $WATCHDOG_USEC means no watchdog.
service_manager_link take_service_manager_link();

// Sends one datagram ("READY=1", "WATCHDOG=1", "STOPPING=1\nSTATUS=...") to
// `socket`: a filesystem path, or an abstract name when it starts with '@'.
// Returns false (errno set) when the socket is empty, too long, or the send
// failed; the daemon carries on either way.
bool send_service_notification(const std::string& socket, std::string_view state);

// The daemon's side of the protocol. Construct it first thing in main()
// (it takes the link out of the environment before any child starts);
// call ready() once the daemon's sockets are listening, with its io_context
// about to run: READY=1 is sent from inside the running io_context, so a
// client connecting when systemd reports the service started is answered;
// from then on WATCHDOG=1 goes out every half watchdog interval from a timer
// on the same io_context, so an event loop that stops turning stops the
// pings and systemd restarts the service. Does nothing outside systemd.
class service_notifier {
public:
  service_notifier();
  ~service_notifier();
  service_notifier(const service_notifier&) = delete;
  service_notifier& operator=(const service_notifier&) = delete;

  bool active() const noexcept { return !link_.socket.empty(); }
  // READY=1 (with MAINPID and `status` as STATUS) and the watchdog timer,
  // both posted onto io. Call it once.
  void ready(boost::asio::io_context& io, std::string status);
  // STOPPING=1, at once; the watchdog timer is cancelled.
  void stopping();

private:
  void arm_watchdog(const std::shared_ptr<boost::asio::steady_timer>& timer);

  service_manager_link link_;
  // Kept alive by its own pending wait only, so that it never outlives the
  // io_context it belongs to (the notifier does).
  std::weak_ptr<boost::asio::steady_timer> timer_;
};

}  // namespace aqs::daemon
