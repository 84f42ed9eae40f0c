// client_connection: the commands' blocking connection to aqsd over its Unix
// socket: hello, requests matched to replies by id, and pushed messages.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/errors.hpp"
#include "protocol/framing.hpp"
#include "protocol/messages.hpp"
#include "protocol/replies.hpp"

namespace aqs::client {

// Where the commands look for aqsd when neither --socket nor $AQS_SOCKET says.
inline constexpr const char* k_default_socket = "/var/lib/aqs/aqsd.sock";

// Anything that went wrong talking to aqsd. what() is one line for the user;
// `code` is set when aqsd answered with an error (permission_denied, ...).
class client_error : public std::runtime_error {
public:
  explicit client_error(const std::string& message, std::optional<protocol::error_code> code = std::nullopt)
      : std::runtime_error(message), code_(code) {}
  std::optional<protocol::error_code> code() const noexcept { return code_; }

private:
  std::optional<protocol::error_code> code_;
};

// aqsd kept the connection but did not answer in time: it may still be
// working on the request (a submission is then not sent again).
class client_timeout : public client_error {
public:
  using client_error::client_error;
};

// One connection, used from one thread.
class connection {
public:
  // Connects and says hello as a client. Throws client_error naming the path
  // ("cannot reach aqsd at PATH: No such file or directory (is aqsd
  // running?)"), or aqsd's refusal.
  explicit connection(const std::string& socket_path,
                      std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // A fresh request id.
  std::int64_t next_id() noexcept { return next_id_++; }
  // Sends a request and waits for its reply; pushes that arrive meanwhile are
  // kept for next(). Returns the ok's result object; throws client_error with
  // aqsd's code and message on an error reply, or on a lost connection or
  // timeout.
  nlohmann::json call(protocol::message request);
  // As call(), but returns the ok reply itself.
  protocol::ok call_ok(protocol::message request);
  // As call(), the result read as the request's reply type (protocol::reply_t):
  // c.ask(protocol::list_nodes{c.next_id()}).nodes. A reply that does not
  // validate throws client_error ("unreadable reply from aqsd: field ...").
  template <class Request>
  protocol::reply_t<Request> ask(const Request& request) {
    const protocol::ok reply = call_ok(request);
    try {
      return protocol::read_reply<protocol::reply_t<Request>>(reply);
    } catch (const protocol::protocol_error& e) {
      throw client_error(std::string("unreadable reply from aqsd: ") + e.what());
    }
  }
  // As call(), but returns the whole ok reply as aqsd sent it (the JSON
  // text of the message, "type" and "id" included), unparsed: for replies
  // too large to parse whole (list_jobs pages; see json_skim.hpp).
  std::string call_text(protocol::message request);
  void send(const protocol::message& m);
  // The next message (kept pushes first). nullopt when `timeout` passes
  // first (none: wait as long as it takes) or a signal interrupted the wait.
  // Throws client_error when the connection is lost or aqsd sends something
  // unreadable.
  std::optional<protocol::message> next(std::optional<std::chrono::milliseconds> timeout);
  int fd() const noexcept { return fd_; }

private:
  std::optional<protocol::message> read_one(std::optional<std::chrono::milliseconds> timeout);
  std::optional<std::string> read_frame(std::optional<std::chrono::milliseconds> timeout);
  // Reads with `read` (read_one or read_frame) until it gives something;
  // throws client_error when `deadline` passes first (a signal's
  // interruption only reads again).
  template <class T>
  T read_before(std::chrono::steady_clock::time_point deadline,
                std::optional<T> (connection::*read)(std::optional<std::chrono::milliseconds>));
  static protocol::message parse(const std::string& body);

  std::string path_;
  int fd_ = -1;
  std::chrono::milliseconds timeout_;
  std::int64_t next_id_ = 1;
  // aqsd is trusted with its frame lengths: a page of 10,000 jobs (3 MB)
  // lands in one buffer.
  protocol::frame_decoder decoder_{protocol::k_max_frame, protocol::k_max_frame};
  std::vector<std::string> frames_;
  std::deque<protocol::message> kept_;
};

// A random idempotency key for a submission: protocol::random_hex(16).
std::string random_token();

// aqsd's socket for a command: its --socket PATH, else $AQS_SOCKET, else
// k_default_socket (cmdline::resolve_socket_path with this process's
// environment).
std::string socket_path(const std::optional<std::string>& from_option);

// How fkill and fctl end: sends `request` (a cancel or control) on c,
// prints the reply as JSON with --json, and each job it failed on as
// "NAME: message" on stderr; the exit status, 1 if any failed.
template <class Request>
int ask_for_jobs(connection& c, Request request, const char* name, bool json) {
  request.id = c.next_id();
  const auto reply = c.ask(request);
  if (json) std::printf("%s\n", protocol::to_json(reply).dump().c_str());
  int rc = 0;
  for (const auto& f : reply.failed) {
    std::fprintf(stderr, "%s: %s\n", name, f.message.c_str());
    rc = 1;
  }
  return rc;
}

}  // namespace aqs::client
