// raw_peer: connections as other users (fork, drop privileges, connect,
// pass the descriptor back with SCM_RIGHTS) and frame-by-frame I/O.
#include "raw_peer.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace aqs::test {

namespace {

// A message of one byte with room for one descriptor (SCM_RIGHTS), as
// sendmsg and recvmsg take it.
struct fd_message {
  char byte = 'x';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  fd_message() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl;
    msg.msg_controllen = sizeof ctrl;
  }
  fd_message(const fd_message&) = delete;
  fd_message& operator=(const fd_message&) = delete;
};

void send_fd(int channel, int fd) {
  fd_message m;
  msghdr& msg = m.msg;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  (void)::sendmsg(channel, &msg, 0);
}

int receive_fd(int channel) {
  fd_message m;
  msghdr& msg = m.msg;
  if (::recvmsg(channel, &msg, MSG_CMSG_CLOEXEC) <= 0) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c == nullptr || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

// `count` sockets that `connect` (returning a socket, or -1) opens in a child
// process that has become uid/gid (no supplementary groups), handed back
// over a socket pair; the connections are the child's, as the peer sees them.
// Throws std::runtime_error, naming `target`, when not all of them connect.
template <class Connect>
std::vector<int> connect_as(Connect connect, const std::string& target, uid_t uid, gid_t gid, int count) {
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) throw std::runtime_error("socketpair failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(sp[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(3);
    for (int i = 0; i < count; ++i) {
      const int fd = connect();
      if (fd < 0) ::_exit(4);
      send_fd(sp[1], fd);
      ::close(fd);
    }
    ::_exit(0);
  }
  ::close(sp[1]);
  std::vector<int> fds;
  for (int i = 0; i < count; ++i) {
    const int fd = receive_fd(sp[0]);
    if (fd < 0) break;
    fds.push_back(fd);
  }
  ::close(sp[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (static_cast<int>(fds.size()) != count) {
    for (int fd : fds) ::close(fd);
    throw std::runtime_error("could not connect to " + target + " as uid " + std::to_string(uid) + " (child status " +
                             std::to_string(status) + ")");
  }
  return fds;
}

}  // namespace

int connect_unix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

std::vector<int> connect_unix_as(const std::string& path, uid_t uid, gid_t gid, int count) {
  return connect_as([&path] { return connect_unix(path); }, path, uid, gid, count);
}

int connect_tcp(const std::string& host, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (fd < 0 || ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

std::vector<int> connect_tcp_as(const std::string& host, int port, uid_t uid, gid_t gid, int count) {
  return connect_as([&] { return connect_tcp(host, port); }, host + ":" + std::to_string(port), uid, gid, count);
}

raw_peer::~raw_peer() {
  if (fd_ >= 0) ::close(fd_);
}

void raw_peer::send(const protocol::message& m) { send_bytes(protocol::encode(m)); }

void raw_peer::send_bytes(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;  // the server closed: what it said is still readable
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

bool raw_peer::fill(std::chrono::milliseconds limit) {
  if (eof_) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(limit.count())) <= 0) return false;
  char buf[65536];
  const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
  if (n <= 0) {
    eof_ = true;
    return false;
  }
  decoder_.feed(std::string_view(buf, static_cast<std::size_t>(n)), queued_);
  return true;
}

std::optional<protocol::message> raw_peer::next(std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (queued_.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !fill(left)) {
      if (!queued_.empty()) break;
      return std::nullopt;
    }
  }
  std::string body = std::move(queued_.front());
  queued_.erase(queued_.begin());
  return protocol::parse_message(std::string_view(body));
}

std::optional<protocol::message> raw_peer::reply_to(std::int64_t id, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    auto m = next(left);
    if (!m) return std::nullopt;
    if ((std::holds_alternative<protocol::ok>(*m) || std::holds_alternative<protocol::error>(*m)) &&
        protocol::id_of(*m) == id) {
      return m;
    }
  }
}

bool raw_peer::closed_within(std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!eof_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    fill(left);
    queued_.clear();
  }
  return true;
}

std::optional<protocol::message> raw_peer::hello(protocol::peer_role role, std::optional<std::int64_t> job_id,
                                                 std::optional<std::string> auth, bool launcher) {
  send(protocol::hello{1, protocol::k_protocol_version, role, std::move(auth), job_id, launcher});
  return next();
}

std::optional<protocol::error_code> error_of(const std::optional<protocol::message>& m) {
  if (!m) return std::nullopt;
  if (const auto* e = std::get_if<protocol::error>(&*m)) return e->code;
  return std::nullopt;
}

bool is_ok(const std::optional<protocol::message>& m) { return m && std::holds_alternative<protocol::ok>(*m); }

std::string describe(const std::optional<protocol::message>& m) {
  if (!m) return "(nothing: closed or timed out)";
  return protocol::to_json(*m).dump();
}

}  // namespace aqs::test
