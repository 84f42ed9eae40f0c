// job_link: connecting to aqsd as a job, over a Unix socket or TCP.
#include "job_link.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "protocol/auth.hpp"
#include "protocol/messages.hpp"

namespace aqs::runtime {

namespace {

int connect_unix(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) throw std::runtime_error("socket path too long: " + path);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("cannot create a socket: ") + std::strerror(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot reach aqsd at " + path + ": " + std::strerror(err));
  }
  return fd;
}

int connect_tcp(const std::string& server) {
  const auto colon = server.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == server.size()) {
    throw std::runtime_error("bad aqsd address '" + server + "' (want HOST:PORT)");
  }
  std::string host = server.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = server.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    throw std::runtime_error("cannot resolve aqsd address " + server + ": " + ::gai_strerror(rc));
  }
  int err = 0;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      return fd;
    }
    err = errno;
    ::close(fd);
  }
  ::freeaddrinfo(res);
  throw std::runtime_error("cannot reach aqsd at " + server + ": " + std::strerror(err));
}

// Reads until one whole frame is in (handshake only: the reader thread does
// the rest). Throws on a closed connection.
std::string read_frame(int fd, protocol::frame_decoder& dec, std::vector<std::string>& pending) {
  while (pending.empty()) {
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      throw std::runtime_error("aqsd did not answer the handshake within 30 s");
    }
    if (n <= 0) throw std::runtime_error("aqsd closed the connection during the handshake");
    dec.feed(std::string_view(buf, static_cast<std::size_t>(n)), pending);
  }
  std::string f = std::move(pending.front());
  pending.erase(pending.begin());
  return f;
}

}  // namespace

std::optional<control_address> control_address_from_env() {
  const char* job = std::getenv("AQS_JOB_ID");
  if (job == nullptr || *job == '\0') return std::nullopt;
  control_address a;
  char* end = nullptr;
  a.job_id = std::strtoll(job, &end, 10);
  if (end == job || *end != '\0' || a.job_id <= 0) return std::nullopt;
  if (const char* s = std::getenv("AQS_SERVER")) a.server = s;
  if (const char* s = std::getenv("AQS_SOCKET")) a.socket_path = s;
  if (const char* s = std::getenv("AQS_JOB_TOKEN")) a.token = s;
  if (a.server.empty() && a.socket_path.empty()) return std::nullopt;
  return a;
}

void send_all(int fd, const std::string& frame) {
  std::size_t off = 0;
  while (off < frame.size()) {
    const ssize_t n = ::send(fd, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(std::string("lost the connection to aqsd: ") + std::strerror(errno));
    off += static_cast<std::size_t>(n);
  }
}

// SO_RCVTIMEO on `fd` (0: none).
static void receive_timeout(int fd, int seconds) {
  timeval tv{};
  tv.tv_sec = seconds;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

job_link connect_job(const control_address& where, bool launcher, std::int64_t hello_id, std::int64_t map_epoch) {
  // The local socket when there is one: no secret needed, the uid speaks.
  const bool tcp = where.socket_path.empty();
  job_link link;
  link.fd = tcp ? connect_tcp(where.server) : connect_unix(where.socket_path);
  const std::string shown = tcp ? where.server : where.socket_path;
  // A hung aqsd must not hang the job's handshake (nor a reconnection, which
  // the shim's destructor would then wait for) for ever.
  receive_timeout(link.fd, 30);
  try {
    std::vector<std::string> pending;
    protocol::hello h;
    h.id = hello_id;
    h.role = protocol::peer_role::job;
    h.job_id = where.job_id;
    h.launcher = launcher;
    if (map_epoch > 0) h.map_epoch = map_epoch;
    if (tcp) {
      auto m = protocol::parse_message(read_frame(link.fd, link.decoder, pending));
      const auto* ch = std::get_if<protocol::challenge>(&m);
      if (ch == nullptr) throw std::runtime_error("aqsd at " + shown + " sent no challenge");
      if (where.token.empty()) throw std::runtime_error("no AQS_JOB_TOKEN to answer aqsd's challenge");
      h.auth = protocol::compute_auth(where.token, ch->nonce);
    }
    send_all(link.fd, protocol::encode(h));
    auto reply = protocol::parse_message(read_frame(link.fd, link.decoder, pending));
    if (const auto* e = std::get_if<protocol::error>(&reply)) {
      throw std::runtime_error("aqsd at " + shown + " refused job " + std::to_string(where.job_id) + ": " +
                               e->message);
    }
    link.early = std::move(pending);
    receive_timeout(link.fd, 0);
  } catch (...) {
    ::close(link.fd);
    throw;
  }
  return link;
}

}  // namespace aqs::runtime
