// client_connection: blocking socket I/O with poll() timeouts.
#include "client/client_connection.hpp"

#include "cmdline/commands.hpp"
#include "client/json_skim.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <poll.h>
#include "protocol/auth.hpp"
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace aqs::client {

connection::connection(const std::string& socket_path, std::chrono::milliseconds timeout)
    : path_(socket_path), timeout_(timeout) {
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof addr.sun_path) throw client_error("socket path too long: " + socket_path);
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw client_error(std::string("cannot create a socket: ") + std::strerror(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw client_error("cannot reach aqsd at " + socket_path + ": " + std::strerror(err) + " (is aqsd running?)");
  }
  protocol::hello h;
  h.id = next_id();
  h.role = protocol::peer_role::client;
  call(h);
}

connection::~connection() {
  if (fd_ >= 0) ::close(fd_);
}

void connection::send(const protocol::message& m) {
  const std::string frame = protocol::encode(m);
  std::size_t off = 0;
  while (off < frame.size()) {
    const ssize_t n = ::send(fd_, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw client_error("lost the connection to aqsd at " + path_ + ": " + std::strerror(errno));
    off += static_cast<std::size_t>(n);
  }
}

std::optional<std::string> connection::read_frame(std::optional<std::chrono::milliseconds> timeout) {
  const auto deadline = timeout ? std::chrono::steady_clock::now() + *timeout : std::chrono::steady_clock::time_point::max();
  while (frames_.empty()) {
    int wait_ms = -1;
    if (timeout) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      wait_ms = static_cast<int>(std::min<long long>(left.count(), 1'000'000));
    }
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, wait_ms);
    if (r < 0 && errno == EINTR) return std::nullopt;  // a signal: the caller looks at its flags
    if (r < 0) throw client_error(std::string("poll failed: ") + std::strerror(errno));
    if (r == 0) continue;
    char buf[65536];
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw client_error("aqsd closed the connection");
    try {
      decoder_.feed(std::string_view(buf, static_cast<std::size_t>(n)), frames_);
    } catch (const protocol::protocol_error& e) {
      throw client_error(std::string("unreadable data from aqsd: ") + e.what());
    }
  }
  std::string body = std::move(frames_.front());
  frames_.erase(frames_.begin());
  return body;
}

std::optional<protocol::message> connection::read_one(std::optional<std::chrono::milliseconds> timeout) {
  auto body = read_frame(timeout);
  if (!body) return std::nullopt;
  return parse(*body);
}

protocol::message connection::parse(const std::string& body) {
  try {
    return protocol::parse_message(body);
  } catch (const protocol::protocol_error& e) {
    throw client_error(std::string("unreadable message from aqsd: ") + e.what());
  }
}

std::optional<protocol::message> connection::next(std::optional<std::chrono::milliseconds> timeout) {
  if (!kept_.empty()) {
    protocol::message m = std::move(kept_.front());
    kept_.pop_front();
    return m;
  }
  return read_one(timeout);
}

template <class T>
T connection::read_before(std::chrono::steady_clock::time_point deadline,
                          std::optional<T> (connection::*read)(std::optional<std::chrono::milliseconds>)) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    auto got = (this->*read)(std::max(left, std::chrono::milliseconds(0)));
    if (got) return std::move(*got);
    if (std::chrono::steady_clock::now() < deadline) continue;  // interrupted by a signal
    throw client_timeout("aqsd did not answer within " + std::to_string(timeout_.count() / 1000) + " s");
  }
}

nlohmann::json connection::call(protocol::message request) { return call_ok(std::move(request)).result; }

protocol::ok connection::call_ok(protocol::message request) {
  const auto id = protocol::id_of(request);
  send(request);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (true) {
    protocol::message m = read_before(deadline, &connection::read_one);
    const bool is_reply = std::holds_alternative<protocol::ok>(m) || std::holds_alternative<protocol::error>(m);
    if (is_reply && protocol::id_of(m) == id) {
      if (auto* e = std::get_if<protocol::error>(&m)) throw client_error(e->message, e->code);
      return std::move(std::get<protocol::ok>(m));
    }
    if (auto* e = std::get_if<protocol::error>(&m); e && !e->id) throw client_error("aqsd: " + e->message, e->code);
    kept_.push_back(std::move(m));
  }
}

std::string connection::call_text(protocol::message request) {
  const auto id = protocol::id_of(request);
  send(request);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  const std::string want_id = std::to_string(id.value_or(0));
  while (true) {
    std::string body = read_before(deadline, &connection::read_frame);
    // Only the envelope is looked at; the reply's values stay text.
    std::vector<std::pair<std::string, text_span>> members;
    try {
      members = object_members(body);
    } catch (const std::invalid_argument& e) {
      throw client_error(std::string("unreadable message from aqsd: ") + e.what());
    }
    std::string_view type, rid;
    for (const auto& [k, v] : members) {
      if (k == "type") type = v.in(body);
      if (k == "id") rid = v.in(body);
    }
    if (type == "\"ok\"" && rid == want_id) return body;
    // An error, or something else: read as call() would.
    protocol::message m = parse(body);
    if (auto* e = std::get_if<protocol::error>(&m)) {
      if (e->id == id) throw client_error(e->message, e->code);
      if (!e->id) throw client_error("aqsd: " + e->message, e->code);
    }
    kept_.push_back(std::move(m));
  }
}

std::string random_token() { return protocol::random_hex(16); }

std::string socket_path(const std::optional<std::string>& from_option) {
  return cmdline::resolve_socket_path(from_option, std::getenv("AQS_SOCKET"), k_default_socket);
}

}  // namespace aqs::client
